"""A running syncer between the real Slurm sandbox and the Kubernetes API emulator, for scenarios."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from syncer.app.service import ServiceConfig, SyncerService
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.model.slurm import SlurmNode
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.sync.options import SyncOptions
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, SandboxError

NAMESPACE = "slurm"
# Session sandbox nodes node00001..node01200; the low ones belong to the Slurm-side tests.
_fresh = itertools.count(400)

FAST = ServiceConfig(
    options=SyncOptions(ready_grace_s=2.0),
    slurm_poll_interval_s=0.2,
    slurm_stale_after_s=10.0,
    leader_election=False,
    listen_host="127.0.0.1",
    listen_port=0,
    resync_s=5.0,
)


def fresh_slurm_nodes(count: int) -> list[str]:
    return [f"node{next(_fresh):05d}" for _ in range(count)]


@dataclass
class Rig:
    sandbox: Sandbox
    kube: KubeApiEmulator
    kubeconfig: Path
    reader: SlurmClient  # the test's own view of Slurm, through the REST API
    used: list[str] = field(default_factory=list)

    async def slurm(self, name: str) -> SlurmNode:
        node = await self.reader.get_node(name)
        assert node is not None, f"Slurm node {name} is missing"
        return node

    def bind_pod(self, slurm_name: str, *, node_labels: dict[str, str] | None = None) -> tuple[str, str]:
        """A Kubernetes Node and a slurmd pod on it labelled with `slurm_name`; returns (node, pod)."""
        self.used.append(slurm_name)
        node = f"k8s-{slurm_name}"
        if self.kube.node(node) is None:
            self.kube.create("", "v1", "nodes", node_body(node, node_labels or {}))
        if self.kube.get("", "v1", "namespaces", NAMESPACE) is None:
            self.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
        pod = f"slurmd-{slurm_name}"
        body = {
            "metadata": {"name": pod, "labels": {Keys.NODE_NAME_LABEL: slurm_name}},
            "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
        }
        self.kube.create("", "v1", "pods", body, namespace=NAMESPACE)
        return node, pod

    def bind_node(self, slurm_name: str) -> str:
        """Node-bound (hybrid host): the Node itself carries the label."""
        self.used.append(slurm_name)
        node = f"host-{slurm_name}"
        self.kube.create("", "v1", "nodes", node_body(node, {Keys.NODE_NAME_LABEL: slurm_name}))
        return node

    def annotate_pod(self, pod: str, annotations: dict[str, str | None]) -> None:
        self.kube.patch(
            "", "v1", "pods", pod, {"metadata": {"annotations": annotations}}, namespace=NAMESPACE
        )

    def pod_obj(self, slurm_name: str) -> dict[str, Any]:
        pod = self.kube.pod(NAMESPACE, f"slurmd-{slurm_name}")
        assert pod is not None
        return pod

    def node_obj(self, name: str) -> dict[str, Any]:
        node = self.kube.node(name)
        assert node is not None
        return node

    def events_for(self, name: str) -> list[dict[str, Any]]:
        return [
            e for e in self.kube.api.store.objects_of(("", "events")) if e["involvedObject"]["name"] == name
        ]

    def scontrol(self, *args: str) -> None:
        self.sandbox.scontrol(*args)

    def restore(self) -> None:
        for name in self.used:
            for state in ("undrain", "resume"):
                with contextlib.suppress(SandboxError):  # the node was not in that state
                    self.sandbox.scontrol("update", f"nodename={name}", f"state={state}")


def node_body(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        },
    }


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


@asynccontextmanager
async def running_syncer(
    rig: Rig, config: ServiceConfig = FAST, *, slurm_url: str = "", **changes: Any
) -> AsyncIterator[SyncerService]:
    slurm = SlurmClient(slurm_url or rig.sandbox.rest_url, TokenFile(rig.sandbox.token_file))
    kube = await KubeClient.from_config(str(rig.kubeconfig), qps=200, burst=400)
    service = SyncerService(slurm, kube, replace(config, **changes))
    await service.start()
    try:
        await service.wait_ready(30)
        yield service
    finally:
        await service.stop()
