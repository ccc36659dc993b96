"""Pods -> gangs (a group label with a size, a batch/v1 Job with parallelism > 1, or a pod alone), the job
request a complete gang makes, each malformed gang refused with its field named, and the job marker that
lets a restarted syncer adopt its jobs by identity."""

from __future__ import annotations

from typing import Any

from syncer.controllers.scheduler import marker
from syncer.controllers.scheduler.gang import Gang, Waiting, group, key_of, want
from syncer.controllers.scheduler.options import Options
from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.settings import Refusal, Settings
from syncer.controllers.scheduler.values import Container, Job, Marker, Owner, Pod, PodRef
from syncer.model.keys import Keys
from syncer.model.kube import KubeJob

OPTIONS = Options(release="r1")
NS: dict[str, dict[str, str]] = {"ns": {}}
REQ = (Container(requests={"cpu": "2", "memory": "1Gi"}),)
ONE_OF_TWO = (
    "1 of the 2 pods of group g are here; its Slurm job is submitted when all are (pods of namespace ns only)"
)


def pod(name: str, uid: str = "", *, group_: str | None = None, size: str | None = "2", **more: Any) -> Pod:
    labels = {Keys.GROUP_LABEL: group_} if group_ is not None else {}
    annotations = {Keys.GROUP_SIZE: size} if group_ is not None and size is not None else {}
    annotations.update(more.pop("annotations", {}))
    values: dict[str, Any] = {"containers": REQ, "namespace": "ns", **more}
    return Pod(name=name, uid=uid or f"u-{name}", labels=labels, annotations=annotations, **values)


def job(job_id: int, key: str, *uids: str, state: str = "PENDING") -> Job:
    return Job(
        job_id=job_id, state=state, marker=Marker(release="r1", key=key, pods=tuple((u, u) for u in uids))
    )


def test_marker_round_trip() -> None:
    refs = [PodRef(namespace="ns", name="b", uid="2"), PodRef(namespace="ns", name="a", uid="1")]
    text = marker.write("r1", "ns/group/g", refs)
    assert text == "slurm-syncer.dev/pods release=r1 key=ns/group/g pods=a:1,b:2"
    assert marker.read(text, "r1") == Marker(release="r1", key="ns/group/g", pods=(("a", "1"), ("b", "2")))
    assert marker.read(text, "r1").uids == frozenset({"1", "2"})  # type: ignore[union-attr]


def test_marker_fields_split_at_their_first_separator() -> None:
    text = "slurm-syncer.dev/pods release=r1 key=k=1 pods=a:1:2"
    assert marker.read(text, "r1") == Marker(release="r1", key="k=1", pods=(("a", "1:2"),))


def test_marker_of_another_release_or_malformed_is_not_ours() -> None:
    good = "slurm-syncer.dev/pods release=r1 key=k pods=a:1"
    assert marker.read(good, "r1") is not None
    assert marker.read(good, "r2") is None
    assert marker.read("", "r1") is None
    assert marker.read("an admin's note", "r1") is None
    assert marker.read("slurm-syncer.dev/podsX release=r1 key=k pods=a:1", "r1") is None
    assert marker.read("slurm-syncer.dev/pods release=r1 pods=a:1", "r1") is None
    assert marker.read("slurm-syncer.dev/pods release=r1 key= pods=a:1", "r1") is None
    assert marker.read("slurm-syncer.dev/pods release=r1 key=k", "r1") is None
    assert marker.read("slurm-syncer.dev/pods release=r1 key=k pods=a", "r1") is None
    assert marker.read("slurm-syncer.dev/pods release=r1 key=k pods=:1", "r1") is None
    assert marker.read("slurm-syncer.dev/pods release=r1 key=k pods=a:1,", "r1") is None


