"""The one-pool scheduler end to end (issue 44, docs/scheduler.md): pods with our schedulerName become Slurm
jobs on the real sandbox (real slurmd on dynamic nodes), are bound where Slurm allocated them in the
Kubernetes emulator, and are torn down from either side, never both at once.

Stories that only wait run side by side under one syncer; the real nodes are started once for the module.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import pytest
from structlog.testing import capture_logs

from syncer.app.check_scheduler import lines as check_lines
from syncer.app.service import SyncerService
from syncer.control.holds import HOLD_TAG
from syncer.controllers.scheduler.controller import SchedulerController
from syncer.controllers.scheduler.options import SchedulerOptions
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox import Sandbox, SandboxError
from syncer.testing.sandbox.config import TIER_GRACE, TIER_GRACE_S, TIER_HIGH, TIER_LOW, TIERED
from tests.e2e.rig import FAST, Rig, condition, get, node_body, running_syncer, sample
from tests.fixtures.slurm import SELECTED, served_only
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]

EXTERNAL = SELECTED.name != "24.11"  # external jobs: REST v0.0.43+ (Slurm 25.05+)
NS = "team"
POOL = "schedpool"  # the feature every node of this module's pool has (the Namespace's default constraint)
NODES = 8
# in the sandbox's preemption tiers too (config.TIERS), free in test_preemption_both_ways: scancel's node
# (its hold is lifted in its story) and one of the restart test's, which runs after
TIERED_NODES = (3, 7)
CPUS = 2
_names = itertools.count(1)
_schedulers = itertools.count(1)
DEADLINE = 60.0  # Slurm's scheduling passes on a loaded machine: generous, never the thing tested


def _scontrol_quiet(sandbox: Sandbox, *args: str) -> None:
    with contextlib.suppress(SandboxError):  # not in that state
        sandbox.scontrol(*args)


@pytest.fixture(scope="module")
def pool(slurm_sandbox: Sandbox) -> Iterator[list[str]]:
    """Real slurmd on dynamic nodes of 2 CPUs, each with the pool's feature and one of its own."""
    names = [f"schedx{i}" for i in range(NODES)] if EXTERNAL else [f"schedy{i}" for i in range(2)]
    try:
        for i, name in enumerate(names):
            tiered = [TIERED] if EXTERNAL and i in TIERED_NODES else []
            slurm_sandbox.start_slurmd(name, cpus=CPUS, memory_mb=1000, features=[POOL, f"f{name}", *tiered])
        yield names
    finally:
        for name in names:
            for job in slurm_sandbox.run("squeue", "-h", "-w", name, "-o", "%i").stdout.split():
                slurm_sandbox.run("scancel", job)

        def remove(name: str) -> None:
            _scontrol_quiet(slurm_sandbox, "update", f"nodename={name}", "state=undrain")
            slurm_sandbox.delete_node(name)

        with ThreadPoolExecutor(len(names)) as pool_:  # each waits out its jobs' KillWait: side by side
            list(pool_.map(remove, names))


class Pool:
    """One test's view: the emulator's Nodes bound to the pool's Slurm nodes, pods, jobs."""

    def __init__(self, rig: Rig, names: list[str], client: KubeClient) -> None:
        self.rig, self.names, self.client = rig, names, client
        self.scheduler = f"slurm-e2e-{next(_schedulers)}"
        for name in names:
            node = f"k8s-{name}"
            body = node_body(node, {})
            body["status"]["allocatable"] = {"cpu": "8", "memory": "16Gi", "pods": "110"}
            rig.kube.create("", "v1", "nodes", body)
            rig.bind_pod(name)
        # the pods may choose their partition (the preemption stories) besides the default list
        overrides = "partition,constraint,time-limit,nice"
        annotations = {"slurm-syncer.dev/constraint": POOL, "slurm-syncer.dev/pod-overrides": overrides}
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NS, "annotations": annotations}})

    def pod(
        self, name: str, *, cpu: str = "1", memory: str = "100Mi", grace: int = 2,
        annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        requests: dict[str, str] | None = None, owner: dict[str, Any] | None = None,
    ) -> str:  # fmt: skip
        body: dict[str, Any] = {
            "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
            "spec": {
                "schedulerName": self.scheduler,
                "terminationGracePeriodSeconds": grace,
                "containers": [
                    {
                        "name": "main",
                        "image": "server",
                        "resources": {
                            "requests": {"cpu": cpu, "memory": memory} if requests is None else requests
                        },
                    }
                ],
            },
        }
        if owner is not None:
            body["metadata"]["ownerReferences"] = [owner]
        self.rig.kube.create("", "v1", "pods", body, namespace=NS)
        return name

    def get(self, name: str) -> dict[str, Any] | None:
        return self.rig.kube.pod(NS, name)

    def job_of(self, name: str) -> str:
        """The Slurm job the scheduler bound the pod for (its annotation)."""
        pod = self.get(name) or {}
        return str((pod.get("metadata", {}).get("annotations") or {}).get(Keys.SCHEDULER_JOB_ID, ""))

    def deleting(self, name: str) -> bool:
        pod = self.get(name)
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    def node_of(self, name: str) -> str:
        pod = self.get(name)
        return str((pod or {}).get("spec", {}).get("nodeName") or "")

    def scheduled(self, name: str) -> dict[str, Any]:
        pod = self.get(name)
        return (condition(pod, "PodScheduled") if pod else None) or {}

    def events(self, name: str, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.rig.events_for(name) if e.get("reason") == reason]

    def told(self, name: str, reason: str, *words: str) -> bool:
        """An Event of that reason on the pod saying `words`, or one folded into the syncer's storm summary
        naming the pod (more than 25 Events at once across objects are folded: syncer/kube/events.py)."""
        own = any(all(w in e["message"] for w in words) for e in self.events(name, reason))
        summaries = self.rig.kube.api.store.objects_of(("", "events"))
        folded = any(
            e.get("reason") == reason and f"pod/{NS}/{name}" in e["message"] and "folded" in e["message"]
            for e in summaries
        )
        return own or folded

    async def delete(self, name: str, grace: int | None = None) -> None:
        body = {"gracePeriodSeconds": grace} if grace is not None else None
        await self.client.delete(f"/api/v1/namespaces/{NS}/pods/{name}", body)

    async def sh(self, *argv: str) -> str:
        result = await asyncio.to_thread(self.rig.sandbox.run, *argv)
        return result.stdout.strip()

    async def sbatch(self, node: str, *, partition: str = "") -> str:
        """A Slurm job taking the whole node (waits if the node is busy)."""
        where = ["-p", partition] if partition else []
        out = await self.sh("sbatch", "--parsable", *where, "-w", node, "--exclusive", "--wrap", "sleep 600")
        return out.split(";")[0]

    async def job_state(self, job: str) -> str:
        return (await self.sh("squeue", "-h", "-j", job, "-o", "%T")) or "GONE"

    async def jobs_named(self, name: str) -> list[str]:
        """Live jobs of that name (`namespace/pod`), any user."""
        out = await self.sh("squeue", "-h", "-n", name, "-o", "%i")
        return out.split()

    async def wait(self, check: Callable[[], Any], what: str, deadline: float = DEADLINE) -> None:
        await wait_for(check, deadline, what=what, interval_s=0.1)


@asynccontextmanager
async def scheduler(
    rig: Rig, pool_view: Pool, *, resync_s: float = FAST.resync_s, slurm_url: str = "",
    namespaces: tuple[str, ...] = (NS,), retry_after_s: float = 2.0, **options: Any,
) -> AsyncIterator[SyncerService]:  # fmt: skip
    config = FAST.replace(
        scheduler=SchedulerOptions(
            name=pool_view.scheduler, namespaces=namespaces, retry_after_s=retry_after_s, **options
        ),
        lease_name=f"e2e-{pool_view.scheduler}",
        resync_s=resync_s,
    )
    async with running_syncer(rig, config, slurm_url=slurm_url) as service:
        yield service


@pytest.fixture
async def view(rig: Rig, pool: list[str]) -> AsyncIterator[Pool]:
    client = await KubeClient.from_config(str(rig.kubeconfig))
    try:
        yield Pool(rig, pool, client)
    finally:
        await client.close()
        for name in pool:  # the next test's syncer is another release: it would not end these
            for job in (
                await asyncio.to_thread(rig.sandbox.run, "squeue", "-h", "-w", name, "-o", "%i")
            ).stdout.split():
                await asyncio.to_thread(rig.sandbox.run, "scancel", job)


def _job_id(message: str) -> str:
    return message.split("Slurm job ", 1)[1].split()[0] if "Slurm job " in message else ""


