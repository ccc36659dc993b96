"""NodeSets end to end: the emulator's kubelet runs the pods, a real slurmd per pod registers the
dynamic Slurm node (as the slurmd container would), and the syncer scales and updates them against
the real slurmctld without killing a job or leaving a phantom node."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from syncer.app.service import SyncerService
from syncer.controllers.attributes.options import AttributeOptions
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.model.keys import Keys
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.kubeapi.store import Change
from syncer.testing.slurmd_standin import SlurmdStandIn
from tests.e2e.rig import NAMESPACE, Rig, condition, node_body, running_syncer, sync
from tests.fixtures.kube import Kubectl
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
GROUP, VERSION = "slurm-syncer.dev", "v1alpha1"
_names = itertools.count(1)


@dataclass
class Set:
    """One NodeSet under test and the Slurm jobs it started."""

    rig: Rig
    name: str
    jobs: list[str] = field(default_factory=list)

    def obj(self) -> dict[str, Any]:
        found = self.rig.kube.get(GROUP, VERSION, "nodesets", self.name, namespace=NAMESPACE)
        assert found is not None, f"NodeSet {self.name} is missing"
        return found

    def status(self) -> dict[str, Any]:
        return dict(self.obj().get("status") or {})

    def patch_spec(self, spec: dict[str, Any]) -> None:
        self.rig.kube.patch(GROUP, VERSION, "nodesets", self.name, {"spec": spec}, namespace=NAMESPACE)

    def pods(self) -> dict[str, dict[str, Any]]:
        return {
            p["metadata"]["name"]: p
            for p in self.rig.kube.api.store.objects_of(("", "pods"), NAMESPACE)
            if (p["metadata"].get("labels") or {}).get(Keys.NODESET_LABEL) == self.name
        }

    def member(self, index: int) -> str:
        return f"{self.name}-{index}"

    def slurm_names(self) -> set[str]:
        out = self.rig.sandbox.run("sinfo", "-h", "-N", "-o", "%N", check=True).stdout
        return {n for n in out.split() if n.startswith(self.name + "-")}

    def submit(self, node: str, seconds: int) -> str:
        out = self.rig.sandbox.run(
            "sbatch", "--no-requeue", "-w", node, "--wrap", f"sleep {seconds}", check=True
        ).stdout
        job = re.search(r"(\d+)", out)
        assert job, out
        self.jobs.append(job.group(1))
        return job.group(1)

    def job_state(self, job: str) -> str:
        out = self.rig.sandbox.run("scontrol", "show", "job", job).stdout
        found = re.search(r"JobState=(\S+)", out)
        return found.group(1) if found else "GONE"

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.rig.kube.api.store.objects_of(("", "events"))
            if e["involvedObject"].get("kind") == "NodeSet"
            and e["involvedObject"]["name"] == self.name
            and e["reason"] == reason
        ]


def ready(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return bool(cond and cond["status"] == "True" and not pod["metadata"].get("deletionTimestamp"))


def manifest(name: str, replicas: int, image: str = "slurmd:1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "slurm": {"features": ["nsfeat"]},
            "template": {
                "metadata": {"labels": {"app": "slurmd"}},
                "spec": {
                    "nodeSelector": {"pool": "nodeset"},
                    "containers": [{"name": "slurmd", "image": image}],
                },
            },
            **spec,
        },
    }


def jobs_on(rig: Rig, prefix: str) -> list[str]:
    out = rig.sandbox.run("squeue", "-h", "-o", "%i %N", check=True).stdout
    return [line.split()[0] for line in out.splitlines() if prefix in line]


def delete_slurm_nodes(rig: Rig, prefix: str) -> None:
    out = rig.sandbox.run("sinfo", "-h", "-N", "-o", "%N").stdout
    for node in {n for n in out.split() if n.startswith(prefix)}:
        rig.sandbox.delete_node(node)


def ensure_pool(rig: Rig) -> None:
    """The namespace and the two Nodes a NodeSet template's nodeSelector `pool: nodeset` picks."""
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    for index in range(2):
        if rig.kube.node(f"pool-{index}") is None:
            rig.kube.create("", "v1", "nodes", node_body(f"pool-{index}", {"pool": "nodeset"}))


