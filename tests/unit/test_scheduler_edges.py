"""The edges' structs (syncer/kube's SchedulerPod, KubeNode, PodUsage) as the scheduler core takes
them, and a pod read by the Kubernetes edge carried through gangs and the plan to its job request."""

from __future__ import annotations

from syncer.controllers.scheduler import edges, marker, slurmtime
from syncer.controllers.scheduler.gang import Waiting, group
from syncer.controllers.scheduler.options import Options
from syncer.controllers.scheduler.plan import Submit, plan
from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.settings import Settings
from syncer.controllers.scheduler.values import (
    Job,
    Marker,
    Node,
    Owner,
    Pod,
    PodRef,
    Requirement,
    Scheduled,
    SelectorTerm,
    Taint,
    Toleration,
    World,
)
from syncer.model.jobs import JobSubmission, SlurmJob
from syncer.model.kube import (
    Condition,
    KubeNode,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodUsage,
    SchedulerPod,
)
from syncer.model.kube import Taint as KubeTaint
from syncer.model.kube import Toleration as KubeToleration

REQUESTS = {"cpu": 2500, "memory": 1024**3, "nvidia.com/gpu": 1}


def test_a_scheduler_pod() -> None:
    found = SchedulerPod(
        namespace="ns",
        name="p",
        uid="u",
        node_name="k1",
        phase="Running",
        deletion_timestamp=5.0,
        termination_grace_period_s=12,
        labels={"l": "1"},
        annotations={"a": "2"},
        owners=(
            OwnerRef(api_version="v1", kind="ReplicaSet", name="rs", uid="r"),
            OwnerRef(api_version="batch/v1", kind="Job", name="train", uid="j", controller=True),
        ),
        requests=REQUESTS,
        resources_error="spec.containers[0].resources.requests[cpu]: bad",
        node_selector={"zone": "a"},
        affinity=(
            NodeSelectorTerm(
                match_expressions=(NodeSelectorRequirement(key="gen", operator="Gt", values=("4",)),),
                match_fields=(NodeSelectorRequirement(key="metadata.name", operator="In", values=("k1",)),),
            ),
        ),
        tolerations=(KubeToleration(key="t", operator="Exists", value="v", effect="NoSchedule"),),
        scheduling_gates=("kueue",),
        conditions=(
            Condition(type="Ready", status="True"),
            Condition(
                type="PodScheduled",
                status="False",
                reason="SlurmJobPending",
                message="Slurm job 4 is pending",
            ),
        ),
    )
    assert edges.pod(found) == Pod(
        namespace="ns",
        name="p",
        uid="u",
        requests=REQUESTS,
        resources_error="spec.containers[0].resources.requests[cpu]: bad",
        gated=True,
        annotations={"a": "2"},
        labels={"l": "1"},
        owner=Owner(kind="Job", name="train", uid="j", api_version="batch/v1"),
        phase="Running",
        node_name="k1",
        deleting=True,
        grace_period_s=12,
        tolerations=(Toleration(key="t", operator="Exists", value="v", effect="NoSchedule"),),
        node_selector={"zone": "a"},
        affinity=(
            SelectorTerm(
                match_expressions=(Requirement(key="gen", operator="Gt", values=("4",)),),
                match_fields=(Requirement(key="metadata.name", operator="In", values=("k1",)),),
            ),
        ),
        scheduled=Scheduled(status="False", reason="SlurmJobPending", message="Slurm job 4 is pending"),
    )


def test_the_controlling_owner_whatever_its_kind() -> None:
    owner = OwnerRef(api_version="apps/v1", kind="ReplicaSet", name="rs", uid="r", controller=True)
    owned = SchedulerPod(namespace="ns", name="p", uid="u", owners=(owner,))
    assert edges.pod(owned).owner == Owner(kind="ReplicaSet", name="rs", uid="r", api_version="apps/v1")


def test_a_plain_scheduler_pod() -> None:
    mapped = edges.pod(SchedulerPod(namespace="ns", name="p", uid="u"))
    assert mapped == Pod(namespace="ns", name="p", uid="u", requests={}, phase="Pending")
    assert mapped.owner is None
    assert mapped.scheduled is None
    assert not mapped.gated
    assert not mapped.deleting