# -- the stories ---------------------------------------------------------------------------------------
async def demo(p: Pool, node: str) -> None:
    """A pod waits behind a Slurm job (PodScheduled=False with Slurm's reason and the job id), runs on that
    node when the job ends; a Slurm job then waits behind the pod; deleting the pod lets it run."""
    first = await p.sbatch(node)
    await p.wait(lambda: _is(p.job_state(first), "RUNNING"), f"Slurm job {first} running on {node}")
    pod = p.pod("demo", annotations={"slurm-syncer.dev/constraint": f"f{node}"})
    await p.wait(
        lambda: (
            p.scheduled(pod).get("reason") == "SlurmJobPending"
            and "is pending (" in p.scheduled(pod).get("message", "")
        ),
        "the pod's PodScheduled=False SlurmJobPending with Slurm's reason",
    )
    message = p.scheduled(pod)["message"]
    job = _job_id(message)
    assert job and p.scheduled(pod)["status"] == "False", message
    assert not p.node_of(pod)
    await p.sh("scancel", first)
    await p.wait(lambda: p.node_of(pod) == f"k8s-{node}", f"the pod bound to k8s-{node}")
    assert p.job_of(pod) == job
    await p.wait(lambda: p.told(pod, "Scheduled", job), "a Scheduled Event naming the job")
    second = await p.sbatch(node)
    await p.wait(lambda: _is(p.job_state(second), "PENDING"), "the Slurm job waits behind the pod")
    await p.delete(pod)
    await p.wait(lambda: p.get(pod) is None, "the pod gone")
    await p.wait(
        lambda: _is(p.job_state(job), "GONE", "COMPLETED", "CANCELLED"), f"the pod's job {job} ended"
    )
    await p.wait(
        lambda: _is(p.job_state(second), "RUNNING"), "the waiting Slurm job runs once the pod is gone"
    )
    await p.sh("scancel", second)


async def _is(state: Awaitable[str], *wanted: str) -> bool:
    return await state in wanted


async def gang(p: Pool, a: str, b: str) -> None:
    """Two pods of a group on two nodes: no job until both are there; bound together or not at all."""
    group = {"slurm-syncer.dev/group": "pair"}
    size = {"slurm-syncer.dev/group-size": "2", "slurm-syncer.dev/constraint": f"f{a}|f{b}"}
    first = p.pod("pair-0", labels=group, annotations=size)
    await p.wait(
        lambda: p.scheduled(first).get("reason") == "SlurmGangWaiting", "the gang waits for its 2nd pod"
    )
    assert not await p.jobs_named(f"{NS}/pair")
    # one Node refuses the pod (a taint it does not tolerate): Slurm allocates both, the scheduler binds none
    p.rig.kube.patch(
        "", "v1", "nodes", f"k8s-{b}", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}
    )
    second = p.pod("pair-1", labels=group, annotations=size)
    await p.wait(
        lambda: p.scheduled(first).get("reason") == "SlurmPlacementFailed",
        "the gang's placement refused as one Node does not take its pod",
    )
    assert "untolerated taint" in p.scheduled(first)["message"] or "taint" in p.scheduled(first)["message"]
    assert not p.node_of(first) and not p.node_of(second), "none bound when one cannot be"
    p.rig.kube.patch("", "v1", "nodes", f"k8s-{b}", {"spec": {"taints": None}})
    await p.wait(
        lambda: bool(p.node_of(first) and p.node_of(second)), "the gang bound together after the retry"
    )
    assert {p.node_of(first), p.node_of(second)} == {f"k8s-{a}", f"k8s-{b}"}
    jobs = {p.job_of(x) for x in (first, second)}
    assert len(jobs) == 1, f"one Slurm job for the gang: {jobs}"
    await p.delete(first)
    await p.wait(lambda: p.get(first) is None and p.get(second) is None, "a gang ends together")
    await p.wait(
        lambda: _is(p.job_state(jobs.pop()), "GONE", "COMPLETED", "CANCELLED"), "the gang's job ended"
    )


async def scancel(p: Pool, node: str, service: SyncerService) -> None:
    """scancel -> the pod deleted with an Event, and the node held (drained) until the pod is gone."""
    p.rig.kube.kubelet.termination_s = (
        30.0  # pods take their grace period to stop: the window the hold covers
    )
    pod = p.pod("victim", grace=20, annotations={"slurm-syncer.dev/constraint": f"f{node}"})
    await p.wait(lambda: bool(p.node_of(pod)), "the victim bound")
    job = p.job_of(pod)
    await p.sh("scancel", job)
    await p.wait(lambda: p.deleting(pod), "pod deleted")
    await p.wait(lambda: p.told(pod, "SlurmPodDeleted", "cancelled in Slurm", job), "the deletion's Event")

    async def held() -> bool:
        return HOLD_TAG in (await p.rig.reader.get_node(node)).reason

    await p.wait(held, "the node held while the pod stops")
    assert p.get(pod) is not None, "the pod outlived its grace period's start"
    await p.delete(pod, grace=0)  # force-deleted: the hold goes with it
    await p.wait(lambda: p.get(pod) is None, "the pod gone")

    async def released() -> bool:
        found = await p.rig.reader.get_node(node)
        return HOLD_TAG not in found.reason and "DRAIN" not in found.state

    await p.wait(released, "the hold lifted once the pod is gone")
    assert not service.context.holds.of(f"{NS}/pod/victim")


async def preempted(p: Pool, node: str) -> None:
    """A Slurm job of a higher-tier partition preempts a bridged pod (PreemptType=preempt/partition_prio,
    the pod's partition with GraceTime): the pod is deleted with an Event naming the preemption, its node
    stays held in Slurm until the pod is gone, and the preemptor starts only after."""
    p.rig.kube.kubelet.termination_s = 30.0  # pods take their grace period to stop: the window tested
    grace = TIER_GRACE_S - 10  # under the partition's GraceTime by more than the job cache's 5 s read
    pod = p.pod("preempted", grace=grace, annotations={
        "slurm-syncer.dev/partition": TIER_GRACE, "slurm-syncer.dev/constraint": f"f{node}",
    })  # fmt: skip
    await p.wait(lambda: p.node_of(pod) == f"k8s-{node}", "the pod bound")
    job = p.job_of(pod)
    preemptor = await p.sbatch(node, partition=TIER_HIGH)
    seen: list[tuple[bool, str, bool]] = []  # (node held, preemptor state, pod present), read in that order

    async def watch() -> None:
        while True:
            held_ = HOLD_TAG in (await p.rig.reader.get_node(node)).reason
            state = await p.job_state(preemptor)
            seen.append((held_, state, p.get(pod) is not None))
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch())
    try:
        await p.wait(lambda: p.deleting(pod), "the preempted pod deleted")
        await p.wait(lambda: p.told(pod, "SlurmPodDeleted", f"Slurm job {job} is being preempted"),
                     "the deletion's Event naming the preemption")  # fmt: skip

        async def held() -> bool:
            return HOLD_TAG in (await p.rig.reader.get_node(node)).reason

        await p.wait(held, "the node held while the pod stops")
        assert p.get(pod) is not None, "the pod outlived its grace period's start"
        await p.delete(pod, grace=0)  # force-deleted: stopped; the job may end, the preemptor start
        await p.wait(
            lambda: _is(p.job_state(preemptor), "RUNNING"), "the preemptor runs once the pod is gone"
        )
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert p.get(pod) is None
    # a pod still there when read last of a sample was there at the sample's first reads too
    beside = [s for s in seen if s[1] == "RUNNING" and s[2]]
    assert not beside, f"the preemptor ran while the pod was there: {beside}"
    first_held = next(i for i, s in enumerate(seen) if s[0]) if any(s[0] for s in seen) else len(seen)
    lifted = [s for s in seen[first_held:] if not s[0] and s[2]]
    assert not lifted, f"the hold lifted while the pod was there: {lifted}"
    assert await p.job_state(job) != "RUNNING"

    async def released() -> bool:
        return HOLD_TAG not in (await p.rig.reader.get_node(node)).reason

    await p.wait(released, "the hold lifted once the pod is gone")
    await p.sh("scancel", preemptor)


async def preempts(p: Pool, node: str) -> None:
    """A bridged pod in a higher-tier partition preempts a Slurm batch job and is bound on its node."""
    victim = await p.sbatch(node, partition=TIER_LOW)
    await p.wait(lambda: _is(p.job_state(victim), "RUNNING"), f"the batch job {victim} running on {node}")
    pod = p.pod("preemptor", annotations={
        "slurm-syncer.dev/partition": TIER_HIGH, "slurm-syncer.dev/constraint": f"f{node}",
    })  # fmt: skip
    await p.wait(lambda: p.node_of(pod) == f"k8s-{node}", "the pod bound on the batch job's node")
    assert await p.job_state(victim) != "RUNNING", "the pod bound beside the job it preempts"
    await p.delete(pod)


async def _true() -> bool:
    return True


