"""What one controller offers the others without either importing the other: the Slurm nodes of a
NodeSet (its pods', and a power-managed one's declared members: syncer/controllers/nodeset/members.py; the
NodeSet controller provides them, a SlurmPartition's `nodes.nodeSets` reads them), and
Slurm's job counts by partition and state (the service's job poll sets them; the partition controller
watches them: a managed partition's jobs moved, so its status is written again)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

NodeSetMembers = Callable[[str, str], list[str] | None]  # (namespace, name) -> Slurm nodes; None: no such
JobCounts = Mapping[tuple[str, str], int]  # (partition, state) -> jobs; `a,b` for a job pending in both
JobsListener = Callable[[JobCounts, JobCounts], None]  # (before, now)


class NodeSets:
    """The members of NodeSets, by name: None for every name until the NodeSet controller provides them."""

    def __init__(self) -> None:
        self._members: NodeSetMembers | None = None

    def provide(self, members: NodeSetMembers) -> None:
        self._members = members

    def members(self, namespace: str, name: str) -> list[str] | None:
        return self._members(namespace, name) if self._members is not None else None


class Jobs:
    """Slurm's job counts as the last poll read them; listeners are told of each new reading."""

    def __init__(self) -> None:
        self.counts: JobCounts = {}
        self.read_once = False  # no poll answered yet: the counts say nothing (a partition's jobs unknown)
        self._listeners: list[JobsListener] = []

    def subscribe(self, listener: JobsListener) -> None:
        self._listeners.append(listener)

    def read(self, counts: JobCounts) -> None:
        before, self.counts, self.read_once = self.counts, counts, True
        for listener in self._listeners:
            listener(before, counts)
