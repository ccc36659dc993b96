"""Fresh reads the one-pool scheduler makes before it writes, decoded into compact structs: one pod, one
batch/v1 Job, and the pods bound to one Node (what is left of the Node's room before a bind).

Why a read per bind and not a cache of every pod: a bind needs the requests of every pod on the candidate
Node, in every namespace and of every scheduler (DaemonSets, slurmd pods, other workloads). kube-apiserver
indexes pods by `spec.nodeName` (its watch cache and, since 1.31, consistent lists from it), which is
how each kubelet lists its own pods; one list per bind costs O(pods on that Node) and sees the newest state.
An informer of every pod in the cluster would hold them all (RESULTS.md: bytes per pod measured) and take
every pod's every status change. It needs `list` on pods at the cluster scope, as kube-scheduler has.
"""

from __future__ import annotations

from typing import Any

from syncer.kube.client import KubeClient
from syncer.kube.decode import Codec
from syncer.kube.errors import KubeError
from syncer.model.kube import KubeJob, PodUsage, SchedulerPod

_PAGE = 500


class SchedulingReads:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._pod = Codec("SchedulerPod")
        self._usage = Codec("PodUsage")
        self._job = Codec("Job")

    async def pod(self, namespace: str, name: str) -> SchedulerPod | None:
        """The pod as the API server has it now; None when there is none of that name."""
        found: SchedulerPod | None = await self._get(f"/api/v1/namespaces/{namespace}/pods/{name}", self._pod)
        return found

    async def job(self, namespace: str, name: str) -> KubeJob | None:
        """A batch/v1 Job; None when there is none of that name."""
        found: KubeJob | None = await self._get(
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", self._job
        )
        return found

    async def _get(self, path: str, codec: Codec) -> Any:
        """One object decoded by `codec`; None when the API server has none at `path`."""
        try:
            raw = await self.client.request_bytes("GET", path)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise
        return codec.decode_object(raw)

    async def pods_on_node(self, node: str) -> list[PodUsage]:
        """Every pod bound to `node` that has not ended (terminating ones included: they hold their room
        until they are gone), all namespaces, as a consistent list (no resourceVersion: the newest)."""
        if not node:
            raise ValueError("a Node name is needed: an empty one selects every unbound pod")
        selector = f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed"
        pods: list[PodUsage] = []
        token = ""
        while True:
            params = {"fieldSelector": selector, "limit": str(_PAGE)}
            if token:
                params["continue"] = token
            raw = await self.client.request_bytes("GET", "/api/v1/pods", params=params)
            page, _rv, token = self._usage.decode_list(raw)
            pods.extend(page)
            if not token:
                return pods