async def end_jobs(rig: Rig, prefix: str) -> None:
    """End the jobs on these nodes while their slurmd still runs, so the nodes can be deleted afterwards."""
    for job in jobs_on(rig, prefix):
        rig.sandbox.run("scancel", job)
    await wait_for(lambda: not jobs_on(rig, prefix), deadline_s=60, what="test jobs ended")


@asynccontextmanager
async def nodeset_rig(
    rig: Rig, replicas: int = 0, slurm_url: str = "", attributes: AttributeOptions | None = None, **spec: Any
) -> AsyncIterator[tuple[Set, SyncerService, SlurmdStandIn]]:
    name = f"nset{next(_names)}"
    ensure_pool(rig)
    try:
        async with SlurmdStandIn(rig.kube, rig.sandbox) as standin:
            try:
                async with running_syncer(
                    rig, slurm_url=slurm_url, sync=sync(max_drain_fraction=1.0),
                    nodeset=NodeSetOptions(requeue_s=0.5), attributes=attributes or AttributeOptions(),
                ) as service:  # fmt: skip
                    rig.kube.create(
                        GROUP, VERSION, "nodesets", manifest(name, replicas, **spec), namespace=NAMESPACE
                    )
                    yield Set(rig, name), service, standin
            finally:
                await end_jobs(rig, name + "-")
            assert not standin.failures, standin.failures
    finally:
        delete_slurm_nodes(rig, name + "-")


async def wait_registered(nodeset: Set, count: int, deadline_s: float = 90) -> None:
    def done() -> bool:
        pods = nodeset.pods()
        status = nodeset.status()
        return (
            len(pods) == count
            and all(ready(p) for p in pods.values())
            and len(nodeset.slurm_names()) == count
            and status.get("readyReplicas") == count
            and (status.get("slurm") or {}).get("idle") == count
        )

    await wait_for(done, deadline_s=deadline_s, what=f"{count} slurmd pods running and registered idle")


async def test_scale_out_then_in_waits_for_the_job_and_leaves_no_phantom(rig: Rig):
    async with nodeset_rig(rig) as (nodeset, service, _):
        await wait_for(
            lambda: nodeset.status().get("observedGeneration") == 1 and nodeset.status().get("replicas") == 0,
            what="status of the empty NodeSet",
        )
        assert condition(nodeset.obj(), "Valid")["status"] == "True"  # type: ignore[index]
        nodeset.patch_spec({"replicas": 5})
        await wait_registered(nodeset, 5)
        first = await rig.slurm(nodeset.member(0))
        assert "nsfeat" in first.features  # joined with the NodeSet's features
        pod = nodeset.pods()[nodeset.member(0)]
        assert pod["metadata"]["labels"][Keys.NODE_NAME_LABEL] == nodeset.member(0)
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "NodeSet"
        # jobs on 0, 1 (long) and 2 (short): scale-in takes the idle 3 and 4, then busy 2
        long_jobs = [nodeset.submit(nodeset.member(i), 300) for i in (0, 1)]
        short_job = nodeset.submit(nodeset.member(2), 12)
        await wait_for(
            lambda: nodeset.status().get("slurm", {}).get("allocated") == 3, what="three nodes allocated"
        )
        await wait_for(
            lambda: nodeset.pods()[nodeset.member(2)]["metadata"]["labels"].get(Keys.BUSY_LABEL) == "true",
            what="busy label on the pod running a job",
        )
        nodeset.patch_spec({"replicas": 2})

        async def draining() -> bool:
            node = await rig.slurm(nodeset.member(2))
            return node.drain_flag and f"scale-in of NodeSet {nodeset.name}" in node.reason

        await wait_for(draining, deadline_s=15, what="busy node chosen for removal draining")
        assert (await rig.slurm(nodeset.member(2))).reason.startswith("k8s: ")
        await wait_for(
            lambda: nodeset.slurm_names() == {nodeset.member(i) for i in range(3)},
            deadline_s=30,
            what="idle nodes 3 and 4: pods and Slurm records gone",
        )
        assert nodeset.member(2) in nodeset.pods(), "pod removed while its job runs"
        assert nodeset.job_state(short_job) == "RUNNING"
        await wait_for(
            lambda: (
                nodeset.slurm_names() == {nodeset.member(0), nodeset.member(1)}
                and set(nodeset.pods()) == {nodeset.member(0), nodeset.member(1)}
            ),
            deadline_s=60,
            what="node 2 removed after its job finished",
        )
        assert nodeset.job_state(short_job) == "COMPLETED"  # finished, not killed
        assert all(nodeset.job_state(j) == "RUNNING" for j in long_jobs)
        for kept in (0, 1):
            assert not (await rig.slurm(nodeset.member(kept))).drain_flag
        await wait_for(lambda: nodeset.status().get("replicas") == 2, what="status replicas 2")
        assert nodeset.events("DeletedSlurmNode") and nodeset.events("ScalingIn")
        assert service.nodesets is not None and service.nodesets.stats.slurm_nodes_deleted == 3