def test_keys() -> None:
    jobs = {
        "j1": KubeJob(namespace="ns", name="train", uid="j1", parallelism=4),
        "j2": KubeJob(namespace="ns", name="one", uid="j2", parallelism=1),
    }
    assert key_of(pod("a"), jobs) == "ns/pod/a"
    assert key_of(pod("a", group_="g"), jobs) == "ns/group/g"
    assert key_of(pod("a", owner=Owner(kind="Job", name="train", uid="j1")), jobs) == "ns/job/j1"
    assert key_of(pod("a", owner=Owner(kind="Job", name="new", uid="j9")), jobs) == "ns/job/j9"  # unknown yet
    assert key_of(pod("a", owner=Owner(kind="Job", name="one", uid="j2")), jobs) == "ns/pod/a"
    assert key_of(pod("a", owner=Owner(kind="ReplicaSet", name="rs", uid="j1")), jobs) == "ns/pod/a"
    assert (
        key_of(pod("a", owner=Owner(kind="Job", name="x", uid="j1", api_version="other/v1")), jobs)
        == "ns/pod/a"
    )
    # the label wins over the Job
    assert key_of(pod("a", group_="g", owner=Owner(kind="Job", name="train", uid="j1")), jobs) == "ns/group/g"


def test_single_pod_request() -> None:
    gangs = group([pod("web", annotations={Keys.JOB_TIME_LIMIT: "10"})], [], {}, NS, OPTIONS)
    assert gangs == {
        "ns/pod/web": Gang(
            key="ns/pod/web",
            pods=(gangs["ns/pod/web"].pods[0],),
            jobs=(),
            want=JobRequest(
                key="ns/pod/web",
                name="ns/web",
                comment="slurm-syncer.dev/pods release=r1 key=ns/pod/web pods=web:u-web",
                pods=(PodRef(namespace="ns", name="web", uid="u-web"),),
                nodes=1,
                cpus_per_node=2,
                memory_mib_per_node=1024,
                settings=Settings(time_limit_min=10),
            ),
        )
    }
    assert gangs["ns/pod/web"].namespace == "ns"


def test_group_request_once_complete() -> None:
    one = group([pod("a", group_="g")], [], {}, NS, OPTIONS)["ns/group/g"]
    assert one.want == Waiting(message=ONE_OF_TWO)
    two = group([pod("b", group_="g"), pod("a", group_="g")], [], {}, NS, OPTIONS)["ns/group/g"]
    assert [p.name for p in two.pods] == ["a", "b"]
    assert isinstance(two.want, JobRequest)
    assert two.want.nodes == 2
    assert two.want.name == "ns/g"
    assert two.want.pods == (
        PodRef(namespace="ns", name="a", uid="u-a"),
        PodRef(namespace="ns", name="b", uid="u-b"),
    )
    assert two.want.comment == "slurm-syncer.dev/pods release=r1 key=ns/group/g pods=a:u-a,b:u-b"


def test_cpu_note_travels_with_the_request() -> None:
    odd = (Container(requests={"cpu": "1100m", "memory": "1Gi"}),)
    request = group([pod("a", containers=odd)], [], {}, NS, OPTIONS)["ns/pod/a"].want
    assert isinstance(request, JobRequest)
    assert request.cpus_per_node == 2
    assert request.notes == ("CPU request 1100m rounded up to 2: Slurm allocates whole CPUs",)


def test_ended_bound_and_claimed_pods_do_not_wait() -> None:
    pods = [
        pod("a", group_="g"),
        pod("b", group_="g", phase="Failed"),
        pod("c", group_="g", deleting=True),
        pod("d", group_="g", node_name="n1"),
    ]
    assert want("ns/group/g", pods, {}, NS, OPTIONS) == Waiting(message=ONE_OF_TWO)
    assert want("ns/group/g", [pods[1]], {}, NS, OPTIONS) is None
    # a pod a live job stands for is not waiting for another
    gangs = group(
        [pod("a", group_="g"), pod("b", group_="g")], [job(7, "ns/group/g", "u-a")], {}, NS, OPTIONS
    )
    assert gangs["ns/group/g"].want == Waiting(message=ONE_OF_TWO)
    # an unbound pod's job-id annotation (a copy's: kubectl debug --copy-to) binds it to no job: it waits
    copied = pod("b", group_="g", annotations={Keys.SCHEDULER_JOB_ID: "7"})
    gangs = group([pod("a", group_="g"), copied], [job(7, "ns/group/x", "u-z")], {}, NS, OPTIONS)
    assert isinstance(gangs["ns/group/g"].want, JobRequest)
    assert gangs["ns/group/g"].want.pods == (pod("a").ref, copied.ref)
    # an ended job's pods wait again
    cancelled = job(7, "ns/group/g", "u-a", state="CANCELLED")
    gangs = group([pod("a", group_="g"), pod("b", group_="g")], [cancelled], {}, NS, OPTIONS)
    assert isinstance(gangs["ns/group/g"].want, JobRequest)


