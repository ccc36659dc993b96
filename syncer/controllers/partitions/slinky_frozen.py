"""Telling where KeepPartInfo keeps a partition of Slinky's unlike its slurm.conf line (docs/interop.md): a
Warning Event on the Slinky object, a log line and `slurm_syncer_slinky_partition_drift` (what differs:
slinky_drift.py, pure). Told once while it stays the same; cleared (gauge 0, a log line, no Event) once they
agree. Nothing is written to Slurm: the command to run is in the message."""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from syncer.controllers.partitions.slinky import SlinkyPartitions
from syncer.controllers.partitions.slinky_drift import frozen
from syncer.kube.events import EventRecorder
from syncer.slurm.partitions import PartitionState

log = structlog.get_logger("syncer.controllers.partitions")
REASON = "SlinkyPartitionFrozen"


class FrozenPartitions:
    def __init__(self, slinky: SlinkyPartitions, events: EventRecorder) -> None:
        self.slinky = slinky
        self.events = events
        # (partition, "NodeSet ns/name") -> 1 while slurmctld keeps it unlike slurm.conf, 0 once they agree
        self.drift: dict[tuple[str, str], int] = {}
        self._said: dict[tuple[str, str], str] = {}  # the message last told, by (partition, object)

    @property
    def standing(self) -> bool:
        return bool(self._said)

    async def compare(self, keeps: bool | None, present: Mapping[str, PartitionState]) -> None:
        """Compare Slinky's lines with the partitions just read. Without KeepPartInfo nothing is frozen: the
        next reconfigure applies slurm.conf. Unknown (/conf unread: an error): what was told stands, neither
        cleared nor told again (the controller reads /conf again soon)."""
        self.slinky.forget(present)
        if keeps is None:
            return
        settings = {name: state.settings for name, state in present.items()}
        found = frozen(self.slinky.lines(), self.slinky.removed, settings) if keeps else {}
        for key, message in found.items():
            if self._said.get(key) == message:
                continue
            partition, where = key
            log.warning("Slinky's partition kept unlike slurm.conf", partition=partition, object=where,
                        why=message)  # fmt: skip
            ref = self.slinky.ref(where)
            if ref is not None:
                await self.events.record(ref, "Warning", REASON, message)
        for partition, where in sorted(set(self._said) - set(found)):
            log.info("Slinky's partition agrees with slurm.conf again", partition=partition, object=where)
        self._said = found
        self.drift = {**dict.fromkeys(self.drift, 0), **dict.fromkeys(found, 1)}  # a few series, kept at 0