async def node_gone(p: Pool, node: str) -> None:
    """The Kubernetes Node of a bound pod is deleted (`kubectl delete node`) while its kubelet still runs the
    pod: the pod is deleted with its own grace period, which its kubelet takes to stop it, and its job, which
    holds the pod's CPUs in Slurm, ends only once the pod is gone; a Slurm job waiting for the node never
    runs while the pod is there. (Before, the pod was deleted with grace 0: gone from the API at once, its job
    cancelled, and the waiting job started while the kubelet could still be stopping its containers.)"""
    p.rig.kube.kubelet.termination_s = 30.0  # pods take their grace period to stop (as in `scancel`)
    grace = 10  # well past Slurm's start of the waiting job once the pod's is cancelled (0-4 s)
    pod = p.pod("homeless", grace=grace, annotations={"slurm-syncer.dev/constraint": f"f{node}"})
    await p.wait(lambda: bool(p.node_of(pod)), "the pod bound")
    job = p.job_of(pod)
    waiting = await p.sbatch(node)
    await p.wait(lambda: _is(p.job_state(waiting), "PENDING"), "a Slurm job waits behind the pod's")
    seen: list[tuple[str, bool]] = []  # (the waiting job's state, the pod present), read in that order

    async def watch() -> None:
        while True:
            state = await p.job_state(waiting)
            seen.append((state, p.get(pod) is not None))
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch())
    try:
        deleted_at = time.monotonic()
        await p.client.delete(f"/api/v1/nodes/k8s-{node}")
        await p.wait(lambda: p.deleting(pod), "the pod on the deleted Node deleted")
        assert p.get(pod) is not None, "the pod gone at its deletion: its kubelet had no time to stop it"
        await p.wait(lambda: p.told(pod, "SlurmPodDeleted", "no longer exists", f"grace period {grace} s"),
                     "the deletion's Event, with the pod's grace period")  # fmt: skip
        await p.wait(lambda: _is(p.job_state(waiting), "RUNNING"), "the waiting Slurm job runs")
        ran_after = time.monotonic() - deleted_at
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert p.get(pod) is None, "the waiting Slurm job runs while the pod is there"
    beside = [sample_ for sample_ in seen if sample_ == ("RUNNING", True)]
    assert not beside, f"the waiting Slurm job ran while the pod was there: {beside}"
    assert ran_after >= grace, (
        f"the Slurm job waiting for the node ran {ran_after:.1f} s after the Node's deletion, within the "
        f"pod's grace period of {grace} s: the pod's containers may still have run"
    )
    await p.wait(lambda: _is(p.job_state(job), "GONE", "CANCELLED", "COMPLETED"), "its job ended")
    await p.sh("scancel", waiting)


async def long_grace(p: Pool, node: str) -> None:
    """A pod whose grace period (120 s) is longer than its job's time limit (1 minute) is bound and runs:
    it stops over the second half of the run only (before, it was deleted as its job started, never bound,
    and its job cancelled)."""
    pod = p.pod("unhurried", grace=120, annotations={
        "slurm-syncer.dev/constraint": f"f{node}", "slurm-syncer.dev/time-limit": "1",
    })  # fmt: skip
    await p.wait(lambda: bool(p.node_of(pod)) or p.deleting(pod), "the pod bound (or deleted)")
    assert not p.deleting(pod), "deleted as its job started: its grace period is longer than the job's time"
    assert p.node_of(pod) == f"k8s-{node}"
    await p.delete(pod, grace=0)


async def drained(p: Pool, node: str) -> None:
    """A node an admin drains in Slurm gets no new pod; undrained, it does."""
    await p.sh("scontrol", "update", f"nodename={node}", "state=drain", "reason=admin")
    pod = p.pod("drained", annotations={"slurm-syncer.dev/constraint": f"f{node}"})
    await p.wait(lambda: p.scheduled(pod).get("reason") == "SlurmJobPending", "the pod waits for its job")
    # the job is pending in Slurm: Slurm alone starts it, and it does not on a drained node
    job = _job_id(p.scheduled(pod)["message"])
    assert await p.job_state(job) == "PENDING" and not p.node_of(pod)
    await p.sh("scontrol", "update", f"nodename={node}", "state=undrain")
    await p.wait(lambda: p.node_of(pod) == f"k8s-{node}", "bound once the admin undrains")
    await p.delete(pod)


async def refused(p: Pool) -> None:
    """Bad pods: an Event and PodScheduled=False naming the field, and no job."""
    bare = p.pod("bare", requests={})
    late = p.pod("late", annotations={"slurm-syncer.dev/time-limit": "1h"})
    await p.wait(
        lambda: p.scheduled(bare).get("reason") == "SlurmRequestRefused", "the pod without requests refused"
    )
    await p.wait(
        lambda: p.scheduled(late).get("reason") == "SlurmRequestRefused", "the bad time limit refused"
    )
    assert "resources.requests[cpu]" in p.scheduled(bare)["message"]
    assert "metadata.annotations[slurm-syncer.dev/time-limit]" in p.scheduled(late)["message"]
    await p.wait(lambda: p.told(bare, "SlurmRequestRefused", "requests[cpu]"), "an Event on the refused pod")
    assert not await p.jobs_named(f"{NS}/bare") and not await p.jobs_named(f"{NS}/late")