def test_a_pod_follows_the_job_that_names_it() -> None:
    relabelled = pod("a", group_="other")
    gangs = group([relabelled], [job(5, "ns/group/g", "u-a")], {}, NS, OPTIONS)
    assert list(gangs) == ["ns/group/g"]
    assert gangs["ns/group/g"].pods == (relabelled,)
    assert gangs["ns/group/g"].jobs == (job(5, "ns/group/g", "u-a"),)
    assert gangs["ns/group/g"].want is None
    # the job it is bound to first, then the oldest job naming it
    bound = pod("a", node_name="k1", annotations={Keys.SCHEDULER_JOB_ID: "9"})
    jobs = [job(9, "ns/pod/x", "u-a", state="RUNNING"), job(5, "ns/pod/y", "u-a")]
    assert group([bound], jobs, {}, NS, OPTIONS)["ns/pod/x"].pods == (bound,)
    assert group([pod("a")], jobs, {}, NS, OPTIONS)["ns/pod/y"].pods == (pod("a"),)
    assert group([pod("a")], jobs, {}, NS, OPTIONS)["ns/pod/x"].pods == ()
    # a pod without the annotation does not follow a job that does not name it
    assert list(group([pod("b")], [job(1, "ns/pod/x", "u-a")], {}, NS, OPTIONS)) == ["ns/pod/b", "ns/pod/x"]
    # an unknown job id on the pod: by its labels
    stray = pod("a", annotations={Keys.SCHEDULER_JOB_ID: "3"})
    assert list(group([stray], [], {}, NS, OPTIONS)) == ["ns/pod/a"]


def test_jobs_without_pods_are_gangs_too() -> None:
    gangs = group([], [job(2, "ns/pod/gone", "u-x"), job(1, "ns/pod/gone", "u-y")], {}, NS, OPTIONS)
    assert [j.job_id for j in gangs["ns/pod/gone"].jobs] == [1, 2]
    assert gangs["ns/pod/gone"].want is None


def test_group_size_refusals() -> None:
    size_field = "metadata.annotations[slurm-syncer.dev/group-size]"
    assert want(
        "ns/group/g", [pod("a", group_="g", size="2"), pod("b", group_="g", size="3")], {}, NS, OPTIONS
    ) == (Refusal(field=size_field, message="the pods of group g disagree ('2', '3'); give them one size"))
    assert want("ns/group/g", [pod("a", group_="g", size=None)], {}, NS, OPTIONS) == Refusal(
        field=size_field,
        message="'' is not a group size (a whole number of pods, 1 to 100000, one per Slurm node); set it on "
        "every pod of group g",
    )
    for bad in ("0", "x", "100001", "-1", "\uff12"):
        refused = want("ns/group/g", [pod("a", group_="g", size=bad)], {}, NS, OPTIONS)
        assert isinstance(refused, Refusal), bad
        assert refused.field == size_field
    assert isinstance(want("ns/group/g", [pod("a", group_="g", size="1")], {}, NS, OPTIONS), JobRequest)
    assert isinstance(want("ns/group/g", [pod("a", group_="g", size="100000")], {}, NS, OPTIONS), Waiting)
    assert want("ns/group/", [pod("a", group_="")], {}, NS, OPTIONS) == Refusal(
        field="metadata.labels[slurm-syncer.dev/group]", message="empty: name the group, or remove the label"
    )


