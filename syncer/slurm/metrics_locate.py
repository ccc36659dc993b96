"""`--slurm-metrics-url auto`: slurmctld's metrics found without configuration. slurmrestd's ping names the
controllers (host, primary or backup, answering) but no port. Where slurmrestd has `GET /conf` (REST
v0.0.45, Slurm 26.05) it gives SlurmctldPort, each controller's address and MetricsType, so the reader
goes where slurmctld really listens; elsewhere (24.11's v0.0.40-42, 25.x's v0.0.43-44) it uses the ping's
host name and `--slurm-metrics-port` (6817, Slurm's default SlurmctldPort). `source` says which was used.
The reader checks that the primary's `/metrics/partitions` gives node counts before it is used, and looks
again after any failed read, so a backup that takes over is followed. When there are no metrics to find
(24.11, MetricsType unset, a port that is not slurmctld's) every read fails with why and what to do, and
the node cache probes slurmrestd as without the hint (its `slurm_metrics_hint_failed` log line and
`..._hint_failing` metric say so)."""

from __future__ import annotations

from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmError
from syncer.slurm.metrics_hint import PATH, MetricsReader, Reading, SlurmMetricsUnavailable
from syncer.slurm.models import PingEntry, SlurmctldConf

DEFAULT_PORT = 6817  # Slurm's default SlurmctldPort
OPENMETRICS = "metrics/openmetrics"
REMEDY = (
    "enable MetricsType=metrics/openmetrics in slurm.conf (Slurm 25.11+), or give --slurm-metrics-url "
    "http://slurmctld-host:SlurmctldPort (or --slurm-metrics-port when SlurmctldPort is not 6817); a "
    "NetworkPolicy must let the syncer reach that port (chart: networkPolicy.slurmctld.ports)"
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


def address_of(host: str, conf: SlurmctldConf) -> str:
    """The address slurm.conf gives the controller `host` (SlurmctldHost=host(address)), else `host`."""
    for controller in conf.controllers:
        if controller.machine == host and controller.address:
            return controller.address
    return host


class LocatedMetricsReader:
    """A MetricsReader for whichever slurmctld is primary now (the node cache's `hint`)."""

    def __init__(self, slurm: SlurmClient, port: int = DEFAULT_PORT, *, timeout_s: float = 2.0) -> None:
        self.slurm = slurm
        self.port = port
        self.timeout_s = timeout_s
        self._reader: MetricsReader | None = None
        self.url = ""  # where the counts were last read from ("" until found)
        self.source = ""  # how that address was found (`slurm-syncer check` says it)

    async def locate(self) -> MetricsReader:
        try:
            host = primary_host(await self.slurm.controllers())
        except SlurmError as exc:
            raise SlurmMetricsUnavailable(
                f"slurmrestd's ping failed ({exc}): slurmctld not located"
            ) from None
        if host is None:
            raise SlurmMetricsUnavailable("slurmrestd's ping names no answering slurmctld")
        address, port, self.source = await self._where(host)
        return MetricsReader(f"http://{address}:{port}", timeout_s=self.timeout_s)

    async def _where(self, host: str) -> tuple[str, int, str]:
        """Address, port, and where they came from: slurmrestd's /conf where it has one, else the ping's
        host name and the port option."""
        fallback = (host, self.port, f"slurmrestd's ping and --slurm-metrics-port {self.port}")
        try:
            conf = await self.slurm.slurmctld_conf()
        except SlurmError as exc:
            return fallback[0], fallback[1], f"{fallback[2]} (slurmrestd's /conf failed: {exc})"
        if conf is None or not conf.port:
            return fallback
        if conf.metrics_type != OPENMETRICS:
            raise SlurmMetricsUnavailable(
                f"slurmctld's MetricsType is {conf.metrics_type or 'unset'!r} (slurmrestd's /conf): "
                f"it serves no metrics; {REMEDY}"
            )
        return address_of(host, conf), conf.port, f"slurmrestd's /conf (SlurmctldPort {conf.port})"

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
                f"slurmctld at {where} (from {self.source}) serves no metrics ({why}): {REMEDY}"
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