async def batch_job(p: Pool, node: str) -> None:
    """A batch/v1 Job with parallelism 1: its pod is scheduled alone."""
    container = {"name": "main", "image": "work", "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}
    template = {
        "metadata": {"annotations": {"slurm-syncer.dev/constraint": f"f{node}"}},
        "spec": {
            "schedulerName": p.scheduler, "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "containers": [container],
        },
    }  # fmt: skip
    body = {"metadata": {"name": "one"}, "spec": {"parallelism": 1, "completions": 1, "template": template}}
    created = p.rig.kube.create("batch", "v1", "jobs", body, namespace=NS)
    uid = created["metadata"]["uid"]

    def its_pods() -> list[dict[str, Any]]:
        pods = p.rig.kube.api.store.objects_of(("", "pods"))
        return [
            x for x in pods if any(o.get("uid") == uid for o in x["metadata"].get("ownerReferences") or [])
        ]

    def bound() -> bool:
        pods = its_pods()
        return len(pods) == 1 and pods[0]["spec"].get("nodeName") == f"k8s-{node}"

    await p.wait(bound, "the Job's one pod bound")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_one_pool_stories(rig: Rig, view: Pool) -> None:
    n = view.names
    async with scheduler(rig, view) as service:
        await asyncio.gather(
            demo(view, n[0]),
            gang(view, n[1], n[2]),
            scancel(view, n[3], service),
            drained(view, n[4]),
            refused(view),
            batch_job(view, n[5]),
            node_gone(view, n[6]),
            long_grace(view, n[7]),
        )
        status, text = await get(service, "/metrics")
        assert status == 200
        assert (sample(text, "slurm_syncer_scheduler_bind_latency_seconds_count") or 0) >= 5
        assert (sample(text, "slurm_syncer_scheduler_teardowns_total", cause="cancelled") or 0) >= 1
        assert (sample(text, "slurm_syncer_scheduler_teardowns_total", cause="pod-deleted") or 0) >= 2
        jobs = "slurm_syncer_scheduler_jobs_total"
        made = [sample(text, jobs, action=how) or 0 for how in ("submitted", "allocated")]
        assert sum(made) >= 5, "submitted, or allocated at once where a node had room"
        assert sample(text, "slurm_syncer_scheduler_pending_pods", reason="SlurmRequestRefused") == 2
        assert sample(text, "slurm_syncer_scheduler_pods", state="pending") == 2
        assert sample(text, "slurm_syncer_scheduler_held_nodes") == 0
        on, slurm_side, _, waiting = await check_lines(
            service.slurm, view.client, view.scheduler, (NS,), False
        )
        assert on[1] == f"scheduler: on for pods with schedulerName {view.scheduler} in {NS}"
        assert slurm_side[0] and "takes external jobs" in slurm_side[1]
        assert (
            waiting[3] and "2 pod(s) wait (2 SlurmRequestRefused)" in waiting[1] and "team/bare" in waiting[1]
        )


async def bound_unseen(
    p: Pool, service: SyncerService, node: str, *, lose_answer: bool = False, late: bool = False
) -> None:
    """A pod bound (its bind's answer lost, `lose_answer`) while the scheduler's pod informer lags (its watch
    held back by the emulator; `late`: for longer than `bind_shows_s`), its Node turned unfit before the
    informer shows the bind: the gang is planned again in that window and neither its job is cancelled for
    placement nor, once the informer shows the bind, the pod deleted as if Slurm had cancelled the job (before
    the fix both happened, every time; with `late`, until the memory ended on evidence, not after 30 s)."""
    scheduler_ = service.scheduler
    assert isinstance(scheduler_, SchedulerController)
    name = f"unseen-{'lost' if lose_answer else 'late' if late else 'lag'}"
    key, kube_node = f"{NS}/pod/{name}", f"k8s-{node}"
    blocker = await p.sbatch(node)
    await p.wait(lambda: _is(p.job_state(blocker), "RUNNING"), f"a Slurm job on {node}")
    pod = p.pod(name, annotations={"slurm-syncer.dev/constraint": f"f{node}"})

    def shown() -> Any:  # the pod as the scheduler's informer shows it
        return scheduler_.pods.get(NS, pod)

    def pending_shown() -> bool:
        found = shown()
        cond = found.condition("PodScheduled") if found is not None else None
        return cond is not None and cond.reason == "SlurmJobPending"

    await p.wait(pending_shown, "the informer shows the pod waiting for its job")
    job = _job_id(p.scheduled(pod)["message"])
    faults = p.rig.kube.faults
    faults.hold_watches(f"/namespaces/{NS}/pods", f"spec.schedulerName={p.scheduler}")
    try:
        if lose_answer:  # made, and its answer (a gateway's 504) held until the Node is unfit
            faults.lose_answers("POST", f"/pods/{pod}/binding", held=True)
        await p.sh("scancel", blocker)
        await p.wait(lambda: p.node_of(pod) == kube_node, "the pod bound (as the API server has it)")
        assert shown().node_name == "", "the informer shows the bind: the window is not open"
        assert p.job_of(pod) == job
        taint = {"key": "late", "effect": "NoSchedule"}
        p.rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"taints": [taint]}})

        def tainted() -> bool:
            found = service.context.kube_cache.node(kube_node)
            return found is not None and any(t.key == "late" for t in found.taints)

        await p.wait(tainted, "the syncer's Node cache shows the taint")
        if late:  # the bind remembered (its Event is told after that), unshown for longer than bind_shows_s
            await p.wait(lambda: p.told(pod, "Scheduled", job), "the bind told")
            overdue = time.monotonic() + scheduler_.options.bind_shows_s
            await p.wait(lambda: time.monotonic() > overdue, "the bind unshown for longer than bind_shows_s")
            status, text = await get(service, "/metrics")  # the gauges show it between passes
            assert status == 200
            assert sample(text, "slurm_syncer_scheduler_unshown_binds") == 1
            oldest = sample(text, "slurm_syncer_scheduler_unshown_bind_oldest_seconds") or 0
            assert oldest > scheduler_.options.bind_shows_s
        # the gang planned again in the window (a resync, another event); with a lost answer, queued while
        # the reconcile that bound waits for it: planned again right after the bind failed
        faults.release_answers()
        for _ in range(2 if late else 1):  # late: twice, and still one warning
            scheduler_.runner.queue.add(key)
            await asyncio.wait_for(scheduler_.runner.queue.wait_idle(), DEADLINE)
        assert shown().node_name == "", "the informer shows the bind: the window closed too early"
        assert await p.job_state(job) == "RUNNING", "the job of a bound pod was cancelled"
        assert p.scheduled(pod).get("reason") != "SlurmPlacementFailed"
    finally:
        faults.release_watches()
    await p.wait(
        lambda: shown() is not None and shown().node_name == kube_node, "the informer shows the bind"
    )
    scheduler_.runner.queue.add(key)
    await asyncio.wait_for(scheduler_.runner.queue.wait_idle(), DEADLINE)
    assert not p.deleting(pod) and await p.job_state(job) == "RUNNING", "the bound pod or its job was ended"
    if late:
        status, text = await get(service, "/metrics")
        assert sample(text, "slurm_syncer_scheduler_unshown_binds") == 0
        assert sample(text, "slurm_syncer_scheduler_unshown_bind_oldest_seconds") == 0
    await p.wait(
        lambda: p.told(pod, "Scheduled", job), "a Scheduled Event naming the job (answer lost or not)"
    )
    p.rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"taints": None}})
    await p.delete(pod)
    await p.wait(lambda: p.get(pod) is None, "the pod gone")
    await p.wait(lambda: _is(p.job_state(job), "GONE", "COMPLETED", "CANCELLED"), "its job ended")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_bind_the_pod_informer_does_not_show_yet_is_a_bind(rig: Rig, view: Pool) -> None:
    """Our own bind is a bind (docs/scheduler.md "Never both at once"): a pod the scheduler bound, the pod
    informer lagging and the Node turned unfit meanwhile, keeps its job; so does one whose bind's answer was
    lost (read back before the gang is planned again)."""
    async with scheduler(rig, view) as service:
        await bound_unseen(view, service, view.names[2], lose_answer=False)
        await bound_unseen(view, service, view.names[5], lose_answer=True)


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_bind_the_pod_informer_shows_later_than_bind_shows_s_is_still_a_bind(
    rig: Rig, view: Pool
) -> None:
    """The same with the informer behind for longer than `bind_shows_s` (30 s; 0.5 s here): the memory of the
    bind ends on evidence only (the informer shows the pod bound or gone, or the API server shows it unbound),
    so the job is not cancelled for placement; the bind unshown that long is warned of once, not per pass.
    (Before, the memory was dropped after 30 s and the job cancelled, then the bound pod deleted.)"""
    async with scheduler(rig, view, bind_shows_s=0.5) as service:
        with capture_logs() as logs:
            await bound_unseen(view, service, view.names[2], late=True)
    warned = [e for e in logs if e["event"].startswith("bind not shown") and e["pod"] == f"{NS}/unseen-late"]
    assert len(warned) == 1, warned


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_cancel_whose_answer_was_lost_is_read_back_before_the_gang_is_planned_again(
    rig: Rig, view: Pool
) -> None:
    """A placement cancel slurmrestd carried out, its answer lost (a gateway's 504), the taint that refused
    the pod removed meanwhile and the job cache's copy of the job read just before the cancel (RUNNING): the
    job is read now before the gang is planned again, so the pod is not bound for the cancelled job (then
    deleted as if Slurm had cancelled it) but waits and runs under a new job. (Without the read-back the plan
    rests on the cache's copy: it binds whenever the next pass comes within the 0.25 s the bind takes that
    copy for fresh and before the cache's next poll sees the end.)"""
    node = view.names[2]
    kube_node = f"k8s-{node}"
    async with FaultProxy(rig.sandbox.rest_url) as proxy:
        async with scheduler(rig, view, slurm_url=proxy.url) as service:
            scheduler_ = service.scheduler
            assert isinstance(scheduler_, SchedulerController)
            blocker = await view.sbatch(node)
            await view.wait(lambda: _is(view.job_state(blocker), "RUNNING"), f"a Slurm job on {node}")
            pod = view.pod("uncancelled", annotations={"slurm-syncer.dev/constraint": f"f{node}"})
            await view.wait(lambda: view.scheduled(pod).get("reason") == "SlurmJobPending", "its job waits")
            job = _job_id(view.scheduled(pod)["message"])

            def taint_seen(wanted: bool) -> Callable[[], bool]:
                def seen() -> bool:
                    found = service.context.kube_cache.node(kube_node)
                    return found is not None and any(t.key == "refuse" for t in found.taints) == wanted

                return seen

            taint = {"key": "refuse", "effect": "NoSchedule"}
            view.rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"taints": [taint]}})
            await view.wait(taint_seen(True), "the syncer's Node cache shows the taint")
            cancel = proxy.hold_next("DELETE", f"/job/{job}")
            await view.sh("scancel", blocker)
            await view.wait(cancel.arrived.is_set, "the placement cancel sent")
            view.rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"taints": None}})
            await view.wait(taint_seen(False), "the syncer's Node cache shows the taint gone")
            await scheduler_.jobs.resync()  # the cache's copy: RUNNING, read just before the cancel lands
            proxy.gateway_status = 504  # slurmrestd carries the cancel out; its answer is lost
            cancel.release.set()
            await view.wait(lambda: scheduler_.stats.errors["cancel"] >= 1, "the cancel's answer lost")
            proxy.gateway_status = 0
            await view.wait(
                lambda: _is(view.job_state(job), "GONE", "CANCELLED"), "the job cancelled all the same"
            )
            await view.wait(lambda: bool(view.node_of(pod)), "the pod bound once the retry is due")
            assert view.job_of(pod) != job, f"bound for job {job}, which the scheduler had cancelled"
            assert not view.deleting(pod) and not view.events(pod, "SlurmPodDeleted")
            await view.delete(pod)
            await view.wait(lambda: view.get(pod) is None, "the pod gone")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_preemption_both_ways(rig: Rig, view: Pool) -> None:
    """Slurm preempts a pod's job and a pod's job preempts a batch job (the sandbox's tiers), side by side
    under their own syncer (beside the other stories they added to the event loop's load on a busy
    machine); check names the tier its pods may use without GraceTime."""
    tiered = [view.names[i] for i in TIERED_NODES]
    async with scheduler(rig, view) as service:
        # a pod that stays (refused: no requests) sets the grace check asks for: the longest, 12 s + 5 s
        view.pod("graced", grace=12, requests={})
        await asyncio.gather(preempted(view, tiered[0]), preempts(view, tiered[1]))
        status, text = await get(service, "/metrics")
        assert status == 200
        assert (sample(text, "slurm_syncer_scheduler_teardowns_total", cause="preempted") or 0) >= 1
        _, _, preemption, _ = await check_lines(service.slurm, view.client, view.scheduler, (NS,), False)
        # the Namespace lets its pods choose a partition: the tier without GraceTime is named, and main
        assert preemption[0] and preemption[3] and f"{TIER_LOW} (GraceTime 0 s" in preemption[1], preemption
        assert f"{TIER_GRACE} (" not in preemption[1] and f"{TIER_HIGH} (" not in preemption[1]
        assert "GraceTime=17 or more" in preemption[2], preemption


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_restart_adopts_without_duplicate_or_orphan(rig: Rig, view: Pool) -> None:
    """Stopped with pods pending, bound, terminating and a node held: the syncer started again makes no
    second job, leaves no orphan, ends the terminating pod's job only once the pod is gone, and keeps the
    hold until its pod is gone."""
    held_node, busy, bound, ending = view.names[4:8]
    rig.kube.kubelet.termination_s = 8.0  # deleted pods stop in up to 8 s: they outlive the restart
    async with scheduler(rig, view):
        blocker = await view.sbatch(busy)
        await view.wait(lambda: _is(view.job_state(blocker), "RUNNING"), "the blocking Slurm job running")
        waiting = view.pod("waiting", annotations={"slurm-syncer.dev/constraint": f"f{busy}"})
        running = view.pod("running", annotations={"slurm-syncer.dev/constraint": f"f{bound}"})
        stopping = view.pod("stopping", grace=8, annotations={"slurm-syncer.dev/constraint": f"f{ending}"})
        kept = view.pod("kept", grace=8, annotations={"slurm-syncer.dev/constraint": f"f{held_node}"})
        await view.wait(lambda: view.scheduled(waiting).get("reason") == "SlurmJobPending", "one pod pending")
        await view.wait(
            lambda: all(view.node_of(pod) for pod in (running, stopping, kept)), "three pods bound"
        )
        jobs = {pod: view.job_of(pod) for pod in (running, stopping, kept)}
        jobs[waiting] = _job_id(view.scheduled(waiting)["message"])
        await view.sh("scancel", jobs[kept])

        async def held() -> bool:
            return HOLD_TAG in (await rig.reader.get_node(held_node)).reason

        await view.wait(held, "the node held while the pod of the cancelled job stops")
    await view.delete(stopping)  # while no syncer runs
    assert view.get(stopping) is not None and view.get(kept) is not None
    async with scheduler(rig, view) as service:
        await wait_for(
            lambda: service.context.holds.settled, DEADLINE, what="the scheduler planned every gang"
        )
        if view.get(kept) is not None:  # the pod still stops: the hold is kept across the restart
            assert await held(), "the hold lifted by a restart while its pod still runs"
        if view.get(stopping) is not None:
            assert await view.job_state(jobs[stopping]) == "RUNNING", "a job ended while its pod still runs"
        await view.wait(
            lambda: view.get(stopping) is None and view.get(kept) is None, "the deleted pods gone"
        )
        await view.wait(lambda: _is(view.job_state(jobs[stopping]), "GONE", "CANCELLED", "COMPLETED"),
                        "the stopped pod's job ended (no orphan)")  # fmt: skip

        async def lifted() -> bool:
            return HOLD_TAG not in (await rig.reader.get_node(held_node)).reason

        await view.wait(lifted, "the hold lifted once its pod is gone")
        for pod in (waiting, running):
            assert await view.jobs_named(f"{NS}/{pod}") == [jobs[pod]], f"{pod}: one job, the one from before"
        assert view.node_of(running) == f"k8s-{bound}"
        assert isinstance(service.scheduler, SchedulerController)
        assert service.scheduler.stats.jobs["adopted"] >= 2
        # a blip costs no job: the running pod's Node NotReady and slurmrestd away for a few seconds
        rig.kube.set_node_condition(f"k8s-{bound}", "Ready", "False", "KubeletNotReady", "blip")
        scheduler_ = service.controller("scheduler")
        assert isinstance(scheduler_, SchedulerController)
        errors = scheduler_.jobs.stats.errors
        await asyncio.to_thread(rig.sandbox.stop_slurmrestd)
        try:
            await wait_for(lambda: scheduler_.jobs.stats.errors > errors, DEADLINE, what="a failed job poll")
        finally:
            await asyncio.to_thread(rig.sandbox.start_slurmrestd)
        rig.kube.set_node_condition(f"k8s-{bound}", "Ready", "True", "KubeletReady", "back")
        await wait_for(lambda: not scheduler_.jobs.stale and scheduler_.jobs.last_error == "", DEADLINE,
                       what="the job cache current again")  # fmt: skip
        assert view.node_of(running) == f"k8s-{bound}" and not view.deleting(running)
        assert await view.jobs_named(f"{NS}/{running}") == [jobs[running]]
        assert await view.job_state(jobs[running]) == "RUNNING"
        await view.sh("scancel", blocker)
        await view.wait(
            lambda: view.node_of(waiting) == f"k8s-{busy}", "the pending pod bound once room frees"
        )
        assert not view.deleting(running), "the blip cost the running pod"
        assert await view.jobs_named(f"{NS}/{waiting}") == [jobs[waiting]]


