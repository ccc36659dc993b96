"""Every Slurm write of every controller: node updates through the group commit (syncer/control/bulk.py),
reservations, partitions, a NodeSet's records and their removal stamps. The write gate is checked here,
once per request: a follower writes nothing (NotLeader), a dry run logs what it would have done and says
False."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from syncer.control.bulk import BulkWriter, Still
from syncer.control.gate import WriteGate
from syncer.model.jobs import JobSubmission, SlurmJob
from syncer.runtime.gate import allowed
from syncer.slurm.cache import NodeCache
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmNotFound
from syncer.slurm.jobs import Placeholder
from syncer.slurm.partitions import PartitionSettings, PartitionWrite
from syncer.slurm.updates import NodeUpdate


class SlurmWriter:
    def __init__(self, slurm: SlurmClient, slurm_cache: NodeCache, gate: WriteGate) -> None:
        self.slurm = slurm
        self.slurm_cache = slurm_cache
        self.gate = gate
        self.bulk = BulkWriter(slurm, gate)  # identical node updates decided together: one request

    def _allowed(self, would: str, **fields: Any) -> bool:
        return allowed(self.gate, would, **fields)

    async def update(
        self, name: str, update: NodeUpdate | None = None, *, state: list[str] | None = None,
        reason: str | None = None, linger_s: float = 0.0, still: Still | None = None,
    ) -> bool:  # fmt: skip
        """A node update in the group commit (see BulkWriter.update); False in a dry run."""
        return await self.bulk.update(
            name, update, state=state, reason=reason, linger_s=linger_s, still=still
        )

    async def set_comment(self, name: str, comment: str) -> bool:
        if not self._allowed("set Slurm node comment", slurm_node=name, comment=comment):
            return False
        with contextlib.suppress(SlurmNotFound):  # gone already: nothing to mark
            await self.slurm.update_node(name, comment=comment)
        self.slurm_cache.nudge()
        return True

    async def delete_node(self, name: str) -> bool:
        if not self._allowed("delete Slurm node", slurm_node=name):
            return False
        with contextlib.suppress(SlurmNotFound):  # gone already
            await self.slurm.delete_node(name)
        self.slurm_cache.nudge()
        return True

    async def create_node(self, name: str, node_conf: str) -> bool:
        """Declares a node (`POST /new/node/`); False in a dry run or when it exists already."""
        if not self._allowed("create Slurm node", slurm_node=name, node_conf=node_conf):
            return False
        created = await self.slurm.create_node(node_conf)
        self.slurm_cache.nudge()
        return created

    async def power_down_force(self, name: str, reason: str) -> bool:
        """POWER_DOWN_FORCE with a reason: Slurm requeues the node's jobs and powers it down. Not a drain:
        the safety valve does not count it (an explicit power decision, as a scale-in). False in a dry run."""
        if not self._allowed("force Slurm node power-down", slurm_node=name, reason=reason):
            return False
        with contextlib.suppress(SlurmNotFound):  # gone already: nothing to power down
            await self.slurm.update_node(name, state=["POWER_DOWN_FORCE"], reason=reason)
        self.slurm_cache.nudge()
        return True

    async def resume(self, name: str) -> bool:
        """RESUME a node the syncer powered down (its DOWN is ours): Slurm may power it up again. False in
        a dry run."""
        if not self._allowed("resume Slurm node", slurm_node=name):
            return False
        with contextlib.suppress(SlurmNotFound):
            await self.slurm.update_node(name, state=["RESUME"])
        self.slurm_cache.nudge()
        return True

    async def put_reservation(
        self, name: str, *, nodes: Sequence[str], end: int, start: int | None, flags: Sequence[str],
        users: Sequence[str], comment: str,
    ) -> bool:  # fmt: skip
        """Creates or updates a reservation; False in a dry run."""
        if not self._allowed("write reservation", reservation=name, nodes=len(nodes), comment=comment):
            return False
        await self.slurm.put_reservation(
            name, nodes=nodes, end=end, start=start, flags=flags, users=users, comment=comment
        )
        return True

    async def delete_reservation(self, name: str) -> bool:
        """False in a dry run; a reservation already gone counts as deleted."""
        if not self._allowed("delete reservation", reservation=name):
            return False
        await self.slurm.delete_reservation(name)
        return True

    async def put_partition(self, name: str, settings: PartitionSettings, *, nodes: str | None) -> bool:
        """Creates or updates a partition (only `nodes` and the managed settings sent); False in a dry run."""
        if not self._allowed("write partition", partition=name, nodes=nodes, settings=settings.managed()):
            return False
        await self.slurm.put_partition(name, settings, nodes=nodes)
        return True

    async def put_partitions(self, writes: Sequence[PartitionWrite]) -> bool:
        """Several creates or updates in one request (Slurm applies each it can); False in a dry run."""
        names = [w.name for w in writes]
        if not self._allowed("write partitions", partitions=names):
            return False
        await self.slurm.put_partitions(writes)
        return True

    async def delete_partition(self, name: str) -> bool:
        """False in a dry run; a partition already gone counts as deleted. Slurm refuses one with jobs
        (error 2075)."""
        if not self._allowed("delete partition", partition=name):
            return False
        await self.slurm.delete_partition(name)
        return True

    # -- the one-pool scheduler's jobs -------------------------------------------------------------
    async def submit_job(self, submission: JobSubmission, *, placeholder: Placeholder) -> int | None:
        """Submits a pod's job (never retried: SlurmClient.submit_job); its id, or None in a dry run."""
        if not self._allowed("submit Slurm job", name=submission.name, marker=submission.marker):
            return None
        return await self.slurm.submit_job(submission, placeholder=placeholder)

    async def allocate_job(self, submission: JobSubmission) -> int | None:
        """Allocates a pod's external job now or not at all (never retried: SlurmClient.allocate_job); its id,
        or None in a dry run."""
        if not self._allowed("allocate Slurm job", name=submission.name, marker=submission.marker):
            return None
        return await self.slurm.allocate_job(submission)

    async def end_job(self, job: SlurmJob) -> bool:
        """Ends a pod's job (SlurmClient.end_job); False in a dry run or when Slurm had ended it already."""
        if not self._allowed("end Slurm job", job_id=job.job_id, name=job.name):
            return False
        return await self.slurm.end_job(job)