def test_more_pods_than_the_size() -> None:
    pods = [pod(n, group_="g") for n in "abc"]
    assert want("ns/group/g", pods, {}, NS, OPTIONS) == Refusal(
        field="metadata.labels[slurm-syncer.dev/group]",
        message="3 pods wait in group g, more than its size 2; delete the extra pods or raise the size",
    )


def test_batch_job_gangs() -> None:
    owner = Owner(kind="Job", name="train", uid="j1")
    pods = [pod(n, owner=owner) for n in ("train-x", "train-y")]
    jobs = {"j1": KubeJob(namespace="ns", name="train", uid="j1", parallelism=2)}
    request = group(pods, [], jobs, NS, OPTIONS)["ns/job/j1"].want
    assert isinstance(request, JobRequest)
    assert request.name == "ns/train"
    assert request.nodes == 2
    assert want("ns/job/j9", pods, {}, NS, OPTIONS) == Waiting(message="Job train is not known yet")
    assert want("ns/job/j9", [pod("x")], {}, NS, OPTIONS) == Waiting(message="Job j9 is not known yet")
    three = {"j1": KubeJob(namespace="ns", name="train", uid="j1", parallelism=3)}
    assert want("ns/job/j1", pods, three, NS, OPTIONS) == Waiting(
        message="2 of the 3 pods of Job train are here; its Slurm job is submitted when all are (pods of "
        "namespace ns only)"
    )
    one = {"j1": KubeJob(namespace="ns", name="train", uid="j1", parallelism=1)}
    assert want("ns/job/j1", pods, one, NS, OPTIONS) == Refusal(
        field="metadata.ownerReferences",
        message="2 pods wait in Job train, more than its size 1; delete the extra pods or raise the size",
    )
    waves = {"j1": KubeJob(namespace="ns", name="train", uid="j1", parallelism=2, completions=6)}
    assert want("ns/job/j1", pods, waves, NS, OPTIONS) == Refusal(
        field="spec.completions",
        object="Job ns/train",
        message="6 with parallelism 2: a gang runs all its pods at once and ends together; set completions "
        "to parallelism or leave it unset",
    )
    same = {"j1": KubeJob(namespace="ns", name="train", uid="j1", parallelism=2, completions=2)}
    assert isinstance(want("ns/job/j1", pods, same, NS, OPTIONS), JobRequest)


def test_namespace_must_be_known_and_shared() -> None:
    assert want("ns/pod/a", [pod("a")], {}, {}, OPTIONS) == Waiting(message="namespace ns is not known yet")
    stranger = pod("b", group_="g", namespace="other")
    assert want("ns/group/g", [pod("a", group_="g"), stranger], {}, NS, OPTIONS) == Refusal(
        field="metadata.namespace", object="Pod other/b", message="a gang's pods share one namespace: ns"
    )


def test_mixed_requests_are_refused_naming_the_field() -> None:
    big = (Container(requests={"cpu": "4", "memory": "1Gi"}),)
    assert want(
        "ns/group/g", [pod("a", group_="g"), pod("b", group_="g", containers=big)], {}, NS, OPTIONS
    ) == (
        Refusal(
            field="spec.containers[*].resources.requests[cpu]",
            object="Pod ns/b",
            message="4 CPUs here, 2 CPUs on pod a: a gang's pods ask the same of every node (one Slurm job)",
        )
    )
    more = (Container(requests={"cpu": "2", "memory": "2Gi"}),)
    refused = want(
        "ns/group/g", [pod("a", group_="g"), pod("b", group_="g", containers=more)], {}, NS, OPTIONS
    )
    assert isinstance(refused, Refusal)
    assert refused.field == "spec.containers[*].resources.requests[memory]"
    assert refused.message.startswith("2048 MiB here, 1024 MiB on pod a: ")
    gpu = (Container(requests={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}),)
    refused = want(
        "ns/group/g", [pod("a", group_="g"), pod("b", group_="g", containers=gpu)], {}, NS, OPTIONS
    )
    assert isinstance(refused, Refusal)
    assert refused.field == "spec.containers[*].resources.requests"
    assert refused.message.startswith("GRES gpu:1 here, GRES none on pod a: ")
    # Slurm's asks equal: 1500m and 2 CPUs are both 2 CPUs
    close = (Container(requests={"cpu": "1500m", "memory": "1Gi"}),)
    assert isinstance(
        want("ns/group/g", [pod("a", group_="g"), pod("b", group_="g", containers=close)], {}, NS, OPTIONS),
        JobRequest,
    )