@pytest.mark.only_where(not EXTERNAL, "Slurm 24.11 only: 25.05+ takes external jobs")
async def test_24_11_refuses_without_placeholder(rig: Rig, view: Pool) -> None:
    """On 24.11 (REST v0.0.42, no external jobs) a pod is refused with an Event naming the release and
    the option that makes it work; with --scheduler-placeholder a placeholder batch job stands for it."""
    async with scheduler(rig, view) as service:
        pod = view.pod("old", annotations={"slurm-syncer.dev/constraint": f"f{view.names[0]}"})
        await view.wait(lambda: view.scheduled(pod).get("reason") == "SlurmRequestRefused", "the pod refused")
        message = view.scheduled(pod)["message"]
        assert "24.11" in message and "--scheduler-placeholder" in message, message
        await view.wait(lambda: view.told(pod, "SlurmSubmitFailed", "24.11"), "the refusal's Event")
        assert not await view.jobs_named(f"{NS}/old")
        _, slurm_side, preemption, _ = await check_lines(
            service.slurm, view.client, view.scheduler, (NS,), False
        )
        assert not slurm_side[0] and "has no external jobs: every pod is refused" in slurm_side[1], slurm_side
        assert "--scheduler-placeholder" in slurm_side[2]
        assert preemption[0] and preemption[3] and "has no GET /conf" in preemption[1], preemption
    async with scheduler(rig, view, placeholder=True) as service:
        await view.wait(lambda: view.node_of(pod) == f"k8s-{view.names[0]}", "bound under a placeholder job")
        job = view.job_of(pod)
        assert await view.job_state(job) == "RUNNING"
        _, slurm_side, _, _ = await check_lines(service.slurm, view.client, view.scheduler, (NS,), True)
        assert (
            slurm_side[0] and slurm_side[3] and "a placeholder batch job stands for each pod" in slurm_side[1]
        )
        await view.delete(pod)
        await view.wait(lambda: _is(view.job_state(job), "GONE", "COMPLETED", "CANCELLED"), "its job ended")


@pytest.mark.only_where(
    EXTERNAL, "26.05's slurmrestd first serving 24.11's REST (v0.0.42), then all of its own"
)
async def test_a_pod_refused_for_want_of_external_jobs_runs_once_slurmrestd_has_them(
    rig: Rig, view: Pool
) -> None:
    """slurmrestd serving v0.0.42 only (no external jobs: the pod is refused, to be tried again in 5 minutes),
    then replaced by one serving v0.0.43+ too (an upgrade). The syncer, not restarted, saw it away, chose the
    version again once it answered, and submitted the refused pod's job at once; no resync comes within the
    test (an hour away)."""
    async with served_only(rig.sandbox, ["v0.0.42"]), scheduler(rig, view, resync_s=3600.0) as service:
        pod = view.pod("upgraded", annotations={"slurm-syncer.dev/constraint": f"f{view.names[0]}"})
        await view.wait(lambda: view.scheduled(pod).get("reason") == "SlurmRequestRefused", "the pod refused")
        assert "REST v0.0.42" in view.scheduled(pod)["message"]
        await asyncio.to_thread(rig.sandbox.stop_slurmrestd)
        await view.wait(lambda: bool(service.slurm.follow.why), "slurmrestd seen away")
        await asyncio.to_thread(rig.sandbox.start_slurmrestd)  # every version: external jobs from v0.0.43
        await view.wait(lambda: view.node_of(pod) == f"k8s-{view.names[0]}", "bound under its Slurm job")
        assert service.slurm.external_jobs
        job = view.job_of(pod)
        await view.delete(pod)
        await view.wait(lambda: _is(view.job_state(job), "GONE", "COMPLETED", "CANCELLED"), "its job ended")


