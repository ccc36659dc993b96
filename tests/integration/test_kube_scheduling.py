"""The syncer's Kubernetes edge for the one-pool scheduler, against the emulator: the SchedulerPod informer
(one per namespace, by `spec.schedulerName`), the writer's bind, PodScheduled and delete (gate and dry run
there, outcomes by the API server's answers), and the fresh reads (a pod, a Job, the pods on a Node)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from syncer.control.gate import WriteGate
from syncer.kube import KubeClient, KubeWriter
from syncer.kube.cache import KubeCache
from syncer.kube.errors import KubeError
from syncer.kube.scheduler_pods import SchedulerPods
from syncer.kube.scheduling_reads import SchedulingReads
from syncer.kube.writer import Outcome, assigned_node
from syncer.model import fit
from syncer.model.kube import SchedulerPod
from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from tests.helpers import wait_for

pytestmark = pytest.mark.kube

OURS = "slurm-syncer"
GIB = 2**30


@pytest.fixture
async def kube(kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[KubeClient]:
    kube_api.seed(SeedOptions(nodes=2, namespace="inference"))
    kube_api.create("", "v1", "namespaces", {"metadata": {"name": "notebooks"}})
    kube_api.create("", "v1", "namespaces", {"metadata": {"name": "other"}})
    client = await KubeClient.from_config(str(kubeconfig), qps=500, burst=500)
    try:
        yield client
    finally:
        await client.close()


def writer(client: KubeClient, dry_run: bool = False) -> KubeWriter:
    gate = WriteGate(dry_run=dry_run)
    gate.grant(3600)
    return KubeWriter(client, gate)


def pod(name: str, scheduler: str = OURS, **spec: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "serve:1",
        "resources": {"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}},
    }
    return {
        "metadata": {"name": name},
        "spec": {"schedulerName": scheduler, "containers": [container], **spec},
    }


@contextlib.asynccontextmanager
async def running(pods: SchedulerPods) -> AsyncIterator[None]:
    tasks: list[asyncio.Future[None]] = [asyncio.ensure_future(loop()) for loop in pods.loops().values()]
    try:
        await asyncio.wait_for(pods.wait_synced(), 10)
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def stored(kube_api: KubeApiEmulator, namespace: str, name: str) -> dict[str, Any]:
    found = kube_api.pod(namespace, name)
    assert found is not None, f"{namespace}/{name} not found"
    return found


async def test_the_informer_sees_only_its_schedulers_pods_in_its_namespaces(
    kube_api: KubeApiEmulator, kube: KubeClient
):
    kube_api.create("", "v1", "pods", pod("serve"), "inference")
    kube_api.create("", "v1", "pods", pod("lab"), "notebooks")
    kube_api.create("", "v1", "pods", pod("elsewhere"), "other")  # a namespace not served
    kube_api.create("", "v1", "pods", pod("theirs", scheduler="default-scheduler"), "inference")
    pods = SchedulerPods(kube, OURS, ("inference", "notebooks"))
    assert set(pods.loops()) == {"informer-scheduler-pods-inference", "informer-scheduler-pods-notebooks"}
    changes: list[tuple[str | None, str | None]] = []
    pods.subscribe(lambda old, new: changes.append((old and old.key, new and new.key)))
    kube_api.server.record_requests = True
    async with running(pods):
        assert sorted(pods.items) == ["inference/serve", "notebooks/lab"]
        served = pods.get("inference", "serve")
        assert served is not None and served.scheduler_name == OURS and served.phase == "Pending"
        # limits without requests: kube-apiserver made them the requests; scheduler units
        assert served.requests == {"cpu": 2000, "memory": 4 * GIB, "nvidia.com/gpu": 1}
        assert served.limits == served.requests and served.termination_grace_period_s == 30
        kube_api.create("", "v1", "pods", pod("later"), "notebooks")
        await wait_for(lambda: "notebooks/later" in pods.items, what="a new pod seen")
        kube_api.api.delete(kube_api.api.resource("", "v1", "pods"), "inference", "serve")
        await wait_for(lambda: "inference/serve" not in pods.items, what="an unbound pod deleted at once")
    assert ("inference/serve", None) in changes and (None, "notebooks/later") in changes
    # the API server was asked for these pods only
    asked = [path for _t, method, path in kube_api.server.requests if method == "GET" and "/pods" in path]
    assert asked and all("fieldSelector=spec.schedulerName%3Dslurm-syncer" in path for path in asked), asked


async def test_the_whole_cluster_when_no_namespace_is_named(kube_api: KubeApiEmulator, kube: KubeClient):
    kube_api.create("", "v1", "pods", pod("a"), "inference")
    kube_api.create("", "v1", "pods", pod("b"), "other")
    pods = SchedulerPods(kube, OURS)
    async with running(pods):
        assert sorted(pods.items) == ["inference/a", "other/b"] and len(pods.items) == 2


async def test_bind_outcomes(kube_api: KubeApiEmulator, kube: KubeClient):
    kube_api.create("", "v1", "pods", pod("serve"), "inference")
    uid = stored(kube_api, "inference", "serve")["metadata"]["uid"]
    write = writer(kube)
    assert await write.bind("inference", "serve", uid, "node-0001") is Outcome.DONE
    assert stored(kube_api, "inference", "serve")["spec"]["nodeName"] == "node-0001"
    # asked again (an answer lost): already there
    assert await write.bind("inference", "serve", uid, "node-0001") is Outcome.ALREADY
    with pytest.raises(KubeError) as elsewhere:
        await write.bind("inference", "serve", uid, "node-0000")
    assert elsewhere.value.status == 409 and assigned_node(elsewhere.value) == "node-0001"
    # gone: no such pod, or its name now holds another pod
    assert await write.bind("inference", "missing", "x", "node-0000") is Outcome.GONE
    kube_api.create("", "v1", "pods", pod("again"), "inference")
    assert await write.bind("inference", "again", "the-old-uid", "node-0000") is Outcome.GONE
    assert not stored(kube_api, "inference", "again")["spec"].get("nodeName")
    assert write.stats.writes == 1


async def test_a_dry_run_writes_nothing(kube_api: KubeApiEmulator, kube: KubeClient):
    kube_api.create("", "v1", "pods", pod("serve"), "inference")
    meta = stored(kube_api, "inference", "serve")["metadata"]
    dry = writer(kube, dry_run=True)
    assert await dry.bind("inference", "serve", meta["uid"], "node-0001") is Outcome.DRY_RUN
    assert await dry.delete_pod("inference", "serve", meta["uid"]) is Outcome.DRY_RUN
    cached = SchedulerPod(
        namespace="inference", name="serve", uid=meta["uid"], resource_version=meta["resourceVersion"]
    )
    assert (
        await dry.set_pod_scheduled(cached, "False", "Unschedulable", "Slurm job 1 pending", 0.0)
        is Outcome.DRY_RUN
    )
    assert stored(kube_api, "inference", "serve")["metadata"]["resourceVersion"] == meta["resourceVersion"]


async def test_pod_scheduled_as_kube_scheduler_writes_it(kube_api: KubeApiEmulator, kube: KubeClient):
    kube_api.create("", "v1", "pods", pod("serve"), "inference")
    pods = SchedulerPods(kube, OURS, ("inference",))
    write = writer(kube)
    async with running(pods):
        current = pods.get("inference", "serve")
        assert current is not None
        pending = "Slurm job 4242 is pending: Priority"
        assert (
            await write.set_pod_scheduled(current, "False", "Unschedulable", pending, 1_800_000_000)
            is Outcome.DONE
        )
        written = [c for c in stored(kube_api, "inference", "serve")["status"]["conditions"]
                   if c["type"] == "PodScheduled"]  # fmt: skip
        assert written == [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "message": pending, "lastProbeTime": None,
                            "lastTransitionTime": "2027-01-15T08:00:00Z"}]  # fmt: skip
        await wait_for(lambda: (p := pods.get("inference", "serve")) is not None and bool(p.conditions))
        seen = pods.get("inference", "serve")
        assert seen is not None
        assert (
            await write.set_pod_scheduled(seen, "False", "Unschedulable", pending, 1_900_000_000)
            is Outcome.ALREADY
        )
        # a new reason: the status stays False, so the transition time stays
        resources = "Slurm job 4242 is pending: Resources"
        assert (
            await write.set_pod_scheduled(seen, "False", "Unschedulable", resources, 1_900_000_000)
            is Outcome.DONE
        )
        scheduled = next(c for c in stored(kube_api, "inference", "serve")["status"]["conditions"]
                         if c["type"] == "PodScheduled")  # fmt: skip
        assert (scheduled["message"], scheduled["lastTransitionTime"]) == (resources, "2027-01-15T08:00:00Z")


async def test_pod_scheduled_is_not_written_on_a_pod_bound_meanwhile(
    kube_api: KubeApiEmulator, kube: KubeClient
):
    """The informer's view lags a bind: the status patch carries the cached resourceVersion, the 409 makes
    the writer read again, and a bound pod gets no PodScheduled=False."""
    kube_api.create("", "v1", "pods", pod("serve"), "inference")
    pods = SchedulerPods(kube, OURS, ("inference",))
    write = writer(kube)
    async with running(pods):
        stale = pods.get("inference", "serve")
        assert stale is not None
        assert await write.bind("inference", "serve", stale.uid, "node-0000") is Outcome.DONE
        outcome = await write.set_pod_scheduled(stale, "False", "Unschedulable", "late", 1_800_000_000)
        assert outcome is Outcome.GONE and write.stats.conflicts >= 1
    conditions = stored(kube_api, "inference", "serve")["status"]["conditions"]
    assert [c["status"] for c in conditions if c["type"] == "PodScheduled"] == ["True"]


async def test_delete_with_a_grace_period_and_the_uid(kube_api: KubeApiEmulator, kube: KubeClient):
    kube_api.create("", "v1", "pods", pod("serve", terminationGracePeriodSeconds=20), "inference")
    meta = stored(kube_api, "inference", "serve")["metadata"]
    write = writer(kube)
    assert await write.bind("inference", "serve", meta["uid"], "node-0000") is Outcome.DONE
    assert await write.delete_pod("inference", "serve", "not-its-uid") is Outcome.GONE
    assert not stored(kube_api, "inference", "serve")["metadata"].get("deletionTimestamp")
    assert await write.delete_pod("inference", "serve", meta["uid"], grace_period_s=7) is Outcome.DONE
    terminating = stored(kube_api, "inference", "serve")["metadata"]
    assert terminating["deletionTimestamp"] and terminating["deletionGracePeriodSeconds"] == 7
    await wait_for(lambda: kube_api.pod("inference", "serve") is None, what="the kubelet ending it")
    assert await write.delete_pod("inference", "serve", meta["uid"]) is Outcome.GONE
    # no grace period given: the pod's own
    kube_api.create("", "v1", "pods", pod("own", terminationGracePeriodSeconds=20), "inference")
    own = stored(kube_api, "inference", "own")["metadata"]
    await write.bind("inference", "own", own["uid"], "node-0000")
    assert await write.delete_pod("inference", "own", own["uid"]) is Outcome.DONE
    assert stored(kube_api, "inference", "own")["metadata"]["deletionGracePeriodSeconds"] == 20


async def test_reads_of_a_pod_a_job_and_a_nodes_pods(kube_api: KubeApiEmulator, kube: KubeClient):
    reads = SchedulingReads(kube)
    kube_api.create("", "v1", "pods", pod("serve"), "inference")
    assert (await reads.pod("inference", "missing")) is None
    fresh = await reads.pod("inference", "serve")
    assert fresh is not None and fresh.requests["nvidia.com/gpu"] == 1 and fresh.creation_timestamp > 0
    # the pods on a Node: every namespace and scheduler, not the ended ones, terminating ones too
    small = {"name": "s", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    for namespace, name in (("inference", "a"), ("other", "b"), ("other", "done"), ("other", "going")):
        body = {"metadata": {"name": name, "finalizers": ["x/hold"] if name == "going" else []},
                "spec": {"nodeName": "node-0001", "containers": [small]}}  # fmt: skip
        kube_api.create("", "v1", "pods", body, namespace)
    kube_api.patch("", "v1", "pods", "done", {"status": {"phase": "Succeeded"}}, namespace="other",
                   subresource="status")  # fmt: skip
    kube_api.api.delete(kube_api.api.resource("", "v1", "pods"), "other", "going")
    on_node = await reads.pods_on_node("node-0001")
    assert sorted(p.key for p in on_node) == ["inference/a", "other/b", "other/going"]
    assert next(p for p in on_node if p.name == "going").terminating
    assert all(p.requests == {"cpu": 500, "memory": GIB} for p in on_node)
    with pytest.raises(ValueError):
        await reads.pods_on_node("")
    # a Job
    template = {
        "spec": {"schedulerName": OURS, "restartPolicy": "Never", "containers": [{"name": "m", "image": "t"}]}
    }
    job = {"metadata": {"name": "gang"}, "spec": {"parallelism": 2, "completions": 2, "template": template}}
    kube_api.create("batch", "v1", "jobs", job, "inference")
    await wait_for(lambda: len([p for p in kube_api.api.store.objects_of(("", "pods"), "inference")
                                if p["metadata"]["name"].startswith("gang-")]) == 2)  # fmt: skip
    await kube_api.jobs.settled()
    read = await reads.job("inference", "gang")
    assert read is not None and (read.parallelism, read.completions, read.active) == (2, 2, 2)
    assert not read.finished and (await reads.job("inference", "nope")) is None


async def test_the_bind_check_reads_from_the_caches(kube_api: KubeApiEmulator, kube: KubeClient):
    """What a bind needs of a Node (allocatable, taints, cordon) comes from the Node informer; the pods
    there from one read; the check is kube-scheduler's (syncer/model/fit.py)."""
    kube_api.patch("", "v1", "nodes", "node-0001", {"spec": {"taints": [
        {"key": "gpu", "value": "reserved", "effect": "NoSchedule"}]}})  # fmt: skip
    cache = KubeCache(kube)
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        node0, node1 = cache.node("node-0000"), cache.node("node-0001")
        assert node0 is not None and node1 is not None
        assert node0.allocatable == {
            "cpu": 95_000,
            "memory": 1_048_000 * 2**20,
            "nvidia.com/gpu": 8,
            "pods": 110,
        }
        assert [(t.key, t.value, t.effect) for t in node1.taints] == [("gpu", "reserved", "NoSchedule")]
        kube_api.create("", "v1", "pods", pod("serve"), "inference")
        reads = SchedulingReads(kube)
        serve = await reads.pod("inference", "serve")
        assert serve is not None
        assert fit.misfits(serve, node0, await reads.pods_on_node("node-0000")) == ()
        assert fit.misfits(serve, node1, []) == ("node(s) had untolerated taint {gpu: reserved}",)
        eight = {"nvidia.com/gpu": "8"}
        container = {"name": "g", "image": "g", "resources": {"requests": eight, "limits": eight}}
        greedy = {
            "metadata": {"name": "greedy"},
            "spec": {"nodeName": "node-0000", "containers": [container]},
        }
        kube_api.create("", "v1", "pods", greedy, "other")
        assert fit.misfits(serve, node0, await reads.pods_on_node("node-0000")) == (
            "Insufficient nvidia.com/gpu",
        )
    finally:
        await cache.stop()