def test_a_node_with_its_pods() -> None:
    found = KubeNode(
        name="k1",
        labels={"zone": "a"},
        allocatable={"cpu": 4000, "pods": 110},
        taints=(KubeTaint(key="gpu", value="yes", effect="NoExecute"),),
        unschedulable=True,
    )
    usages = [
        PodUsage(namespace="ns", name="z", phase="Succeeded", requests={"cpu": 1000}),
        PodUsage(namespace="ns", name="a", phase="Running", requests={"cpu": 500, "memory": 10}),
        PodUsage(namespace="ns", name="b", phase="Pending", terminating=True, requests={"cpu": 250}),
        PodUsage(namespace="ns", name="c", phase="Succeeded", requests={"cpu": 1000}),
        PodUsage(namespace="ns", name="d", phase="Failed", requests={"cpu": 1000}),
    ]
    assert edges.node(found, usages) == Node(
        name="k1",
        labels={"zone": "a"},
        allocatable={"cpu": 4000, "pods": 110},
        requested={"cpu": 750, "memory": 10},
        pods=2,
        taints=(Taint(key="gpu", value="yes", effect="NoExecute"),),
        unschedulable=True,
    )
    assert edges.node(KubeNode(name="k2"), []) == Node(name="k2")


def test_from_the_edge_to_a_job_request() -> None:
    found = SchedulerPod(namespace="ns", name="web", uid="u1", requests={"cpu": 4100, "memory": 3 * 1024**2})
    gangs = group([edges.pod(found)], [], {}, {"ns": {}}, Options(release="r1"))
    result = plan(
        gangs["ns/pod/web"], World(bindings={}, nodes={}, fresh=True, now=0.0), Options(release="r1")
    )
    assert len(result.actions) == 1
    submit = result.actions[0]
    assert isinstance(submit, Submit)
    assert (submit.request.cpus_per_node, submit.request.memory_mib_per_node) == (5, 3)
    assert submit.request.notes == ("CPU request 4100m rounded up to 5: Slurm allocates whole CPUs",)
    gated = SchedulerPod(
        namespace="ns", name="web", uid="u1", requests={"cpu": 1000}, scheduling_gates=("g",)
    )
    assert group([edges.pod(gated)], [], {}, {"ns": {}}, Options(release="r1"))["ns/pod/web"].want is None
    member = {
        "namespace": "ns",
        "labels": {"slurm-syncer.dev/group": "g"},
        "annotations": {"slurm-syncer.dev/group-size": "2"},
        "requests": {"cpu": 1000, "memory": 1},
    }
    grouped = SchedulerPod(name="a", uid="ua", **member)  # type: ignore[arg-type]
    gated_peer = SchedulerPod(name="b", uid="ub", scheduling_gates=("g",), **member)  # type: ignore[arg-type]
    want = group([edges.pod(grouped), edges.pod(gated_peer)], [], {}, {"ns": {}}, Options(release="r1"))
    assert isinstance(want["ns/group/g"].want, Waiting)


MARKER = "slurm-syncer.dev/pods release=r1 key=ns/pod/a pods=a:u-a"


def test_a_slurm_job_of_ours() -> None:
    found = SlurmJob(
        job_id=7, state=frozenset({"RUNNING", "CONFIGURING"}), reason="Resources", marker=MARKER,
        nodes=("n1", "n2"), start_time=900, end_time=1100, preempt_time=1000,
    )  # fmt: skip
    assert edges.job(found, "r1") == Job(
        job_id=7,
        state="RUNNING",
        marker=Marker(release="r1", key="ns/pod/a", pods=(("a", "u-a"),)),
        flags=frozenset({"CONFIGURING"}),
        reason="Resources",
        nodes=("n1", "n2"),
        start_time=900.0,
        end_time=1100.0,
        preempt_time=1000.0,
    )
    assert edges.job(found, "r2") is None  # another release's
    assert edges.job(SlurmJob(job_id=8, marker="an admin's note"), "r1") is None