async def test_rolling_update_keeps_max_unavailable_at_every_instant(rig: Rig):
    replicas, budget = 4, 2
    async with nodeset_rig(rig, replicas, updateStrategy={"rollingUpdate": {"maxUnavailable": budget}}) as (
        nodeset,
        _,
        _,
    ):
        await wait_registered(nodeset, replicas)
        old_hash = nodeset.status()["templateHash"]
        job = nodeset.submit(nodeset.member(0), 10)
        await wait_for(lambda: nodeset.status().get("slurm", {}).get("allocated") == 1, what="job running")
        worst = 0

        def available_members() -> int:
            return sum(
                1
                for p in nodeset.pods().values()
                if ready(p) and Keys.REMOVAL not in p["metadata"].get("annotations", {})
            )

        def watch(change: Change) -> None:
            nonlocal worst
            if change.resource == ("", "pods"):
                worst = max(worst, replicas - available_members())

        rig.kube.api.store.listeners.append(watch)
        try:
            nodeset.patch_spec(
                {"template": manifest(nodeset.name, replicas, image="slurmd:2")["spec"]["template"]}
            )

            def rolled() -> bool:
                status = nodeset.status()
                pods = nodeset.pods().values()
                return (
                    status.get("updatedReplicas") == replicas
                    and status.get("templateHash") != old_hash
                    and len(pods) == replicas
                    and all(
                        ready(p) and Keys.REMOVAL not in p["metadata"].get("annotations", {}) for p in pods
                    )
                    and (status.get("slurm") or {}).get("idle") == replicas
                )

            await wait_for(rolled, deadline_s=120, what="all pods replaced and registered again")
        finally:
            rig.kube.api.store.listeners.remove(watch)
        assert 0 < worst <= budget, f"{worst} members unavailable at once (maxUnavailable {budget})"
        assert nodeset.job_state(job) == "COMPLETED"  # node 0 was replaced only after its job
        images = {p["spec"]["containers"][0]["image"] for p in nodeset.pods().values()}
        assert images == {"slurmd:2"}
        assert nodeset.slurm_names() == {nodeset.member(i) for i in range(replicas)}
        for index in range(replicas):
            assert not (await rig.slurm(nodeset.member(index))).drain_flag  # back in service


