"""A running syncer between the real Slurm sandbox and the Kubernetes API emulator, for scenarios."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

from syncer.app.service import ServiceConfig, SyncerService
from syncer.controllers.sync.options import SyncOptions
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.model.slurm import SlurmNode
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, SandboxError
from tests.helpers import wait_for

NAMESPACE = "slurm"
# Session sandbox nodes node00001..node01200; the low ones belong to the Slurm-side tests.
_fresh = itertools.count(400)

FAST_SYNC = SyncOptions(ready_grace_s=2.0)
FAST = ServiceConfig(
    controllers={"sync": FAST_SYNC},
    slurm_poll_interval_s=0.2,
    slurm_stale_after_s=10.0,
    # update_time probes, what these tests were written against: `auto` did not find the sandbox's
    # slurmctld (not on 6817) before it read /conf; tests of the hint ask for it
    slurm_metrics_url="off",
    leader_election=False,
    listen_host="127.0.0.1",
    listen_port=0,
    resync_s=5.0,
)


@asynccontextmanager
async def rig_over(sandbox: Sandbox, kube: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[Rig]:
    """A Rig over a test module's own sandbox, with its own REST reader (closed after)."""
    reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    await reader.start()
    try:
        yield Rig(sandbox, kube, kubeconfig, reader)
    finally:
        await reader.close()


def sync(**fields: Any) -> SyncOptions:
    """The sync controller's options of FAST with these changed (`sync(max_drain_fraction=1.0)`)."""
    return replace(FAST_SYNC, **fields)


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
    rig: Rig,
    config: ServiceConfig = FAST,
    *,
    slurm_url: str = "",
    api_version: str | None = None,
    token_file: Path | None = None,
    kubeconfig: Path | None = None,
    **changes: Any,
) -> AsyncIterator[SyncerService]:
    token = TokenFile(token_file or rig.sandbox.token_file)
    slurm = SlurmClient(slurm_url or rig.sandbox.rest_url, token, api_version=api_version)
    kube = await KubeClient.from_config(str(kubeconfig or rig.kubeconfig), qps=200, burst=400)
    service = SyncerService(slurm, kube, config.replace(**changes))
    await service.start()
    try:
        await service.wait_ready(30)
        yield service
    finally:
        await service.stop()


@dataclass
class HeldRead:
    """The next `GET /node/{name}` of a running syncer held until `release` is set (`held`: it began):
    slurmrestd slow to answer the fresh read before a drain."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    held: asyncio.Event = field(default_factory=asyncio.Event)


def hold_fresh_read(service: SyncerService, name: str) -> HeldRead:
    hold = HeldRead()
    slurm = service.context.slurm
    get_node = slurm.get_node

    async def slow_read(wanted: str) -> SlurmNode:
        if wanted == name and not hold.release.is_set():
            hold.held.set()
            await hold.release.wait()
        return await get_node(wanted)

    slurm.get_node = slow_read  # type: ignore[method-assign,assignment]
    return hold


async def cordoned_while_its_read_is_held(rig: Rig, service: SyncerService, name: str, node: str) -> HeldRead:
    """`node` cordoned, and the drain it asks for held in its fresh read of Slurm node `name`."""
    read = hold_fresh_read(service, name)
    rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})
    await wait_for(read.held.is_set, deadline_s=20, what="the drain's fresh read of the Slurm node")
    return read


async def settled(
    service: SyncerService, seen: Callable[[], bool], what: str, *, polls: int = 3, deadline_s: float = 20.0
) -> None:
    """Until the syncer's own caches show a change (`seen` reads them), then until `polls` more Slurm
    polls (failed ones count) and a reconcile have passed and the queue is idle. An assertion that the
    syncer did nothing about the change is then about a syncer that had its chance, not one that had not
    looked yet (an empty queue alone says nothing: it is empty before the change arrives too)."""
    await wait_for(seen, deadline_s, what=f"the syncer's caches to see {what}")
    cache, engine = service.slurm_cache, service.engine

    def polled() -> int:
        return cache.stats.probes + cache.stats.full_fetches + cache.stats.errors

    polls_from, reconciles_from = polled(), engine.stats.reconciles
    await wait_for(
        lambda: polled() >= polls_from + polls and engine.stats.reconciles > reconciles_from,
        deadline_s,
        what=f"{polls} Slurm polls and a reconcile after the syncer saw {what}",
    )
    await engine.queue.wait_idle()


def syncer_environment(rig: Rig) -> dict[str, str]:
    """`slurm-syncer run` as a process, configured through the environment as the Deployment does."""
    return {
        **os.environ,
        "SLURM_SYNCER_SLURM_URL": rig.sandbox.rest_url,
        "SLURM_SYNCER_SLURM_TOKEN_FILE": str(rig.sandbox.token_file),
        "SLURM_SYNCER_KUBECONFIG": str(rig.kubeconfig),
        "SLURM_SYNCER_SLURM_POLL_INTERVAL": "200ms",
        "SLURM_SYNCER_LISTEN_ADDRESS": "127.0.0.1:0",
        "SLURM_SYNCER_LEASE_DURATION": "3s",
        "SLURM_SYNCER_RENEW_DEADLINE": "2s",
        "SLURM_SYNCER_RETRY_PERIOD": "500ms",
        "SLURM_SYNCER_MAX_DRAIN_FRACTION": "1.0",
    }


async def start_daemon(rig: Rig) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "syncer", "--log-format", "json", "run",
        env=syncer_environment(rig), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def get(service: SyncerService, path: str) -> tuple[int, str]:
    """GET one of the running syncer's HTTP endpoints: (status, body)."""
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{service.http_port}{path}") as response:
            return response.status, await response.text()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one series in Prometheus text format."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        series_name, _, label_text = head.partition("{")
        if series_name != name:
            continue
        if all(f'{k}="{v}"' in label_text for k, v in labels.items()):
            return float(value)
    return None
