"""The NodeSet reconciler's one path for the writes it makes itself (NodeSet status, its
PodDisruptionBudget, pods, Slurm records and their removal stamps): each passes the write gate here, once,
so a follower writes nothing and a dry run logs what it would have done. Labels and annotations go through
the KubeWriter and Events through the EventRecorder, which check the same gate."""

from __future__ import annotations

import contextlib
from typing import Any

import structlog

from syncer.kube.client import MERGE_PATCH, KubeClient
from syncer.kube.errors import KubeError
from syncer.kube.events import EventRecorder, ObjectRef
from syncer.kube.gate import WriteGate
from syncer.kube.writer import pod_path
from syncer.model.kube import KubeNodeSet, KubePod
from syncer.nodeset import manifests
from syncer.nodeset.spec import NodeSetSpec
from syncer.slurm.cache import NodeCache
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmNotFound

log = structlog.get_logger("syncer.nodeset")


class NodeSetWrites:
    def __init__(
        self,
        *,
        kube: KubeClient,
        slurm: SlurmClient,
        slurm_cache: NodeCache,
        gate: WriteGate,
        events: EventRecorder,
    ) -> None:
        self.events = events
        self.kube = kube
        self.slurm = slurm
        self.slurm_cache = slurm_cache
        self.gate = gate

    def _allowed(self, would: str, **fields: Any) -> bool:
        """The gate, checked once per write: NotLeader when not leading; False (logged) in a dry run."""
        if self.gate.check():
            return True
        log.info(f"dry-run: would {would}", **fields)
        return False

    async def event(self, nodeset: KubeNodeSet, type_: str, reason: str, message: str) -> None:
        ref = ObjectRef("NodeSet", nodeset.name, nodeset.namespace, nodeset.uid, manifests.API_VERSION)
        await self.events.record(ref, type_, reason, message)  # the recorder checks the gate

    async def status(self, nodeset: KubeNodeSet, status: dict[str, Any]) -> None:
        if not self._allowed("update NodeSet status", nodeset=nodeset.key, status=status):
            return
        path = manifests.nodeset_path(nodeset.namespace, nodeset.name) + "/status"
        try:
            await self.kube.patch(path, {"status": status}, MERGE_PATCH)
        except KubeError as exc:
            if exc.status != 404:  # deleted meanwhile
                raise

    async def busy_pdb(self, nodeset: KubeNodeSet) -> bool:
        """Creates the NodeSet's PodDisruptionBudget for busy pods; True once it exists."""
        if not self._allowed("create PodDisruptionBudget", nodeset=nodeset.key):
            return False
        path = f"/apis/policy/v1/namespaces/{nodeset.namespace}/poddisruptionbudgets"
        try:
            await self.kube.create(path, manifests.busy_pdb_manifest(nodeset))
            log.info("created PodDisruptionBudget for busy slurmd pods", nodeset=nodeset.key)
        except KubeError as exc:
            if exc.status != 409:  # AlreadyExists: fine
                raise
        return True

    async def slurm_comment(self, name: str, comment: str) -> None:
        if not self._allowed("set Slurm node comment", slurm_node=name, comment=comment):
            return
        with contextlib.suppress(SlurmNotFound):  # gone already: nothing to mark
            await self.slurm.update_node(name, comment=comment)
        self.slurm_cache.nudge()

    async def delete_pod(self, pod: KubePod) -> bool:
        """True when this call deleted it (not when it was gone or replaced already)."""
        if not self._allowed("delete pod", pod=pod.key):
            return False
        try:
            await self.kube.delete(
                pod_path(pod.namespace, pod.name), {"preconditions": {"uid": pod.uid}} if pod.uid else None
            )
        except KubeError as exc:
            if exc.status not in (404, 409):  # gone, or replaced by a new pod of that name
                raise
            return False
        return True

    async def delete_slurm_node(self, name: str) -> bool:
        if not self._allowed("delete Slurm node", slurm_node=name):
            return False
        with contextlib.suppress(SlurmNotFound):  # gone already
            await self.slurm.delete_node(name)
        self.slurm_cache.nudge()
        return True

    async def create_pod(self, nodeset: KubeNodeSet, spec: NodeSetSpec, member: Any) -> bool:
        """True when created; False when it exists already (the cache has not seen it) or in a dry run.
        The API server's refusal of the template (400, 422) is raised for the caller to report."""
        if not self._allowed("create pod", pod=member.name):
            return False
        path = f"/api/v1/namespaces/{nodeset.namespace}/pods"
        try:
            await self.kube.create(path, manifests.pod_manifest(nodeset, spec, member))
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        return True