async def test_a_pod_evicted_by_its_kubelet_is_replaced(rig: Rig):
    """review5 #3: the kubelet's node-pressure eviction leaves the pod `Failed/Evicted` (its slurmd gone):
    it stayed a member for good, the Slurm node not responding and the NodeSet Steady one short. It is
    deleted, the member gets a new pod under its name, its slurmd registers, the sync engine's drain for the
    terminating pod is lifted; an Event names the pod and why it ended. The other member's job runs on."""
    async with nodeset_rig(rig, 2) as (nodeset, service, _):
        await wait_registered(nodeset, 2)
        kept, evicted = nodeset.member(0), nodeset.member(1)
        job = nodeset.submit(kept, 300)
        await wait_for(
            lambda: nodeset.job_state(job) == "RUNNING", deadline_s=30, what="a job on the other member"
        )
        old = nodeset.pods()[evicted]["metadata"]["uid"]
        status = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}
        # the kubelet's eviction: the pod ends (its slurmd stops with it, the stand-in's rule)
        rig.kube.patch(
            "", "v1", "pods", evicted, {"status": status}, namespace=NAMESPACE, subresource="status"
        )

        def replaced() -> bool:
            pod = nodeset.pods().get(evicted)
            return pod is not None and pod["metadata"]["uid"] != old

        await wait_for(replaced, deadline_s=60, what="the evicted pod replaced under its name")

        async def back() -> bool:
            # registered by the new slurmd, and the sync engine's drain for the terminating pod lifted
            node = await rig.slurm(evicted)
            pods = nodeset.pods()
            return (
                node.base_state == "IDLE"
                and not node.drain_flag
                and "NOT_RESPONDING" not in node.state
                and all(ready(p) for p in pods.values())
                and nodeset.status().get("readyReplicas") == 2
            )

        await wait_for(
            back, deadline_s=90, what="the new pod's slurmd registered, the node idle and undrained"
        )
        [told] = nodeset.events("PodEnded")
        assert told["type"] == "Warning"
        why = "Failed: Evicted: The node was low on resource: memory."
        assert f"pod {evicted} ended ({why})" in told["message"]
        assert "a new pod takes its place" in told["message"]
        assert nodeset.job_state(job) == "RUNNING"
        assert service.nodesets is not None and service.nodesets.stats.ended_pods == 1
        await wait_for(
            lambda: (condition(nodeset.obj(), "Progressing") or {}).get("reason") == "Steady", what="Steady"
        )


async def test_busy_slurmd_cannot_be_evicted(rig: Rig):
    async with nodeset_rig(rig, 1) as (nodeset, _, _):
        await wait_registered(nodeset, 1)
        member = nodeset.member(0)
        job = nodeset.submit(member, 300)
        await wait_for(
            lambda: nodeset.pods()[member]["metadata"]["labels"].get(Keys.BUSY_LABEL) == "true",
            what="busy label",
        )
        pdb = rig.kube.get(
            "policy", "v1", "poddisruptionbudgets", f"{nodeset.name}-busy", namespace=NAMESPACE
        )
        assert pdb is not None and pdb["spec"]["maxUnavailable"] == 0
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": member, "namespace": NAMESPACE},
        }
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{member}/eviction"
        async with aiohttp.ClientSession(base_url=rig.kube.url) as http:
            async with http.post(path, json=eviction) as response:
                assert response.status == 429, await response.text()
                assert "disruption budget" in (await response.json())["message"]
            assert member in nodeset.pods()
            rig.sandbox.run("scancel", job, check=True)
            await wait_for(
                lambda: Keys.BUSY_LABEL not in nodeset.pods()[member]["metadata"]["labels"],
                deadline_s=30,
                what="busy label removed once the job is gone",
            )
            async with http.post(path, json=eviction) as response:
                assert response.status == 201, await response.text()


async def test_slurm_unreachable_during_scale_in_deletes_nothing(rig: Rig):
    async with FaultProxy(rig.sandbox.rest_url) as proxy:
        async with nodeset_rig(rig, 2, slurm_url=proxy.url) as (nodeset, service, _):
            await wait_registered(nodeset, 2)
            job = nodeset.submit(nodeset.member(1), 300)
            nodeset.submit(nodeset.member(0), 300)
            await wait_for(
                lambda: nodeset.status().get("slurm", {}).get("allocated") == 2, what="jobs running"
            )
            nodeset.patch_spec({"replicas": 1})

            async def draining() -> bool:
                return (await rig.slurm(nodeset.member(1))).drain_flag

            await wait_for(draining, deadline_s=15, what="node 1 draining for scale-in")
            proxy.fail_next(1_000_000, status=503)
            await wait_for(lambda: service.slurm_cache.stale, deadline_s=20, what="Slurm data stale")
            rig.sandbox.run("scancel", job, check=True)  # drained now, but the syncer cannot see it
            assert service.nodesets is not None
            before = service.nodesets.stats.reconciles
            await wait_for(
                lambda: service.nodesets is not None and service.nodesets.stats.reconciles >= before + 5,
                deadline_s=30,
                what="reconciles while Slurm is unreachable",
            )
            await wait_for(
                lambda: (condition(nodeset.obj(), "SlurmAvailable") or {}).get("status") == "False",
                what="SlurmAvailable=False",
            )
            assert nodeset.member(1) in nodeset.pods(), "pod deleted on stale Slurm data"
            assert nodeset.member(1) in nodeset.slurm_names()
            proxy.clear_faults()
            await wait_for(
                lambda: (
                    nodeset.member(1) not in nodeset.pods() and nodeset.slurm_names() == {nodeset.member(0)}
                ),
                deadline_s=60,
                what="removal completed once Slurm answers again",
            )