def test_another_releases_live_job_names_that_release() -> None:
    """Two releases serving one scheduler name: the other's live job is its own to judge (plan's `foreign`);
    an ended one, one of ours, or a job without a slurm-syncer marker (Slurm reused the id) is nobody's."""
    running = SlurmJob(job_id=7, state=frozenset({"RUNNING"}), marker=MARKER)
    assert edges.other_release(running, "r2") == "r1"
    assert edges.other_release(running, "r1") == ""  # ours
    pending = SlurmJob(job_id=7, state=frozenset({"PENDING"}), marker=MARKER)
    assert edges.other_release(pending, "r2") == "r1"
    for state in ({"CANCELLED"}, {"COMPLETED"}, {"RUNNING", "COMPLETING"}):
        assert edges.other_release(SlurmJob(job_id=7, state=frozenset(state), marker=MARKER), "r2") == ""
    for text in ("an admin's note", "", "slurm-syncer.dev/pods key=ns/pod/a pods=a:u-a"):
        found = SlurmJob(job_id=7, state=frozenset({"RUNNING"}), marker=text)
        assert edges.other_release(found, "r2") == "", text


def test_a_marker_names_its_pods_whichever_release() -> None:
    text = marker.write(
        "ns/blue:sched", "ns/group/g", [PodRef(namespace="ns", name=n, uid=f"u-{n}") for n in "ab"]
    )
    assert marker.named_uids(text) == frozenset({"u-a", "u-b"})
    assert marker.release_of(text) == "ns/blue:sched"
    assert marker.named_uids("an admin's note") == frozenset()
    assert marker.release_of("an admin's note pods=x:y release=z") == ""
    assert marker.named_uids(f"{marker.PREFIX} release=r key=k pods=") == frozenset()
    assert marker.named_uids(f"{marker.PREFIX} release=r pods=a:,b:u-b,c,d:u:d") == frozenset({"u-b", "u:d"})
    assert marker.named_uids(f"x {marker.PREFIX} pods=a:u-a") == frozenset()


def test_a_job_state_the_core_does_not_know_stops_its_gang() -> None:
    newer = edges.job(SlurmJob(job_id=7, state=frozenset({"RESIZING", "HELD"}), marker=MARKER), "r1")
    assert newer is not None
    assert newer.state == "HELD+RESIZING"
    assert not newer.known
    assert newer.flags == frozenset({"RESIZING", "HELD"})
    none = edges.job(SlurmJob(job_id=7, marker=MARKER), "r1")
    assert none is not None
    assert none.state == "UNKNOWN"
    assert not none.known


def test_a_submission() -> None:
    request = JobRequest(
        key="ns/group/g", name="ns/g", comment="slurm-syncer.dev/pods ...",
        pods=(PodRef(namespace="ns", name="a", uid="1"), PodRef(namespace="ns", name="b", uid="2")),
        nodes=2, cpus_per_node=5, memory_mib_per_node=1024, gres_per_node=(("gpu", 2),),
        settings=Settings(partition="gpu", account="ml", qos="high", time_limit_min=slurmtime.UNLIMITED,
                          nice=10, constraint="a100", reservation="r"),
    )  # fmt: skip
    assert edges.submission(request) == JobSubmission(
        name="ns/g", marker="slurm-syncer.dev/pods ...", nodes=2, tasks_per_node=1, cpus_per_task=5,
        memory_per_node_mb=1024, tres_per_node="gres/gpu:2", partition="gpu", account="ml", qos="high",
        reservation="r", constraints="a100", time_limit_min=0xFFFFFFFF, nice=10,
    )  # fmt: skip
    bare = JobRequest(
        key="k", name="n", comment="c", pods=(), nodes=1, cpus_per_node=1, memory_mib_per_node=1
    )
    assert edges.submission(bare) == JobSubmission(
        name="n", marker="c", nodes=1, tasks_per_node=1, cpus_per_task=1, memory_per_node_mb=1
    )