@pytest.mark.only_where(EXTERNAL, "allocating at once needs external jobs: Slurm 25.05+")
async def test_allocate_at_once_keeps_slurms_order_and_a_lost_answer_makes_no_second_job(
    rig: Rig, view: Pool
) -> None:
    """Allocate at once, else submit (docs/scheduler.md): a pod whose allocation's answer is lost is bound to
    the job that allocation made, found by its marker (no second job); a pod that a Slurm job of higher
    priority waits ahead of is not started before it (allocating at once on): its job waits (its submit
    answered HTTP 500 without Slurm's error number after slurmrestd made the job: found by its marker, no
    second job), and the pod runs once the job ahead has had the node. (A refused try and its FAILED record:
    tests/integration/test_slurm_jobs.py, on a node where a CPU is free; these nodes' 2 CPUs are one core.)"""
    lossy_node, busy = view.names[0], view.names[1]
    async with FaultProxy(rig.sandbox.rest_url) as proxy:

        def lose_allocations(write: tuple[float, str, str, bytes]) -> None:
            proxy.truncate = proxy.truncate or write[2].endswith("/job/allocate")  # its answer cut in half

        proxy.on_write = lose_allocations
        async with scheduler(rig, view, slurm_url=proxy.url) as service:
            scheduler_ = service.scheduler
            assert isinstance(scheduler_, SchedulerController)

            # allocating at once reads the syncer's caches: earlier tests may leave the node NOT_RESPONDING
            def room_seen() -> bool:
                node = service.slurm_cache.nodes.get(lossy_node)
                return (
                    node is not None
                    and "IDLE" in node.state
                    and node.state <= {"IDLE", "CLOUD", "DYNAMIC_NORM"}
                    and not any(job.pending for job in scheduler_.jobs.jobs.values())
                )

            await view.wait(room_seen, "the syncer sees the node idle and no job of ours waiting")
            lost = view.pod("lost", annotations={"slurm-syncer.dev/constraint": f"f{lossy_node}"})
            await view.wait(lambda: scheduler_.stats.errors["allocate"] >= 1, "an allocation's answer lost")
            proxy.on_write, proxy.truncate = None, False
            await view.wait(lambda: view.node_of(lost) == f"k8s-{lossy_node}", "the pod bound")
            assert await view.jobs_named(f"{NS}/{lost}") == [view.job_of(lost)], "one job: the one allocated"
            assert scheduler_.stats.jobs["submitted"] == 0

            blocker = await view.sbatch(busy)
            await view.wait(lambda: _is(view.job_state(blocker), "RUNNING"), "a Slurm job on the node")
            ahead = (await view.sh("sbatch", "--parsable", "-w", busy, "-c", "2", "--mem=100",
                                   "--priority=100000", "--wrap", "sleep 600")).split(";")[0]  # fmt: skip
            await view.wait(lambda: _is(view.job_state(ahead), "PENDING"), "a job of higher priority waiting")

            def lose_submits(write: tuple[float, str, str, bytes]) -> None:  # slurmrestd takes it: a bare 500
                if write[2].endswith("/job/submit"):
                    proxy.gateway_status = 500

            proxy.on_write = lose_submits
            later = view.pod("later", annotations={"slurm-syncer.dev/constraint": f"f{busy}"})
            await view.wait(lambda: scheduler_.stats.errors["submit"] >= 1, "a submit answered 500")
            proxy.on_write, proxy.gateway_status = None, 0
            await view.wait(lambda: view.scheduled(later).get("reason") == "SlurmJobPending", "its job waits")
            waiting = _job_id(view.scheduled(later)["message"])
            assert await view.job_state(waiting) == "PENDING" and not view.deleting(later)
            await view.sh("scancel", blocker)
            await view.wait(
                lambda: _is(view.job_state(ahead), "RUNNING"), "the job ahead gets the node first"
            )
            assert (
                not view.node_of(later)
                and not view.deleting(later)
                and await view.job_state(waiting) == "PENDING"
            )
            await view.sh("scancel", ahead)
            await view.wait(lambda: view.node_of(later) == f"k8s-{busy}", "the pod bound after it")
            assert view.job_of(later) == waiting and await view.jobs_named(f"{NS}/{later}") == [waiting]
            submits = [w for w in proxy.writes if w[2].endswith("/job/submit") and later.encode() in w[3]]
            assert len(submits) == 1, "the job of the submit answered 500 was adopted, not made again"


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_an_overwritten_job_id_annotation_ends_nothing(rig: Rig, view: Pool) -> None:
    """Anyone who may patch a bound pod may overwrite its slurm-syncer.dev/job-id annotation: with a number
    Slurm does not have, or with the job of another pod of ours, the pod keeps running under its job, which
    is neither cancelled nor its node held (ours wins: the job's marker names the pod and the job runs on its
    Node). Before, the first edit cancelled the pod's job as a duplicate of the number written, held the node
    and deleted the pod as its job was gone; the second moved the pod to the other pod's gang, where its own
    job saw it gone and was cancelled under it, with no hold. Its job's end still ends it: the pod is deleted
    and its node held for that job (read as the other pod's job, not the pod's, it was planned again every
    0.05 s, its node never held)."""
    first, second = view.names[0], view.names[1]
    async with scheduler(rig, view) as service:
        scheduler_ = service.scheduler
        assert isinstance(scheduler_, SchedulerController)
        rig.kube.kubelet.termination_s = (
            30.0  # a deleted pod takes its grace period to stop: the hold's window
        )
        edited = view.pod("edited", grace=10, annotations={"slurm-syncer.dev/constraint": f"f{first}"})
        other = view.pod("other", annotations={"slurm-syncer.dev/constraint": f"f{second}"})
        await view.wait(lambda: bool(view.node_of(edited) and view.node_of(other)), "both pods bound")
        jobs = {pod: view.job_of(pod) for pod in (edited, other)}

        async def held(node: str) -> bool:
            return HOLD_TAG in (await rig.reader.get_node(node)).reason

        for written in ("99999999", jobs[other]):
            annotations = {Keys.SCHEDULER_JOB_ID: written}
            rig.kube.patch("", "v1", "pods", edited, {"metadata": {"annotations": annotations}}, namespace=NS)

            def shown(written: str = written) -> bool:
                found = scheduler_.pods.get(NS, edited)
                return found is not None and found.annotations.get(Keys.SCHEDULER_JOB_ID) == written

            await view.wait(shown, f"the scheduler sees job-id {written} on the pod")
            for _ in range(2):  # both gangs planned on it, twice
                for pod in (edited, other):
                    scheduler_.runner.queue.add(f"{NS}/pod/{pod}")
                await asyncio.wait_for(scheduler_.runner.queue.wait_idle(), DEADLINE)
            for pod, node in ((edited, first), (other, second)):
                state = await view.job_state(jobs[pod])
                assert state == "RUNNING", f"{pod}'s job {state} after job-id {written}"
                assert not view.deleting(pod), f"{pod} deleted after job-id {written}"
                assert not await held(node), f"{node} held after job-id {written}"
        # its job ends in Slurm: the pod goes and its node is held for that job, not read as the other's
        await view.sh("scancel", jobs[edited])
        await view.wait(lambda: view.deleting(edited), "the pod deleted")
        said = f"Slurm job {jobs[edited]} was cancelled"
        await view.wait(
            lambda: view.told(edited, "SlurmPodDeleted", said), "the deletion's Event naming its job"
        )
        await view.wait(lambda: held(first), "its node held while it stops")
        assert view.get(edited) is not None, "the pod outlived its grace period's start"
        assert await view.job_state(jobs[other]) == "RUNNING" and not view.deleting(other)
        await view.delete(edited, grace=0)
        await view.delete(other)
        await view.wait(
            lambda: _is(view.job_state(jobs[other]), "GONE", "COMPLETED", "CANCELLED"), "its job ended"
        )

        async def released() -> bool:
            return not await held(first)

        await view.wait(released, "the hold lifted once the pod is gone")