async def test_kubectl_scale_and_invalid_spec(rig: Rig, tmp_path: Path):
    kubectl = Kubectl(rig.kubeconfig, tmp_path / "kubectl-cache")
    async with nodeset_rig(rig) as (nodeset, _, _):
        await kubectl("scale", f"nodeset/{nodeset.name}", "--replicas=2", "-n", NAMESPACE)
        await wait_registered(nodeset, 2)
        shown = await kubectl.json("get", "nds", nodeset.name, "-n", NAMESPACE)
        assert shown["status"]["readyReplicas"] == 2
        assert shown["status"]["selector"] == f"{Keys.NODESET_LABEL}={nodeset.name}"
        table = await kubectl("get", "nodesets", "-n", NAMESPACE)
        assert re.search(rf"{nodeset.name}\s+2\s+2\s+2\s+2", table), table
        # a spec the emulator lets through (a real server refuses it by a CEL rule) but the reconciler
        # refuses: named in an Event and a condition
        bad = "b" * 41
        rig.kube.create(GROUP, VERSION, "nodesets", manifest(bad, 1), namespace=NAMESPACE)
        await wait_for(
            lambda: (condition(Set(rig, bad).obj(), "Valid") or {}).get("status") == "False",
            what="Valid=False on the bad NodeSet",
        )
        message = condition(Set(rig, bad).obj(), "Valid")["message"]  # type: ignore[index]
        assert "at most 40 characters" in message
        assert Set(rig, bad).events("InvalidSpec")
        assert not Set(rig, bad).pods()


async def test_drain_timeout_is_reported_never_forced(rig: Rig):
    async with nodeset_rig(rig, 1, drainTimeout="2s") as (nodeset, service, _):
        await wait_registered(nodeset, 1)
        member = nodeset.member(0)
        job = nodeset.submit(member, 300)
        await wait_for(lambda: nodeset.status().get("slurm", {}).get("allocated") == 1, what="job running")
        nodeset.patch_spec({"replicas": 0})
        await wait_for(
            lambda: (condition(nodeset.obj(), "DrainTimeout") or {}).get("status") == "True",
            deadline_s=20,
            what="DrainTimeout condition",
        )
        assert member in condition(nodeset.obj(), "DrainTimeout")["message"]  # type: ignore[index]
        assert nodeset.events("DrainTimeout")
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{service.http_port}/metrics") as response:
                text = await response.text()
        assert f'slurm_syncer_nodeset_drain_timeouts{{nodeset="{NAMESPACE}/{nodeset.name}"}} 1.0' in text
        assert member in nodeset.pods() and nodeset.job_state(job) == "RUNNING"  # not forced
        rig.sandbox.run("scancel", job, check=True)
        await wait_for(
            lambda: not nodeset.pods() and not nodeset.slurm_names(), deadline_s=60, what="removal"
        )
        await wait_for(
            lambda: (condition(nodeset.obj(), "DrainTimeout") or {}).get("status") == "False",
            what="DrainTimeout cleared",
        )


async def test_daemonset_mode_follows_node_labels(rig: Rig):
    async with nodeset_rig(rig, mode="DaemonSet", nodeSelector={"nodeset-ds": "yes"}) as (nodeset, _, _):
        rig.kube.patch("", "v1", "nodes", "pool-1", {"metadata": {"labels": {"nodeset-ds": "yes"}}})
        member = f"{nodeset.name}-pool-1"
        await wait_registered(nodeset, 1)
        assert set(nodeset.pods()) == {member}
        assert nodeset.pods()[member]["spec"]["nodeName"] == "pool-1"
        rig.kube.patch("", "v1", "nodes", "pool-1", {"metadata": {"labels": {"nodeset-ds": None}}})
        await wait_for(
            lambda: not nodeset.pods() and not nodeset.slurm_names(),
            deadline_s=30,
            what="pod and Slurm node gone after the Node stopped matching",
        )
