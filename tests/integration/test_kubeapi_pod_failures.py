"""The fake scheduler and kubelet show pods that cannot start as kube-scheduler and the kubelet do:
Unschedulable with the scheduler's message (placed once a Node fits), ErrImagePull then ImagePullBackOff,
CrashLoopBackOff; read through kubernetes_asyncio and the real kubectl."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from syncer.controllers.nodeset.pod_failures import start_failure
from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from syncer.testing.kubeapi.emulator import node_manifest
from tests.fixtures.kube import Kubectl
from tests.helpers import wait_for


@pytest.fixture
async def core(kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[Any]:
    await config.load_kube_config(config_file=str(kubeconfig))
    async with client.ApiClient() as api:
        yield client.CoreV1Api(api)


def scheduled(kube_api: KubeApiEmulator, name: str) -> dict[str, Any]:
    conditions = ((kube_api.pod("default", name) or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), {})


def waiting_reason(kube_api: KubeApiEmulator, name: str) -> str:
    statuses = ((kube_api.pod("default", name) or {}).get("status") or {}).get("containerStatuses") or []
    return str(((statuses[0].get("state") or {}).get("waiting") or {}).get("reason", "")) if statuses else ""


def pod(name: str, image: str = "slurmd:26.05", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "slurmd", "image": image}], **spec}}


async def test_unplaceable_pod_gets_the_schedulers_message_and_is_placed_when_a_node_fits(
    kube_api: KubeApiEmulator, core: Any, kubectl: Kubectl
):
    kube_api.seed(SeedOptions(nodes=3))
    await core.patch_node("node-0000", {"spec": {"unschedulable": True}})
    kube_api.set_node_condition(
        "node-0001", "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting"
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100"]}]}
                ]
            }
        }
    }
    await core.create_namespaced_pod("default", pod("gpu-0", affinity=affinity))
    await wait_for(
        lambda: scheduled(kube_api, "gpu-0").get("reason") == "Unschedulable", what="Unschedulable"
    )
    read = await core.read_namespaced_pod("gpu-0", "default")
    condition = next(c for c in read.status.conditions if c.type == "PodScheduled")
    assert (read.status.phase, condition.status) == ("Pending", "False")
    assert condition.message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert "Pending" in await kubectl("get", "pod", "gpu-0")
    # the syncer's reading of it, once the bound has passed
    reason = start_failure(
        kube_api.pod("default", "gpu-0") or {}, None, kube_api.api.clock() + 60, unschedulable_after_s=30
    )
    assert reason is not None and reason.startswith("pod default/gpu-0 Unschedulable for ")
    # a Node that fits appears: the pod is placed there and runs
    added = node_manifest("gpu-node", 9, gpus=8)
    added["metadata"]["labels"]["pool"] = "a100"
    kube_api.create("", "v1", "nodes", added)
    await wait_for(
        lambda: (kube_api.pod("default", "gpu-0") or {}).get("status", {}).get("phase") == "Running",
        what="pod placed on the new Node and running",
    )
    assert kube_api.pod("default", "gpu-0")["spec"]["nodeName"] == "gpu-node"  # type: ignore[index]


async def test_no_node_at_all(kube_api: KubeApiEmulator, core: Any):
    await core.create_namespaced_pod("default", pod("lonely", node_selector={"pool": "a100"}))
    await wait_for(
        lambda: scheduled(kube_api, "lonely").get("reason") == "Unschedulable", what="Unschedulable"
    )
    assert scheduled(kube_api, "lonely")["message"] == "no nodes available to schedule pods"


async def test_image_that_cannot_be_pulled_and_crash_loop(
    kube_api: KubeApiEmulator, core: Any, kubectl: Kubectl
):
    kube_api.seed(SeedOptions(nodes=1))
    await core.create_namespaced_pod("default", pod("bad-image", image="invalid.example/slurmd:1"))
    await core.create_namespaced_pod("default", pod("crasher", image="crashloop.example/slurmd:1"))
    await wait_for(lambda: waiting_reason(kube_api, "bad-image") == "ErrImagePull", what="ErrImagePull")
    await wait_for(
        lambda: waiting_reason(kube_api, "bad-image") == "ImagePullBackOff", what="ImagePullBackOff"
    )
    read = await core.read_namespaced_pod("bad-image", "default")
    assert read.status.phase == "Pending"
    assert (
        read.status.container_statuses[0].state.waiting.message
        == 'Back-off pulling image "invalid.example/slurmd:1"'
    )
    ready = next(c for c in read.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [slurmd]",
    )
    await wait_for(lambda: waiting_reason(kube_api, "crasher") == "CrashLoopBackOff", what="CrashLoopBackOff")
    crasher = await core.read_namespaced_pod("crasher", "default")
    status = crasher.status.container_statuses[0]
    assert (crasher.status.phase, status.restart_count, status.last_state.terminated.exit_code) == (
        "Running",
        1,
        1,
    )
    table = await kubectl("get", "pods")
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
    assert rows["bad-image"][1:3] == ["0/1", "ImagePullBackOff"]
    assert rows["crasher"][1:4] == ["0/1", "CrashLoopBackOff", "1"]
    node = kube_api.node("node-0000")
    assert start_failure(kube_api.pod("default", "crasher") or {}, node, 0, unschedulable_after_s=30) == (
        "pod default/crasher CrashLoopBackOff (container slurmd, 1 restarts, last exit 1 (Error))"
    )
