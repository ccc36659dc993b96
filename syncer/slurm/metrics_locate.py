"""`--slurm-metrics-url auto`: slurmctld's metrics found without configuration. slurmrestd's ping names the
controllers (host, primary or backup, answering) but no port; slurmctld serves its metrics on SlurmctldPort
(6817 unless `--slurm-metrics-port` says otherwise). The reader checks that the primary's
`/metrics/partitions` gives node counts before it is used, and looks again after any failed read, so a
backup that takes over is followed. When there are no metrics to find (24.11, MetricsType unset, a port
that is not slurmctld's) every read fails with why and what to do, and the node cache probes slurmrestd as
without the hint (its `slurm_metrics_hint_failed` log line and `..._hint_failing` metric say so)."""

from __future__ import annotations

from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmError
from syncer.slurm.metrics_hint import PATH, MetricsReader, Reading, SlurmMetricsUnavailable
from syncer.slurm.models import PingEntry

DEFAULT_PORT = 6817  # Slurm's default SlurmctldPort
REMEDY = (
    "enable MetricsType=metrics/openmetrics in slurm.conf (Slurm 25.11+), or give --slurm-metrics-url "
    "http://slurmctld-host:SlurmctldPort (or --slurm-metrics-port when SlurmctldPort is not 6817)"
)
COST = (
    "without it the syncer asks slurmrestd whether nodes changed every poll, and every job start or end "
    "makes that a full node list"
)


def primary_host(controllers: list[PingEntry]) -> str | None:
    """The host of the primary controller that answers; a backup that answers when no primary does."""
    answering = [c for c in controllers if c.up and c.hostname]
    for controller in answering:
        if controller.is_primary:
            return controller.hostname
    return answering[0].hostname if answering else None


class LocatedMetricsReader:
    """A MetricsReader for whichever slurmctld is primary now (the node cache's `hint`)."""

    def __init__(self, slurm: SlurmClient, port: int = DEFAULT_PORT, *, timeout_s: float = 2.0) -> None:
        self.slurm = slurm
        self.port = port
        self.timeout_s = timeout_s
        self._reader: MetricsReader | None = None
        self.url = ""  # where the counts were last read from ("" until found)

    async def locate(self) -> MetricsReader:
        try:
            host = primary_host(await self.slurm.controllers())
        except SlurmError as exc:
            raise SlurmMetricsUnavailable(
                f"slurmrestd's ping failed ({exc}): slurmctld not located"
            ) from None
        if host is None:
            raise SlurmMetricsUnavailable("slurmrestd's ping names no answering slurmctld")
        return MetricsReader(f"http://{host}:{self.port}", timeout_s=self.timeout_s)

    async def read(self) -> Reading:
        reader = self._reader
        if reader is None:
            reader = await self.locate()
        try:
            reading = await reader.read()
        except SlurmMetricsUnavailable as exc:
            await reader.close()
            self._reader, self.url = None, ""
            where, why = reader.url.removesuffix(PATH), str(exc).removeprefix(f"{PATH}: ")
            raise SlurmMetricsUnavailable(
                f"slurmctld at {where} serves no metrics ({why}): {REMEDY}"
            ) from None
        except BaseException:
            await reader.close()
            self._reader, self.url = None, ""  # look for the primary again next time
            raise
        self._reader, self.url = reader, reader.url.removesuffix(PATH)
        return reading

    async def read_page(self, path: str) -> str:
        """Another metrics page from the slurmctld the last hint read found."""
        if self._reader is None:
            raise SlurmMetricsUnavailable("slurmctld not located yet", endpoint=path)
        return await self._reader.read_page(path)

    async def close(self) -> None:
        if self._reader is not None:
            await self._reader.close()
            self._reader = None