def test_mixed_gres_lists_every_name() -> None:
    table = {"nvidia.com/gpu": "gpu", "x.io/shard": "shard"}
    two = (Container(requests={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1", "x.io/shard": "2"}),)
    refused = want("ns/group/g", [pod("a", group_="g"), pod("b", group_="g", containers=two)], {}, NS,
                   Options(release="r1", gres=table))  # fmt: skip
    assert isinstance(refused, Refusal)
    assert refused.message.startswith("GRES gpu:1,shard:2 here, GRES none on pod a: ")


def test_the_options_reach_the_request() -> None:
    fpga = (Container(requests={"cpu": "2", "memory": "1Gi", "x.io/fpga": "1"}),)
    options = Options(release="r1", gres={"x.io/fpga": "fpga"}, pod_overrides=frozenset({"partition"}))
    request = want(
        "ns/pod/a", [pod("a", containers=fpga, annotations={Keys.JOB_PARTITION: "p"})], {}, NS, options
    )
    assert isinstance(request, JobRequest)
    assert request.gres_per_node == (("fpga", 1),)
    assert request.settings == Settings(partition="p")


def test_a_key_names_what_follows_its_second_slash() -> None:
    request = want("ns/pod/a/b", [pod("a")], {}, NS, OPTIONS)
    assert isinstance(request, JobRequest)
    assert request.name == "ns/a/b"


def test_mixed_settings_are_refused_naming_the_annotation() -> None:
    limit = {Keys.JOB_TIME_LIMIT: "10"}
    refused = want(
        "ns/group/g", [pod("a", group_="g"), pod("b", group_="g", annotations=limit)], {}, NS, OPTIONS
    )
    assert refused == Refusal(
        field="metadata.annotations[slurm-syncer.dev/time-limit]",
        object="Pod ns/b",
        message="time-limit 10 here, time-limit None on pod a: a gang's pods ask the same of every node (one "
        "Slurm job)",
    )


def test_a_member_refusal_names_the_pod() -> None:
    none = (Container(requests={"memory": "1Gi"}),)
    refused = want(
        "ns/group/g", [pod("a", group_="g"), pod("b", group_="g", containers=none)], {}, NS, OPTIONS
    )
    assert isinstance(refused, Refusal)
    assert refused.object == "Pod ns/b"
    assert refused.field == "spec.containers[0].resources.requests[cpu]"
    bad = {Keys.JOB_TIME_LIMIT: "soon"}
    refused = want(
        "ns/group/g", [pod("a", group_="g"), pod("b", group_="g", annotations=bad)], {}, NS, OPTIONS
    )
    assert isinstance(refused, Refusal)
    assert refused.object == "Pod ns/b"
    assert refused.field == "metadata.annotations[slurm-syncer.dev/time-limit]"
    # alone, the pod is the object itself
    refused = want("ns/pod/b", [pod("b", annotations=bad)], {}, NS, OPTIONS)
    assert isinstance(refused, Refusal)
    assert refused.object == ""
    # a Namespace's bad default names the Namespace
    refused = want("ns/group/g", [pod("a", group_="g"), pod("b", group_="g")], {}, {"ns": bad}, OPTIONS)
    assert isinstance(refused, Refusal)
    assert refused.object == "Namespace ns"