def _copy_of(p: Pool, name: str, copy: str, *, same_node: bool) -> str:
    """A copy of pod `name` as `kubectl debug NAME --copy-to=COPY` makes it: its annotations (the scheduler's
    job-id annotation among them) and its spec, without spec.nodeName unless `--same-node`."""
    pod = p.get(name)
    assert pod is not None
    spec = {k: v for k, v in pod["spec"].items() if same_node or k != "nodeName"}
    annotations = dict(pod["metadata"].get("annotations") or {})
    body = {"metadata": {"name": copy, "annotations": annotations}, "spec": spec}
    p.rig.kube.create("", "v1", "pods", body, namespace=NS)
    return copy


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_copy_of_a_bound_pod_leaves_the_pod_and_its_job_alone(rig: Rig, view: Pool) -> None:
    """The job-id annotation is written by the scheduler's binding, but a pod's author can write it too, and
    `kubectl debug POD --copy-to=COPY` copies it (annotations and spec, nodeName cleared unless --same-node).
    Only the job's marker names its pods: a copy is a pod of its own (its own job; bound by hand with
    --same-node: someone else's), and neither the copy nor its deletion ends the pod it was copied from or
    that pod's job (before the fix the copy joined the job's gang: 1 node for 2 pods, so the bound pod was
    deleted for placement; a --same-node copy deleted took the pod with it as "a gang ends together")."""
    node = view.names[0]
    async with scheduler(rig, view) as service:
        scheduler_ = service.scheduler
        assert isinstance(scheduler_, SchedulerController)
        original = view.pod("original", annotations={"slurm-syncer.dev/constraint": f"f{node}"})
        await view.wait(lambda: view.node_of(original) == f"k8s-{node}", "the pod bound")
        job = view.job_of(original)

        async def settled(*pods: str) -> None:  # every gang of these pods planned once more
            for pod in pods:
                scheduler_.runner.queue.add(f"{NS}/pod/{pod}")
            await asyncio.wait_for(scheduler_.runner.queue.wait_idle(), DEADLINE)

        copy = _copy_of(view, original, "original-debug", same_node=False)
        await view.wait(
            lambda: bool(view.node_of(copy)) or view.deleting(original),
            "the copy bound under a job of its own (or the original deleted)",
        )
        assert not view.deleting(original), "the copy of a bound pod ended that pod"
        assert view.job_of(copy) != job, "the copy bound under the original's job"
        await settled(original, copy)
        assert not view.deleting(original) and view.node_of(original) == f"k8s-{node}"
        assert await view.job_state(job) == "RUNNING"
        await view.delete(copy)
        await view.wait(lambda: view.get(copy) is None, "the copy gone")

        # bound by hand beside it (--same-node), with a constraint the pod's Namespace lets it choose
        same = _copy_of(view, original, "original-same", same_node=True)
        await view.wait(lambda: scheduler_.pods.get(NS, same) is not None, "the scheduler sees the copy")
        await settled(original, same)
        rig.kube.kubelet.termination_s = 60.0  # the copy stops only when forced: it terminates meanwhile
        await view.delete(same, grace=60)

        def terminating() -> bool:
            found = scheduler_.pods.get(NS, same)
            return found is not None and found.terminating

        await view.wait(terminating, "the scheduler sees the copy terminating")
        await settled(original, same)
        assert not view.deleting(original), "the --same-node copy's deletion ended the pod it copies"
        assert await view.job_state(job) == "RUNNING"
        await view.delete(same, grace=0)
        await view.wait(lambda: scheduler_.pods.get(NS, same) is None, "the scheduler sees the copy gone")
        await settled(original, same)
        assert not view.deleting(original) and await view.job_state(job) == "RUNNING"
        await view.delete(original)
        await view.wait(lambda: _is(view.job_state(job), "GONE", "COMPLETED", "CANCELLED"), "its job ended")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_namespace_no_longer_served_keeps_its_pods_jobs(rig: Rig, view: Pool) -> None:
    """The syncer restarted with a --scheduler-namespaces that leaves out a namespace where a pod of its runs
    (its rights there withdrawn too, as the chart renders them): it cannot see that pod, so it must not take
    the pod's absence for its deletion and cancel the job, which frees the node in Slurm under the running
    pod (before the fix the job was cancelled, cause pod-deleted, at the first plan)."""
    node = view.names[0]
    async with scheduler(rig, view):
        pod = view.pod("served", annotations={"slurm-syncer.dev/constraint": f"f{node}"})
        await view.wait(lambda: view.node_of(pod) == f"k8s-{node}", "the pod bound")
        job = view.job_of(pod)
    async with scheduler(rig, view, namespaces=("elsewhere",)) as service:
        await wait_for(
            lambda: service.context.holds.settled, DEADLINE, what="the scheduler planned every gang"
        )
        assert isinstance(service.scheduler, SchedulerController)
        await asyncio.wait_for(service.scheduler.runner.queue.wait_idle(), DEADLINE)
        assert await view.job_state(job) == "RUNNING", "the job of a running pod cancelled"
        assert view.node_of(pod) == f"k8s-{node}" and not view.deleting(pod)
    async with scheduler(rig, view):
        await view.delete(pod)
        await view.wait(lambda: _is(view.job_state(job), "GONE", "COMPLETED", "CANCELLED"), "its job ended")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_slurmctld_restart_costs_no_pod_and_no_job(rig: Rig, view: Pool) -> None:
    """slurmctld stopped for a few seconds and started again from its saved state, a pod bound and another
    pending behind a Slurm job: the syncer fails closed while it is away, and once its job reads answer again
    the bound pod keeps its node and its job, the pending pod its job, and no second job is made."""
    bound_node, busy = view.names[0], view.names[1]
    async with scheduler(rig, view) as service:
        scheduler_ = service.scheduler
        assert isinstance(scheduler_, SchedulerController)
        blocker = await view.sbatch(busy)
        await view.wait(lambda: _is(view.job_state(blocker), "RUNNING"), "the blocking Slurm job running")
        running = view.pod("ctld-running", annotations={"slurm-syncer.dev/constraint": f"f{bound_node}"})
        waiting = view.pod("ctld-waiting", annotations={"slurm-syncer.dev/constraint": f"f{busy}"})
        await view.wait(lambda: view.node_of(running) == f"k8s-{bound_node}", "one pod bound")
        await view.wait(lambda: view.scheduled(waiting).get("reason") == "SlurmJobPending", "one pod pending")
        jobs = {running: view.job_of(running), waiting: _job_id(view.scheduled(waiting)["message"])}
        await asyncio.to_thread(rig.sandbox.restart_slurmctld, 3.0)
        await scheduler_.jobs.resync()  # a whole list read from the new slurmctld
        await wait_for(lambda: not scheduler_.jobs.stale and scheduler_.jobs.last_error == "", DEADLINE,
                       what="the job cache current again")  # fmt: skip
        for pod in (running, waiting):
            scheduler_.runner.queue.add(f"{NS}/pod/{pod}")
        await asyncio.wait_for(scheduler_.runner.queue.wait_idle(), DEADLINE)
        assert view.node_of(running) == f"k8s-{bound_node}" and not view.deleting(running)
        assert not view.deleting(waiting) and not view.node_of(waiting)
        assert await view.job_state(jobs[running]) == "RUNNING"
        assert await view.job_state(jobs[waiting]) == "PENDING"
        for pod in (running, waiting):
            assert await view.jobs_named(f"{NS}/{pod}") == [jobs[pod]], f"{pod}: one job, the one from before"
        await view.sh("scancel", blocker)
        await view.wait(lambda: view.node_of(waiting) == f"k8s-{busy}", "the pending pod bound at last")
        assert view.job_of(waiting) == jobs[waiting]


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_new_leader_adopts_the_jobs_the_old_one_submitted(rig: Rig, view: Pool) -> None:
    """Two replicas of one release (a rolling upgrade, a failover): the follower's job cache listed every job
    at its start and lists again only every 10 minutes, so it does not know a job the leader submitted since.
    Once it leads it reads every job before it plans: the pod pending under the old leader's job gets no
    second job (before the fix it did, at the new leader's first plan) and is bound under the first."""
    busy = view.names[1]

    def replica(identity: str) -> Any:
        config = FAST.replace(
            scheduler=SchedulerOptions(name=view.scheduler, namespaces=(NS,), retry_after_s=2.0),
            lease_name=f"e2e-{view.scheduler}", leader_election=True, identity=identity,
            lease_duration_s=3.0, renew_deadline_s=2.0, retry_period_s=0.5,
        )  # fmt: skip
        return running_syncer(rig, config)

    blocker = await view.sbatch(busy)
    await view.wait(lambda: _is(view.job_state(blocker), "RUNNING"), "the blocking Slurm job running")
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(replica("first"))
        await wait_for(lambda: first.gate.leading, DEADLINE, what="the first replica leads")
        async with replica("second") as second:
            scheduler_ = second.scheduler
            assert isinstance(scheduler_, SchedulerController)
            assert not second.gate.leading
            await wait_for(lambda: scheduler_.jobs.synced, DEADLINE, what="the follower's jobs listed")
            pod = view.pod("handed-over", annotations={"slurm-syncer.dev/constraint": f"f{busy}"})
            await view.wait(lambda: view.scheduled(pod).get("reason") == "SlurmJobPending", "its job waits")
            job = _job_id(view.scheduled(pod)["message"])
            await stack.aclose()  # the leader stops (and gives its lease up)
            await wait_for(lambda: second.gate.leading, DEADLINE, what="the second replica leads")
            await wait_for(
                lambda: scheduler_.runner.resync_pending == 0 and second.context.holds.settled, DEADLINE,
                what="the new leader planned every gang",
            )  # fmt: skip
            scheduler_.runner.queue.add(f"{NS}/pod/{pod}")
            await asyncio.wait_for(scheduler_.runner.queue.wait_idle(), DEADLINE)
            assert await view.jobs_named(f"{NS}/{pod}") == [job], "a second job for a pod that had one"
            await view.sh("scancel", blocker)
            await view.wait(lambda: view.node_of(pod) == f"k8s-{busy}", "the pod bound once room frees")
            assert view.job_of(pod) == job
            await view.delete(pod)
            await view.wait(lambda: _is(view.job_state(job), "GONE", "COMPLETED", "CANCELLED"), "job ended")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_two_releases_with_one_scheduler_name_leave_each_others_pods_alone(
    rig: Rig, view: Pool
) -> None:
    """Two releases (their own Lease, so their own marker: a blue/green upgrade) serving one scheduler name:
    green's job cache follows only its own jobs, so a pod blue bound names a job green does not have. The
    fresh read before the deletion finds it live under blue's marker: green leaves the pod, holds nothing and
    says so on the pod (before the fix green drained the node and deleted the pod as job-gone, then blue
    cancelled its running job). A new pod while both run may get a job from each: the one it does not run
    under is cancelled by its release. Once blue is gone and Slurm ends the job, green deletes the pod."""
    node = view.names[0]

    def release(colour: str) -> Any:
        config = FAST.replace(
            scheduler=SchedulerOptions(name=view.scheduler, namespaces=(NS,), retry_after_s=2.0),
            lease_name=f"e2e-{view.scheduler}-{colour}",
        )
        return running_syncer(rig, config)

    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(release("blue"))
        pod = view.pod("blue-pod", annotations={"slurm-syncer.dev/constraint": f"f{node}"})
        await view.wait(lambda: view.node_of(pod) == f"k8s-{node}", "bound by blue")
        job = view.job_of(pod)
        async with release("green") as green:
            s = green.scheduler
            assert isinstance(s, SchedulerController)
            await wait_for(lambda: green.context.holds.settled, DEADLINE, what="green planned every gang")
            shared = ("SchedulerNameShared", f"Slurm job {job} ", f"e2e-{view.scheduler}-blue")
            await view.wait(lambda: view.told(pod, *shared) or view.deleting(pod), "green planned blue's pod")
            assert not view.deleting(pod), "green deleted the pod blue bound"
            s.runner.queue.add(f"{NS}/pod/{pod}")
            await asyncio.wait_for(s.runner.queue.wait_idle(), DEADLINE)
            assert not view.deleting(pod), "green deleted the pod blue bound"
            assert await view.job_state(job) == "RUNNING"
            assert len(green.context.holds) == 0, "green held the node of blue's running job"
            assert len(view.events(pod, "SchedulerNameShared")) == 1, "said more than once"
            found = await check_lines(green.slurm, view.client, view.scheduler, (NS,), False, s.release)
            (said,) = [line for line in found if "another slurm-syncer release" in line[1]]
            assert not said[0] and said[3] and f"-blue:{view.scheduler}: Slurm job(s) {job}" in said[1], said

            # a new pod while both run: each may submit a job for it; the one it is not bound under goes
            both = view.pod("both-pod")
            await view.wait(lambda: bool(view.node_of(both)), "the new pod bound")
            runs = view.job_of(both)

            async def one_job() -> bool:
                return await view.jobs_named(f"{NS}/{both}") == [runs]

            await view.wait(one_job, "one job left for the new pod: the one it runs under")
            assert not view.deleting(both) and await view.job_state(runs) == "RUNNING"
            await stack.aclose()  # blue uninstalled: its pod and its job stay
            await view.sh("scancel", job)
            await view.wait(lambda: view.deleting(pod), "green deletes the pod once blue's job ended")
            assert view.told(pod, "SlurmPodDeleted", f"Slurm job {job} is no longer in Slurm")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_refusal_belongs_to_the_pods_it_was_made_for(rig: Rig, view: Pool) -> None:
    """Slurm refused a gang's job (a constraint no node has); one of its pods is deleted and made again with
    the same name and a constraint that fits, the other pod fixed likewise: the gang's pods changed, so its
    job is submitted at once (not after `retry_after_s`, 10 minutes here) and the new pod never shows the old
    refusal. The gang is never empty meanwhile (its other pod stays), so the old refusal is there to keep
    whichever way the reconciles fall: before the fix the new pod waited out the old retry, showing its
    message."""
    a, b = view.names[0], view.names[1]
    group = {"slurm-syncer.dev/group": "redo"}

    def asks(constraint: str) -> dict[str, str]:
        return {"slurm-syncer.dev/group-size": "2", "slurm-syncer.dev/constraint": constraint}

    def uid(name: str) -> str:
        return str(((view.get(name) or {}).get("metadata") or {}).get("uid", ""))

    async with scheduler(rig, view, retry_after_s=600.0):
        first = view.pod("redo-0", labels=group, annotations=asks("nosuchfeature"))
        second = view.pod("redo-1", labels=group, annotations=asks("nosuchfeature"))
        for pod in (first, second):
            await view.wait(
                functools.partial(view.told, pod, "SlurmSubmitFailed", "Slurm refused the job"),
                f"Slurm refused {pod}'s job",
            )
        refusal = view.scheduled(first)
        assert refusal.get("reason") == "SlurmRequestRefused", refusal
        old_uid = uid(first)
        await view.delete(first, grace=0)
        await view.wait(lambda: view.get(first) is None, "the refused pod gone")
        fixed = asks(f"f{a}|f{b}")
        view.rig.kube.patch("", "v1", "pods", second, {"metadata": {"annotations": fixed}}, namespace=NS)
        view.pod(first, labels=group, annotations=fixed)
        new_uid = uid(first)
        assert new_uid and new_uid != old_uid
        shown: list[dict[str, Any]] = []

        def bound() -> bool:  # every condition the new pod is seen with on the way
            cond = view.scheduled(first)
            if cond and cond not in shown:
                shown.append(cond)
            return bool(view.node_of(first) and view.node_of(second))

        try:
            await view.wait(bound, "the gang's job submitted at once and both pods bound")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the new pod showed {shown}") from None
        assert uid(first) == new_uid
        assert not [c for c in shown if c.get("message") == refusal.get("message")], shown
        assert len({view.job_of(first), view.job_of(second)}) == 1
        await view.delete(first)
        await view.wait(lambda: view.get(first) is None and view.get(second) is None, "the gang ended")


