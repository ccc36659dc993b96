"""The NodeSet controller's writes (NodeSet status, its PodDisruptionBudget, pods, Events; Slurm records
and their removal stamps through the context's Slurm writer): what each means for a NodeSet (its
manifests, which API answers are fine), over the context's writers, which check the write gate once per
write, so a follower writes nothing and a dry run logs what it would have done."""

from __future__ import annotations

from typing import Any

import structlog

from syncer.control.context import ControllerContext
from syncer.controllers.nodeset import manifests
from syncer.controllers.nodeset.spec import NodeSetSpec
from syncer.kube.errors import KubeError
from syncer.kube.events import ObjectRef
from syncer.kube.writer import pod_path
from syncer.model.kube import KubeNodeSet, KubePod

log = structlog.get_logger("syncer.controllers.nodeset")
CREATED, EXISTS, DRY_RUN = "created", "exists", "dry-run"  # what create_pod did


class NodeSetWrites:
    def __init__(self, context: ControllerContext) -> None:
        self.events = context.events
        self.writer = context.writer
        self.slurm_writer = context.slurm_writer  # set_comment, delete_node
        self.cluster = context.cluster  # on every pod it makes: no other release keeps the pod

    async def event(self, nodeset: KubeNodeSet, type_: str, reason: str, message: str) -> None:
        ref = ObjectRef("NodeSet", nodeset.name, nodeset.namespace, nodeset.uid, manifests.API_VERSION)
        await self.events.record(ref, type_, reason, message)  # the recorder checks the gate

    async def status(self, nodeset: KubeNodeSet, status: dict[str, Any]) -> None:
        path = manifests.nodeset_path(nodeset.namespace, nodeset.name) + "/status"
        try:
            await self.writer.merge_patch(path, {"status": status}, what=f"NodeSet {nodeset.key} status")
        except KubeError as exc:
            if exc.status != 404:  # deleted meanwhile
                raise

    async def busy_pdb(self, nodeset: KubeNodeSet) -> bool:
        """Creates the NodeSet's PodDisruptionBudget for busy pods; True once it exists."""
        path = f"/apis/policy/v1/namespaces/{nodeset.namespace}/poddisruptionbudgets"
        try:
            if not await self.writer.create(
                path, manifests.busy_pdb_manifest(nodeset), what="busy pods' PDB"
            ):
                return False
            log.info("created PodDisruptionBudget for busy slurmd pods", nodeset=nodeset.key)
        except KubeError as exc:
            if exc.status != 409:  # AlreadyExists: fine
                raise
        return True

    async def pod_metadata(
        self, pod: KubePod, field: str, wanted: dict[str, str | None], what: str
    ) -> bool | None:
        """A pod's `field` ("labels" or "annotations") made `wanted`, from a fresh read: True when written,
        False when nothing needed writing (or a dry run), None when the pod is gone (404). The pod cache
        is behind the API server then; its DELETED event brings the NodeSet back. One gone pod is no reason
        to fail the whole pass (controller-runtime's IgnoreNotFound); the cache is left to its watch."""
        setter = self.writer.set_labels if field == "labels" else self.writer.set_annotations
        try:
            written = await setter(pod_path(pod.namespace, pod.name), wanted, what=what)
        except KubeError as exc:
            if exc.status != 404:
                raise
            log.debug("pod gone before its write, skipped", pod=pod.key, what=what)
            return None
        return written is not None

    async def delete_pod(self, pod: KubePod) -> bool:
        """True when this call deleted it (not when it was gone or replaced already)."""
        try:
            return await self.writer.delete(
                pod_path(pod.namespace, pod.name),
                {"preconditions": {"uid": pod.uid}} if pod.uid else None,
                what=f"pod {pod.key}",
            )
        except KubeError as exc:
            if exc.status not in (404, 409):  # gone, or replaced by a new pod of that name
                raise
            return False

    async def create_pod(self, nodeset: KubeNodeSet, spec: NodeSetSpec, member: Any) -> str:
        """CREATED; EXISTS when the API server has it already (the cache has not seen it); DRY_RUN when the
        writer only logged it. The API server's refusal of the template (400, 422) is raised for the caller
        to report."""
        path = f"/api/v1/namespaces/{nodeset.namespace}/pods"
        try:
            created = await self.writer.create(
                path, manifests.pod_manifest(nodeset, spec, member, self.cluster), what=f"pod {member.name}"
            )
        except KubeError as exc:
            if exc.status == 409:
                return EXISTS
            raise
        return CREATED if created else DRY_RUN