@pytest.mark.only_where(
    EXTERNAL, "external jobs need Slurm 25.05+: see test_24_11_refuses_without_placeholder"
)
async def test_a_pod_made_again_with_the_same_name_is_not_held_by_its_old_refusal(
    rig: Rig, view: Pool
) -> None:
    """A pod alone whose job Slurm refused, deleted and made again with the same name and a constraint that
    fits while the scheduler's pod informer lags (its watch held back): the informer shows the deletion and
    the new pod together. The new pod's job is submitted at once (`retry_after_s` is 10 minutes here) and it
    never shows the old refusal. Before the fix it waited out the old retry, showing its message, whenever the
    informer handed both events on before the emptied gang was planned (2 runs of 2 here; the group story
    above shows the defect with no such window)."""
    node = view.names[2]
    async with scheduler(rig, view, retry_after_s=600.0):
        pod = view.pod("again", annotations={"slurm-syncer.dev/constraint": "nosuchfeature"})
        await view.wait(lambda: view.told(pod, "SlurmSubmitFailed", "Slurm refused the job"), "refused")
        refusal = view.scheduled(pod)
        assert refusal.get("reason") == "SlurmRequestRefused", refusal
        faults = view.rig.kube.faults
        faults.hold_watches(f"/namespaces/{NS}/pods", f"spec.schedulerName={view.scheduler}")
        try:
            await view.delete(pod, grace=0)
            await view.wait(lambda: view.get(pod) is None, "the refused pod gone")
            view.pod(pod, annotations={"slurm-syncer.dev/constraint": f"f{node}"})
        finally:
            faults.release_watches()
        shown: list[dict[str, Any]] = []

        def bound() -> bool:
            cond = view.scheduled(pod)
            if cond and cond not in shown:
                shown.append(cond)
            return view.node_of(pod) == f"k8s-{node}"

        try:
            await view.wait(bound, "the new pod's job submitted at once and the pod bound")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the new pod showed {shown}") from None
        assert not [c for c in shown if c.get("message") == refusal.get("message")], shown
        await view.delete(pod)
        await view.wait(lambda: view.get(pod) is None, "the pod gone")
