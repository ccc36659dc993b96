"""The scheduler's plan, rule by rule (docs/scheduler.md, "States -> actions"): each test one rule, with
plain values; tests/unit/test_scheduler_plan_properties.py holds the invariants over generated states."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from syncer.controllers.scheduler.gang import group
from syncer.controllers.scheduler.options import Options
from syncer.controllers.scheduler.plan import (
    PENDING,
    PLACEMENT_FAILED,
    REFUSED,
    STALE,
    STARTING,
    WAITING,
    Bind,
    Cancel,
    DeletePod,
    Hold,
    Plan,
    Release,
    SetScheduled,
    Submit,
    plan,
)
from syncer.controllers.scheduler.request import NO_CPU, JobRequest
from syncer.controllers.scheduler.values import (
    Container,
    Job,
    Marker,
    Node,
    Pod,
    PodRef,
    Scheduled,
    Taint,
    World,
)
from syncer.model.keys import Keys

OPTIONS = Options(release="r1")
REQ = (Container(requests={"cpu": "1", "memory": "1Gi"}),)
ROOM = {"cpu": 4000, "memory": 8 * 1024**3, "pods": 110}
NODES = {name: Node(name=name, allocatable=ROOM) for name in ("k1", "k2", "k3")}
WORLD = World(bindings={"n1": "k1", "n2": "k2", "n3": "k3"}, nodes=NODES, fresh=True, now=1000.0)


def pod(name: str = "a", **more: Any) -> Pod:
    job_id = more.pop("job_id", None)
    annotations = dict(more.pop("annotations", {}))
    if job_id is not None:
        annotations[Keys.SCHEDULER_JOB_ID] = str(job_id)
    group_ = more.pop("group_", None)
    labels = {Keys.GROUP_LABEL: group_} if group_ else {}
    if group_:
        annotations[Keys.GROUP_SIZE] = str(more.pop("size", 2))
    values: dict[str, Any] = {"namespace": "ns", "containers": REQ, **more}
    return Pod(name=name, uid=f"u-{name}", labels=labels, annotations=annotations, **values)


def job(job_id: int, *names: str, state: str = "RUNNING", key: str = "", **more: Any) -> Job:
    key = key or f"ns/pod/{names[0]}"
    marker = Marker(release="r1", key=key, pods=tuple((n, f"u-{n}") for n in names))
    return Job(job_id=job_id, state=state, marker=marker, **more)


def run(
    pods: list[Pod], jobs: Sequence[Job] = (), *, world: World = WORLD, key: str = "", **more: Any
) -> Plan:
    gangs = group(pods, jobs, {}, {"ns": {}}, OPTIONS)
    key = key or next(iter(gangs))
    return plan(gangs[key], world, OPTIONS, **more)


GANG = [pod("a", group_="g"), pod("b", group_="g")]


def ref(name: str = "a") -> PodRef:
    return PodRef(namespace="ns", name=name, uid=f"u-{name}")


def at(now: float) -> World:
    return World(bindings=WORLD.bindings, nodes=WORLD.nodes, fresh=True, now=now)


# --- fail closed


def test_stale_data_means_no_action_at_all() -> None:
    stale = World(bindings=WORLD.bindings, nodes=NODES, fresh=False, now=1000.0)
    ended = job(5, "a", state="CANCELLED")
    result = run([pod(node_name="k1", job_id=5)], [ended], world=stale, held=frozenset({"n9"}))
    assert result == Plan(blocked=STALE)
    assert (
        STALE
        == "data is stale or missing: nothing is submitted, bound, cancelled or deleted until it is fresh"
    )


def test_an_unknown_job_state_stops_the_gang() -> None:
    result = run([pod(node_name="k1", job_id=5)], [job(5, "a", state="RESIZING"), job(6, "a", state="WEIRD")])
    assert result == Plan(blocked="Slurm job 5 is RESIZING, a state the scheduler does not know")


# --- submit, pending, adopt


def test_a_new_pod_is_submitted() -> None:
    result = run([pod()])
    assert len(result.actions) == 1
    submit = result.actions[0]
    assert isinstance(submit, Submit)
    assert submit.request.pods == (ref(),)
    assert result.blocked == ""
    assert result.recheck_at is None


def test_no_second_submit_before_the_cache_shows_the_first() -> None:
    result = run([pod()], submitted=77)
    assert result == Plan(blocked="waiting for Slurm job 77 to show in the job cache")


def test_an_existing_job_is_adopted_not_submitted_again() -> None:
    result = run([pod()], [job(5, "a", state="PENDING", reason="Priority")])
    assert result.actions == (
        SetScheduled(pod=ref(), reason=PENDING, message="Slurm job 5 is pending (Priority)"),
    )


def test_pending_reason_is_written_only_when_it_changes() -> None:
    said = Scheduled(status="False", reason=PENDING, message="Slurm job 5 is pending (Resources)")
    assert run([pod(scheduled=said)], [job(5, "a", state="PENDING", reason="Resources")]).actions == ()
    changed = run([pod(scheduled=said)], [job(5, "a", state="PENDING", reason="Priority")])
    assert changed.actions == (
        SetScheduled(pod=ref(), reason=PENDING, message="Slurm job 5 is pending (Priority)"),
    )
    for none in ("None", ""):
        result = run([pod()], [job(5, "a", state="PENDING", reason=none)])
        assert result.actions == (SetScheduled(pod=ref(), reason=PENDING, message="Slurm job 5 is pending"),)


def test_refused_and_waiting_pods_are_told_once() -> None:
    no_cpu = (Container(requests={"memory": "1Gi"}),)
    result = run([pod(containers=no_cpu)])
    text = f"spec.containers[0].resources.requests[cpu]: {NO_CPU}"
    assert result.actions == (SetScheduled(pod=ref(), reason=REFUSED, message=text),)
    told = Scheduled(status="False", reason=REFUSED, message=text)
    assert run([pod(containers=no_cpu, scheduled=told)]).actions == ()
    waiting = run([pod(group_="g")])
    message = (
        "1 of the 2 pods of group g are here; its Slurm job is submitted when all are (pods of namespace ns"
    )
    message += " only)"
    assert waiting.actions == (SetScheduled(pod=ref(), reason=WAITING, message=message),)
    # ended or bound pods are not told
    assert run([pod(group_="g", phase="Failed")]).actions == ()


# --- bind


def test_bind_where_slurm_allocated() -> None:
    result = run([pod()], [job(5, "a", nodes=("n2",))])
    assert result.actions == (Bind(pod=ref(), node="k2", job_id=5, slurm_node="n2"),)


def test_a_gang_is_bound_together() -> None:
    pods = [pod("b", group_="g"), pod("a", group_="g")]
    result = run(pods, [job(5, "a", "b", key="ns/group/g", nodes=("n3", "n1"))])
    assert result.actions == (
        Bind(pod=ref("a"), node="k1", job_id=5, slurm_node="n1"),
        Bind(pod=ref("b"), node="k3", job_id=5, slurm_node="n3"),
    )


def test_two_pods_sent_to_one_node_are_counted_together() -> None:
    small = {"k1": Node(name="k1", allocatable={**ROOM, "cpu": 1500})}
    one = World(bindings={"n1": "k1", "n2": "k1"}, nodes=small, fresh=True, now=1000.0)
    result = run(GANG, [job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"))], world=one)
    assert not any(isinstance(action, Bind) for action in result.actions)
    why = "(Node k1 (Slurm node n2): Insufficient cpu)"
    message = f"Slurm job 5 cannot run where Slurm placed it: cancelled {why}"
    assert Cancel(job_id=5, cause="placement", message=message) in result.actions


def test_a_starting_job_waits_for_its_nodes() -> None:
    result = run([pod()], [job(5, "a", nodes=("n1", "n2"), flags=frozenset({"CONFIGURING"}))])
    assert result.actions == (
        SetScheduled(pod=ref(), reason=STARTING, message="Slurm job 5 is starting on n1,n2"),
    )


def test_an_unplaceable_pod_cancels_its_job_and_says_why() -> None:
    tainted = dict(NODES, k1=Node(name="k1", allocatable=ROOM, taints=(Taint(key="gpu", value="x"),)))
    world = World(bindings=WORLD.bindings, nodes=tainted, fresh=True, now=1000.0)
    result = run(GANG, [job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"))], world=world)
    why = "Node k1 (Slurm node n1): node(s) had untolerated taint {gpu: x}"
    message = f"Slurm job 5 cannot run here: {why}; the job is cancelled and submitted again after 60 s"
    assert result.actions == (
        SetScheduled(pod=ref("a"), reason=PLACEMENT_FAILED, message=message),
        SetScheduled(pod=ref("b"), reason=PLACEMENT_FAILED, message=message),
        Cancel(
            job_id=5,
            cause="placement",
            message=f"Slurm job 5 cannot run where Slurm placed it: cancelled ({why})",
        ),
    )


def test_placement_failures_named() -> None:
    def why(world: World, nodes: tuple[str, ...]) -> str:
        cancel = run([pod()], [job(5, "a", nodes=nodes)], world=world).actions[-1]
        assert isinstance(cancel, Cancel)
        return cancel.message.removeprefix("Slurm job 5 cannot run where Slurm placed it: cancelled (")[:-1]

    assert why(WORLD, ("n9",)) == "Slurm node n9 is not bound to a Kubernetes Node"
    assert why(WORLD, ("n1", "n2")) == "Slurm allocated 2 node(s) for 1 pod(s)"
    assert why(WORLD, ()) == "Slurm allocated 0 node(s) for 1 pod(s)"
    missing = World(bindings=WORLD.bindings, nodes={}, fresh=True, now=1000.0)
    assert why(missing, ("n1",)) == "Kubernetes Node k1 (Slurm node n1) does not exist"
    cordon = {"k1": Node(name="k1", allocatable=ROOM, unschedulable=True)}
    cordoned = World(bindings=WORLD.bindings, nodes=cordon, fresh=True, now=1000.0)
    assert why(cordoned, ("n1",)) == "Node k1 (Slurm node n1): node(s) were unschedulable"


def test_a_released_pod_is_submitted_again_after_the_retry_delay() -> None:
    failed = Scheduled(status="False", reason=PLACEMENT_FAILED, message="Slurm job 5 cannot run here: x; y")
    cancelled = job(5, "a", state="CANCELLED", end_time=990.0)
    waiting = run([pod(scheduled=failed)], [cancelled])
    assert waiting == Plan(recheck_at=1050.0)
    later = run([pod(scheduled=failed)], [cancelled], world=at(1050.0))
    assert [type(action) for action in later.actions] == [Submit]
    # its job gone from Slurm's list (MinJobAge): submitted again at once
    assert [type(action) for action in run([pod(scheduled=failed)]).actions] == [Submit]


def test_a_job_we_cancelled_for_placement_is_retried_before_its_pods_show_why() -> None:
    # the job cache shows our cancel before the pod cache shows our condition: not a cancel from Slurm
    stale = Scheduled(status="False", reason=PENDING, message="Slurm job 5 is pending")
    failed = Scheduled(status="False", reason=PLACEMENT_FAILED, message="Slurm job 5 cannot run here: x; y")
    pods = [pod("a", group_="g", scheduled=failed), pod("b", group_="g", scheduled=stale)]
    cancelled = job(5, "a", "b", key="ns/group/g", state="CANCELLED", end_time=990.0)
    assert [type(a) for a in run(pods, [cancelled]).actions] == [DeletePod]  # without the memory
    assert run(pods, [cancelled], unplaced=frozenset({5})) == Plan(recheck_at=1050.0)
    later = run(pods, [cancelled], world=at(1050.0), unplaced=frozenset({5}))
    assert [type(action) for action in later.actions] == [Submit]
    # only the pod's last job counts: one Slurm cancelled after ours still deletes it
    said = Scheduled(status="False", reason=PENDING, message="Slurm job 6 is pending")
    pending = [pod("a", group_="g", scheduled=said), pod("b", group_="g", scheduled=said)]
    again = job(6, "a", "b", key="ns/group/g", state="CANCELLED", end_time=995.0)
    result = run(pending, [cancelled, again], unplaced=frozenset({5}))
    assert [(a.pod.name, a.job_id) for a in result.actions if isinstance(a, DeletePod)] == [
        ("a", 6),
        ("b", 6),
    ]
    assert [type(a) for a in run(pods, [cancelled], unplaced=frozenset({4})).actions] == [DeletePod]


def test_a_job_we_cancelled_is_neither_bound_nor_torn_down_while_the_cache_shows_it_live() -> None:
    # CI (26.05): job 5 cancelled for placement (a taint), the taint removed at once, and the next plan read
    # the job cache's copy from before the cancel: it bound pod a for job 5, then saw 5 cancelled, took that
    # for Slurm's cancel and deleted the pod (the gang never ran)
    failed = Scheduled(status="False", reason=PLACEMENT_FAILED, message="Slurm job 5 cannot run here: x; y")
    pods = [pod("a", group_="g", scheduled=failed), pod("b", group_="g", scheduled=failed)]
    stale = job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"))  # as read before our cancel
    assert [type(a) for a in run(pods, [stale]).actions] == [Bind, Bind]  # without the memory
    waiting = "Slurm job 5 was cancelled by the scheduler: its end is awaited"
    assert run(pods, [stale], cancelled=frozenset({5}), unplaced=frozenset({5})) == Plan(blocked=waiting)
    # pods bound under it, the job shown preempted: no deletion and no second cancel; their nodes held (a hold
    # only keeps Slurm off a node where a pod runs)
    bound = [pod("a", group_="g", node_name="k1", job_id=5), pod("b", group_="g", node_name="k2", job_id=5)]
    ending = job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"), preempt_time=990.0, end_time=1020.0)
    assert DeletePod in {type(a) for a in run(bound, [ending]).actions}  # without the memory
    result = run(bound, [ending], cancelled=frozenset({5}))
    assert {type(a) for a in result.actions} == {Hold} and result.blocked == waiting
    gone = job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"))
    assert run([], [gone], key="ns/group/g", cancelled=frozenset({5})) == Plan(blocked=waiting)
    # once the cache shows it ended: the gang is submitted again after the retry delay, as a new job
    ended = job(5, "a", "b", key="ns/group/g", state="CANCELLED", end_time=990.0)
    assert run(pods, [ended], cancelled=frozenset({5}), unplaced=frozenset({5})) == Plan(recheck_at=1050.0)
    later = run(pods, [ended], world=at(1050.0), cancelled=frozenset({5}))
    assert [type(action) for action in later.actions] == [Submit]


def test_a_job_we_cancelled_gives_way_to_any_other() -> None:
    # job 5 (running: it would rank first) is ours to end: job 6 stands for pod a, not a duplicate of 5
    jobs = [job(5, "a", nodes=("n1",)), job(6, "a", state="PENDING", reason="Priority")]
    said = "Slurm job 6 duplicates Slurm job 5 for pods both name: cancelled"
    duplicate = Cancel(job_id=6, cause="duplicate", message=said)
    assert duplicate in run([pod()], jobs).actions  # without the memory
    result = run([pod()], jobs, cancelled=frozenset({5}))
    pending = SetScheduled(pod=ref(), reason=PENDING, message="Slurm job 6 is pending (Priority)")
    assert result.actions == (pending,)
    # a job we cancelled standing for a pod alone keeps it: no second job meanwhile
    unplaceable = [job(5, "a", nodes=("n9",))]
    assert isinstance(run([pod()], unplaceable, cancelled=frozenset({6})).actions[-1], Cancel)
    assert run([pod()], unplaceable, cancelled=frozenset({5})).actions == ()


def made(name: str, node: str, job_id: int = 5, slurm_node: str = "n1") -> Bind:
    """A bind the controller made that the pod cache does not show yet."""
    return Bind(pod=ref(name), node=node, job_id=job_id, slurm_node=slurm_node)


def test_a_pod_we_bound_is_planned_as_bound_while_the_pod_cache_shows_it_unbound() -> None:
    """Our own bind is a bind: the gang bound, a Node turned unfit before the pod cache showed the binds. Not
    cancelled for placement (the pods would then be deleted as if Slurm had cancelled their job)."""
    tainted = dict(NODES, k2=Node(name="k2", allocatable=ROOM, taints=(Taint(key="x"),)))
    world = World(bindings=WORLD.bindings, nodes=tainted, fresh=True, now=1000.0)
    running = [job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"))]
    lagging = run(GANG, running, world=world)  # without the memory
    assert [type(a) for a in lagging.actions] == [SetScheduled, SetScheduled, Cancel]
    binds = frozenset({made("a", "k1"), made("b", "k2", slurm_node="n2")})
    assert run(GANG, running, world=world, bound=binds) == Plan()
    # ... nor bound again where the Node still fits
    assert [type(a) for a in run(GANG, running).actions] == [Bind, Bind]
    assert run(GANG, running, bound=binds) == Plan()
    # one bound, the other's Node unfit: the gang goes whole, the pod we bound too (partly bound)
    partly = run(GANG, running, world=world, bound=frozenset({made("a", "k1")}))
    assert [(type(a), a.pod.name) for a in partly.actions if isinstance(a, DeletePod)] == [
        (DeletePod, "a"),
        (DeletePod, "b"),
    ]
    assert not any(isinstance(a, Cancel | SetScheduled) for a in partly.actions)
    # one bound, the other fits: only the other is bound
    rest = run(GANG, running, bound=frozenset({made("a", "k1")}))
    assert rest.actions == (Bind(pod=ref("b"), node="k2", job_id=5, slurm_node="n2"),)


def test_a_pod_we_bound_gets_no_condition_of_an_unbound_pod() -> None:
    """Our own bind is a bind: a pod whose job Slurm shows pending again (requeued) is deleted and its node
    held, not told that its job is pending."""
    requeued = [job(5, "a", state="PENDING", nodes=("n1",))]
    told = run([pod()], requeued)  # without the memory
    assert told.actions == (SetScheduled(pod=ref(), reason=PENDING, message="Slurm job 5 is pending"),)
    result = run([pod()], requeued, bound=frozenset({made("a", "k1")}))
    assert [type(a) for a in result.actions] == [Hold, DeletePod]


def test_a_pod_we_bound_whose_job_ended_is_deleted_and_its_node_held() -> None:
    """Our own bind is a bind: Slurm ends the job before the pod cache shows the bind; the pod is deleted with
    the job's cause and its node held until it is gone (a pod shown unbound would hold no node)."""
    ended = [job(5, "a", state="CANCELLED", nodes=("n1",))]
    assert [type(a) for a in run([pod()], ended).actions] == [DeletePod]  # without the memory: no hold
    result = run([pod()], ended, bound=frozenset({made("a", "k1")}))
    assert result.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 was cancelled in Slurm"),
        DeletePod(pod=ref(), grace_s=30, cause="cancelled", job_id=5,
                  message="Slurm job 5 was cancelled in Slurm: pod deleted (grace period 30 s)"),
    )  # fmt: skip


def test_a_pod_we_bound_runs_under_the_job_we_bound_it_for() -> None:
    """Our own bind names its job (the Binding's annotation): of two jobs naming the pod, the one we bound it
    for stands and the other gives way, though it is older."""
    jobs = [job(5, "a", nodes=("n1",)), job(6, "a", nodes=("n2",))]
    result = run([pod()], jobs, bound=frozenset({made("a", "k2", job_id=6, slurm_node="n2")}))
    said = "Slurm job 5 gives way to Slurm job 6, which pod ns/a runs under: cancelled"
    assert result.actions == (Cancel(job_id=5, cause="duplicate", message=said),)


def test_the_pod_caches_bind_wins_over_ours() -> None:
    """A pod the pod cache shows bound is planned where it shows it, whatever the controller remembers."""
    shown = [pod(node_name="k1", job_id=5)]
    running = [job(5, "a", nodes=("n1",))]
    elsewhere = frozenset({made("a", "k9", job_id=7, slurm_node="n9")})
    assert run(shown, running, bound=elsewhere) == run(shown, running) == Plan()
    # a bind of another pod (another UID) changes nothing here
    other = frozenset({Bind(pod=PodRef(namespace="ns", name="a", uid="u-old"), node="k1", job_id=5,
                            slurm_node="n1")})  # fmt: skip
    assert run([pod()], running, bound=other) == run([pod()], running)


def test_partly_bound_gang_binds_the_rest() -> None:  # a restart between two binds
    pods = [pod("a", group_="g", node_name="k1", job_id=5), pod("b", group_="g")]
    result = run(pods, [job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"))])
    assert result.actions == (Bind(pod=ref("b"), node="k2", job_id=5, slurm_node="n2"),)


def test_partly_bound_gang_that_cannot_finish_goes_whole() -> None:
    pods = [pod("a", group_="g", node_name="k1", job_id=5), pod("b", group_="g")]
    result = run(pods, [job(5, "a", "b", key="ns/group/g", nodes=("n1", "n9"))])
    assert result.actions == (
        DeletePod(pod=ref("a"), grace_s=30, cause="placement", job_id=5,
                  message="Slurm job 5 cannot run where Slurm placed it: pod deleted (grace period 30 s)"),
        DeletePod(pod=ref("b"), grace_s=30, cause="placement", job_id=5,
                  message="Slurm job 5 cannot run where Slurm placed it: pod deleted (grace period 30 s)"),
    )  # fmt: skip


def test_only_the_marker_makes_a_pod_the_jobs() -> None:
    """A copy of a bound pod (kubectl debug --copy-to: its annotations, the job-id one too) is no pod of the
    job: unbound, it is submitted on its own; bound by hand (--same-node), it is someone else's, and its end
    ends neither the pod it copies nor the job."""
    running = job(5, "a", nodes=("n1",))
    original = pod("a", node_name="k1", job_id=5)
    copy = pod("c", annotations={Keys.SCHEDULER_JOB_ID: "5"})
    gangs = group([original, copy], [running], {}, {"ns": {}}, OPTIONS)
    assert sorted(gangs) == ["ns/pod/a", "ns/pod/c"]
    assert plan(gangs["ns/pod/a"], WORLD, OPTIONS).actions == ()
    submitted = plan(gangs["ns/pod/c"], WORLD, OPTIONS).actions
    assert [action.request.pods for action in submitted if isinstance(action, Submit)] == [(ref("c"),)]
    for phase, deleting in (("Running", False), ("Running", True), ("Failed", False)):
        beside = pod("c", node_name="k1", job_id=5, phase=phase, deleting=deleting)
        # planned beside the job it names, which does not name it (alone, it would look ours and gone)
        assert sorted(group([original, beside], [running], {}, {"ns": {}}, OPTIONS)) == ["ns/pod/a"]
        assert run([original, beside], [running]).actions == (), (phase, deleting)
        # its job ended: the pod of the job goes and its node is held; the copy is not ours to delete
        ended = replace(running, state="CANCELLED")
        deleted = [a.pod for a in run([original, beside], [ended]).actions if isinstance(a, DeletePod)]
        assert deleted == [ref("a")]


# --- Kubernetes ends it


def test_a_pod_deleted_keeps_its_job_until_it_is_gone() -> None:
    assert run([pod(node_name="k1", job_id=5, deleting=True)], [job(5, "a", nodes=("n1",))]).actions == ()
    # without the binding's annotation, the marker says it runs under the job
    assert run([pod(node_name="k1", deleting=True)], [job(5, "a", nodes=("n1",))]).actions == ()
    gone = run([], [job(5, "a", nodes=("n1",))], key="ns/pod/a")
    assert gone.actions == (
        Cancel(job_id=5, cause="pod-deleted", message="Slurm job 5 lost a pod (deleted): cancelled"),
    )


def test_a_finished_pod_ends_its_job() -> None:
    for phase, cause, said in (("Succeeded", "pod-succeeded", "has no pod left running"),
                               ("Failed", "pod-failed", "has a pod that failed")):  # fmt: skip
        result = run([pod(node_name="k1", job_id=5, phase=phase)], [job(5, "a", nodes=("n1",))])
        assert result.actions == (Cancel(job_id=5, cause=cause, message=f"Slurm job 5 {said}: cancelled"),)


def test_a_gang_ends_together() -> None:
    g = job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"))
    failed = [pod("a", group_="g", node_name="k1", job_id=5, phase="Failed"),
              pod("b", group_="g", node_name="k2", job_id=5)]  # fmt: skip
    assert run(failed, [g]).actions == (
        DeletePod(pod=ref("b"), grace_s=30, cause="pod-failed", job_id=5,
                  message="Slurm job 5 has a pod that failed: pod deleted (grace period 30 s)"),
    )  # fmt: skip
    # one succeeded: the other finishes its work first
    done = [pod("a", group_="g", node_name="k1", job_id=5, phase="Succeeded"),
            pod("b", group_="g", node_name="k2", job_id=5)]  # fmt: skip
    assert run(done, [g]).actions == ()
    both = [pod("a", group_="g", node_name="k1", job_id=5, phase="Succeeded"),
            pod("b", group_="g", node_name="k2", job_id=5, phase="Succeeded")]  # fmt: skip
    assert [type(action) for action in run(both, [g]).actions] == [Cancel]
    # a member deleted while the job waits: the gang goes and the job at once
    waiting = job(6, "a", "b", key="ns/group/g", state="PENDING")
    result = run([pod("b", group_="g")], [waiting])
    assert result.actions == (
        DeletePod(pod=ref("b"), grace_s=30, cause="pod-deleted", job_id=6,
                  message="Slurm job 6 lost a pod (deleted): pod deleted (grace period 30 s)"),
        Cancel(job_id=6, cause="pod-deleted", message="Slurm job 6 lost a pod (deleted): cancelled"),
    )  # fmt: skip


def test_orphan_job_is_cancelled() -> None:
    result = run([], [job(9, "x", state="PENDING")], key="ns/pod/x")
    assert result.actions == (
        Cancel(job_id=9, cause="pod-deleted", message="Slurm job 9 lost a pod (deleted): cancelled"),
    )


def test_pod_on_a_deleted_node() -> None:
    """Its Node object gone, its kubelet may still run it: deleted with its own grace period (the kubelet's
    to take), and its job, which holds its CPUs in Slurm, ends only once the pod is gone (never a hold: the
    job holds them)."""
    gone = World(bindings=WORLD.bindings, nodes={}, fresh=True, now=1000.0)
    result = run([pod(node_name="k1", job_id=5, grace_period_s=40)], [job(5, "a", nodes=("n1",))], world=gone)
    said = "has a pod on a Kubernetes Node that no longer exists"
    message = f"Slurm job 5 {said}: pod deleted (grace period 40 s)"
    assert result.actions == (
        DeletePod(pod=ref(), grace_s=40, cause="node-deleted", job_id=5, message=message),
    )
    stopping = run([pod(node_name="k1", job_id=5, deleting=True)], [job(5, "a", nodes=("n1",))], world=gone)
    assert stopping.actions == ()
    stopped = run([], [job(5, "a", nodes=("n1",))], world=gone, key="ns/pod/a")
    assert stopped.actions == (
        Cancel(job_id=5, cause="pod-deleted", message="Slurm job 5 lost a pod (deleted): cancelled"),
    )


# --- Slurm ends it


def test_scancel_deletes_the_pod_and_holds_its_node() -> None:
    result = run([pod(node_name="k1", job_id=5)], [job(5, "a", state="CANCELLED", nodes=("n1",))])
    assert result.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 was cancelled in Slurm"),
        DeletePod(pod=ref(), grace_s=30, cause="cancelled", job_id=5,
                  message="Slurm job 5 was cancelled in Slurm: pod deleted (grace period 30 s)"),
    )  # fmt: skip
    # while it terminates: the hold stays, nothing else
    cancelled = job(5, "a", state="CANCELLED", nodes=("n1",))
    terminating = run([pod(node_name="k1", job_id=5, deleting=True)], [cancelled], held=frozenset({"n1"}))
    assert terminating.actions == ()
    # once gone: released
    released = run(
        [], [job(5, "a", state="CANCELLED", nodes=("n1",))], key="ns/pod/a", held=frozenset({"n1"})
    )
    assert released.actions == (Release(slurm_node="n1"),)


def test_each_slurm_end_has_its_cause() -> None:
    causes = {
        "TIMEOUT": "time-limit",
        "DEADLINE": "time-limit",
        "PREEMPTED": "preempted",
        "NODE_FAIL": "node-failure",
        "BOOT_FAIL": "node-failure",
        "COMPLETED": "job-ended",
        "FAILED": "job-ended",
        "OUT_OF_MEMORY": "job-ended",
    }
    for state, cause in causes.items():
        result = run([pod(node_name="k1", job_id=5)], [job(5, "a", state=state, nodes=("n1",))])
        deletes = [action for action in result.actions if isinstance(action, DeletePod)]
        assert [d.cause for d in deletes] == [cause], state
    completing = job(5, "a", state="RUNNING", flags=frozenset({"COMPLETING"}), nodes=("n1",))
    assert [type(a) for a in run([pod(node_name="k1", job_id=5)], [completing]).actions] == [Hold, DeletePod]


def test_a_job_gone_from_slurm_leaves_no_pod() -> None:
    # the hold names the job it rests on: the controller reads it fresh first (another release's?)
    result = run([pod(node_name="k1", job_id=5)])
    assert result.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 is no longer in Slurm", gone=5),
        DeletePod(pod=ref(), grace_s=30, cause="job-gone", job_id=5,
                  message="Slurm job 5 is no longer in Slurm: pod deleted (grace period 30 s)"),
    )  # fmt: skip
    # a job of another release's that is not this pod's makes no difference
    assert run([pod(node_name="k1", job_id=5)], foreign=frozenset({6})) == result


def test_a_pod_bound_for_another_releases_live_job_is_left_alone() -> None:
    """Two releases serving one scheduler name: the pod's job is live under the other's marker (`foreign`),
    so it is not gone: no deletion, no hold, and a node held for it before is released."""
    bound = pod(node_name="k1", job_id=5)
    assert run([bound], foreign=frozenset({5})) == Plan()
    assert run([bound], foreign=frozenset({5}), held=frozenset({"n1"})).actions == (Release(slurm_node="n1"),)
    # terminating: still not ours to hold
    assert run([replace(bound, deleting=True)], foreign=frozenset({5})) == Plan()
    # one of its gang bound for a job of ours that ended still goes
    gang = [pod("a", group_="g", node_name="k1", job_id=5), pod("b", group_="g", node_name="k2", job_id=7)]
    result = run(
        gang, [job(7, "b", key="ns/group/g", state="CANCELLED", nodes=("n2",))], foreign=frozenset({5})
    )
    assert [(type(a), getattr(a, "slurm_node", "")) for a in result.actions] == [
        (Hold, "n2"),
        (DeletePod, ""),
    ]
    assert [a.pod.name for a in result.actions if isinstance(a, DeletePod)] == ["b"]
    assert result.actions[0] == Hold(
        slurm_node="n2", reason="pod ns/b still runs: Slurm job 7 was cancelled in Slurm"
    )  # a job of ours ended, not gone: no fresh read of another release's


def test_a_job_of_ours_for_a_pod_another_release_bound_gives_way() -> None:
    """Both releases submitted for a new pod and the other's job got it: ours never runs a pod, so it is
    cancelled; its end (preemption, the time limit) never deletes the pod the other's job runs."""
    bound = pod(node_name="k1", job_id=7)
    said = "Slurm job 8 gives way to Slurm job 7, which pod ns/a runs under: cancelled"
    cancel = Cancel(job_id=8, cause="duplicate", message=said)
    for ours in (
        job(8, "a", nodes=("n2",)),
        job(8, "a", state="PENDING"),
        job(8, "a", nodes=("n2",), preempt_time=990.0, end_time=1010.0),
        job(8, "a", nodes=("n2",), end_time=1001.0),  # its time limit ahead
        job(8, "a", state="SUSPENDED", nodes=("n2",)),
    ):
        assert run([bound], [ours], foreign=frozenset({7})).actions == (cancel,), ours
    # a gang with a pod still to bind under it keeps it
    gang = [pod("a", group_="g", node_name="k1", job_id=7), pod("b", group_="g")]
    result = run(gang, [job(8, "a", "b", key="ns/group/g", state="PENDING")], foreign=frozenset({7}))
    assert not any(isinstance(a, Cancel) for a in result.actions)


def test_ours_wins_over_an_edited_job_id_annotation() -> None:
    """Anyone who may patch the pod may overwrite its job-id annotation: a bound pod whose annotation names no
    job of the gang (a number Slurm does not have, a job of another gang), while a live job of ours names it
    and runs on its Node, runs under that job: the job is never cancelled as a duplicate of the number
    written, nor the node held, nor the pod deleted for it. Before, the job was cancelled ("gives way to Slurm
    job 9") and the pod deleted as if its job were gone."""
    running = job(5, "a", nodes=("n1",))
    assert run([pod(node_name="k1", job_id=9)], [running]) == Plan()
    # ... its end ends the pod as any job's would, named as the job it runs under
    ending = job(5, "a", nodes=("n1",), preempt_time=990.0, end_time=1010.0)
    assert run([pod(node_name="k1", job_id=9)], [ending]).actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 is being preempted"),
        DeletePod(pod=ref(), grace_s=10, cause="preempted", job_id=5,
                  message="Slurm job 5 is being preempted: pod deleted (grace period 10 s)"),
    )  # fmt: skip
    # a job of another release's that the annotation names (`foreign`): the pod is that release's
    said = "Slurm job 5 gives way to Slurm job 9, which pod ns/a runs under: cancelled"
    cancel = Cancel(job_id=5, cause="duplicate", message=said)
    assert run([pod(node_name="k1", job_id=9)], [running], foreign=frozenset({9})).actions == (cancel,)
    # our job elsewhere (not on the pod's Node) does not run it: the annotation's word stands
    elsewhere = run([pod(node_name="k1", job_id=9)], [job(5, "a", nodes=("n2",))])
    assert elsewhere.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 9 is no longer in Slurm", gone=9),
        cancel,
    )
    # ... and so does one naming a job of the gang: ended, its node is held (the pod goes once ours gave way)
    earlier = job(4, "a", state="CANCELLED", nodes=("n1",))
    assert [type(a) for a in run([pod(node_name="k1", job_id=4)], [earlier, running]).actions] == [
        Hold,
        Cancel,
    ]
    # overwritten with the job of another pod of ours: it stays in its own job's gang (before, it moved to the
    # other's, and its own job, seeing it gone, was cancelled under it with no hold)
    pods = [pod("a", node_name="k1", job_id=6), pod("b", node_name="k2", job_id=6)]
    jobs = [running, job(6, "b", nodes=("n2",))]
    assert run(pods, jobs, key="ns/pod/a") == Plan()
    assert run(pods, jobs, key="ns/pod/b") == Plan()
    # two live jobs of ours naming it on its Node: the oldest is its job, the other a duplicate (never the pod
    # taken for the duplicate's holder)
    said = "Slurm job 6 gives way to Slurm job 5, which pod ns/a runs under: cancelled"
    assert run([pod(node_name="k1", job_id=9)], [running, job(6, "a", nodes=("n1",))]).actions == (
        Cancel(job_id=6, cause="duplicate", message=said),
    )
    # its job ended: the pod goes and its node is held for that job, the last of ours that ran there (the
    # number written, another gang's job, would be read as not the pod's at every pass, its end missed)
    ended = [
        job(state, "a", state=name, nodes=("n1",)) for state, name in ((2, "CANCELLED"), (3, "NODE_FAIL"))
    ]
    ended.append(job(4, "a", state="TIMEOUT", nodes=("n1",)))
    for edited in (9, 6):  # 6: the live job of another pod of ours
        assert run([pod(node_name="k1", job_id=edited), pod("b", node_name="k2", job_id=6)],
                   [*ended, job(6, "b", nodes=("n2",))], key="ns/pod/a").actions == (
            Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 4 reaches its time limit"),
            DeletePod(pod=ref(), grace_s=30, cause="time-limit", job_id=4,
                      message="Slurm job 4 reaches its time limit: pod deleted (grace period 30 s)"),
        ), edited  # fmt: skip
    # ... and the live one before any that ended
    assert run([pod(node_name="k1", job_id=9)], [*ended, running]) == Plan()
    # a copy beside it (`kubectl debug --copy-to --same-node`: the annotation copied) is still not ours
    copy = pod("c", node_name="k1", job_id=5)
    assert run([pod(node_name="k1", job_id=9), copy], [running]) == Plan()


def test_foreign_never_overrides_a_job_of_ours() -> None:
    """`foreign` speaks only of jobs we do not have: a job of ours with that id (ended) still ends the pod."""
    bound = pod(node_name="k1", job_id=5)
    result = run([bound], [job(5, "a", state="CANCELLED", nodes=("n1",))], foreign=frozenset({5}))
    assert [type(a) for a in result.actions] == [Hold, DeletePod]


def test_a_pod_bound_by_someone_else_is_left_alone() -> None:
    assert run([pod(node_name="k1")]).actions == ()


def test_a_pod_bound_by_someone_else_does_not_stop_the_rest_of_its_gang() -> None:
    foreign = pod("a", group_="g", node_name="k1")
    ours = pod("b", group_="g", node_name="k2", job_id=5)
    result = run([foreign, ours], [job(5, "b", key="ns/group/g", state="CANCELLED", nodes=("n2",))])
    assert [type(a) for a in result.actions] == [Hold, DeletePod]
    assert result.actions[0] == Hold(
        slurm_node="n2", reason="pod ns/b still runs: Slurm job 5 was cancelled in Slurm"
    )
    # and only the waiting pod is told the gang waits
    result = run([foreign, pod("b", group_="g")])
    assert [a.pod.name for a in result.actions if isinstance(a, SetScheduled)] == ["b"]


def test_every_pod_left_by_an_ended_job_is_handled() -> None:
    failed = pod("a", group_="g", phase="Failed")
    said = Scheduled(status="False", reason=PENDING, message="Slurm job 5 is pending")
    waiting = pod("b", group_="g", scheduled=said)
    result = run([failed, waiting], [job(5, "b", key="ns/group/g", state="CANCELLED")])
    assert [(type(a), a.pod.name) for a in result.actions if isinstance(a, DeletePod)] == [(DeletePod, "b")]
    bound = pod("a", group_="g", node_name="k1", job_id=5)
    result = run([bound, waiting], [job(5, "a", "b", key="ns/group/g", state="CANCELLED", nodes=("n1",))])
    assert [a.pod.name for a in result.actions if isinstance(a, DeletePod)] == ["a", "b"]
    done = pod("a", group_="g", node_name="k1", job_id=5, phase="Succeeded")
    still = pod("b", group_="g", node_name="k2", job_id=5)
    result = run([done, still], [job(5, "a", "b", key="ns/group/g", state="CANCELLED", nodes=("n1", "n2"))])
    assert [a.slurm_node for a in result.actions if isinstance(a, Hold)] == ["n2"]


def test_a_released_pod_keeps_its_condition_while_its_gang_is_incomplete() -> None:
    failed = Scheduled(status="False", reason=PLACEMENT_FAILED, message="Slurm job 5 cannot run here: x; y")
    cancelled = job(5, "a", "b", key="ns/group/g", state="CANCELLED", end_time=900.0)
    assert run([pod("a", group_="g", scheduled=failed)], [cancelled]).actions == ()


def test_a_bound_pod_without_its_annotation_is_ours_when_a_job_names_it() -> None:
    # e.g. an API server that did not copy the Binding's annotations: the marker still says whose it is
    jobs = [
        job(3, "a", state="NODE_FAIL", nodes=("n3",)),
        job(4, "a", state="TIMEOUT", nodes=("n2",)),
        job(5, "a", state="CANCELLED", nodes=("n1",)),
    ]
    result = run([pod(node_name="k1")], jobs)
    assert result.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 was cancelled in Slurm"),
        DeletePod(
            pod=ref(),
            grace_s=30,
            cause="cancelled",
            job_id=5,
            message="Slurm job 5 was cancelled in Slurm: pod deleted (grace period 30 s)",
        ),
    )


def test_an_unbound_pod_whose_job_slurm_ended_is_deleted() -> None:
    said = Scheduled(status="False", reason=PENDING, message="Slurm job 5 is pending")
    result = run([pod(scheduled=said)], [job(5, "a", state="CANCELLED")])
    assert result.actions == (
        DeletePod(pod=ref(), grace_s=30, cause="cancelled", job_id=5,
                  message="Slurm job 5 was cancelled in Slurm: pod deleted (grace period 30 s)"),
    )  # fmt: skip
    # a placement failure of another job does not make it ours
    other = Scheduled(status="False", reason=PLACEMENT_FAILED, message="Slurm job 4 cannot run here")
    assert [type(a) for a in run([pod(scheduled=other)], [job(5, "a", state="CANCELLED")]).actions] == [
        DeletePod
    ]
    no_id = Scheduled(status="False", reason=PLACEMENT_FAILED, message="cannot run here")
    assert [type(a) for a in run([pod(scheduled=no_id)], [job(5, "a", state="CANCELLED")]).actions] == [
        DeletePod
    ]


def test_preemption_grace_window() -> None:
    preempting = job(5, "a", nodes=("n1",), preempt_time=990.0, end_time=1010.0)
    result = run([pod(node_name="k1", job_id=5)], [preempting])
    assert result.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 is being preempted"),
        DeletePod(pod=ref(), grace_s=10, cause="preempted", job_id=5,
                  message="Slurm job 5 is being preempted: pod deleted (grace period 10 s)"),
    )  # fmt: skip
    # once the pod is gone, the job goes too (its resources free before GraceTime ends)
    gone = run([], [preempting], key="ns/pod/a", held=frozenset({"n1"}))
    assert gone.actions == (
        Cancel(job_id=5, cause="preempted", message="Slurm job 5 is being preempted: cancelled"),
        Release(slurm_node="n1"),
    )
    late = job(5, "a", nodes=("n1",), preempt_time=990.0, end_time=999.5)
    deletes = [a for a in run([pod(node_name="k1", job_id=5)], [late]).actions if isinstance(a, DeletePod)]
    assert deletes[0].grace_s == 0
    early = job(5, "a", nodes=("n1",), preempt_time=1.0)  # any time set means Slurm preempts it
    assert [type(a) for a in run([pod(node_name="k1", job_id=5)], [early]).actions] == [Hold, DeletePod]
    no_end = job(5, "a", nodes=("n1",), preempt_time=990.0)
    deletes = [a for a in run([pod(node_name="k1", job_id=5)], [no_end]).actions if isinstance(a, DeletePod)]
    assert deletes[0].grace_s == 30


def test_a_running_job_without_end_needs_no_recheck() -> None:
    assert run([pod(node_name="k1", job_id=5)], [job(5, "a", nodes=("n1",))]) == Plan()


def test_any_end_time_counts() -> None:  # epoch seconds are never this small; the rule is "set"
    early = World(bindings=WORLD.bindings, nodes=NODES, fresh=True, now=0.5)
    ahead = job(5, "a", nodes=("n1",), end_time=1.0)
    assert run([pod(node_name="k1", job_id=5, grace_period_s=0)], [ahead], world=early) == Plan(
        recheck_at=1.0
    )
    past = run([pod(node_name="k1", job_id=5, grace_period_s=0)], [ahead], world=at(1.0))
    assert [type(a) for a in past.actions] == [Hold, DeletePod]


def test_an_orphan_job_near_its_end_is_cancelled_as_an_orphan() -> None:
    result = run([], [job(5, "a", nodes=("n1",), end_time=1000.5)], key="ns/pod/a")
    assert result.actions == (
        Cancel(job_id=5, cause="pod-deleted", message="Slurm job 5 lost a pod (deleted): cancelled"),
    )


def test_time_limit_ahead() -> None:
    running = job(5, "a", nodes=("n1",), end_time=1100.0)
    assert run([pod(node_name="k1", job_id=5)], [running]) == Plan(recheck_at=1070.0)
    due = run([pod(node_name="k1", job_id=5)], [running], world=at(1080.0))
    assert due.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 reaches its time limit"),
        DeletePod(pod=ref(), grace_s=20, cause="time-limit", job_id=5,
                  message="Slurm job 5 reaches its time limit: pod deleted (grace period 20 s)"),
    )  # fmt: skip
    assert [type(a) for a in run([pod(node_name="k1", job_id=5)], [running], world=at(1070.0)).actions] == [
        Hold, DeletePod
    ]  # fmt: skip


def test_a_grace_period_longer_than_half_the_run_is_cut_not_the_run() -> None:
    """A pod whose grace period is longer than half its job's run (its time limit from its start) does not
    stop for the time limit as the job starts (it would run nothing, and a Job's controller would make it
    again for the same end): it is bound and runs the first half, and is deleted halfway with the other half
    as its grace period, the Warning Event naming spec.terminationGracePeriodSeconds. Within half the run,
    its full grace period stands (test_time_limit_ahead); without a start, the deadline is the end less it."""
    started = job(5, "a", nodes=("n1",), start_time=1000.0, end_time=2800.0)  # 30 minutes
    result = run([pod(grace_period_s=3600)], [started], world=at(1000.0))
    assert result.actions == (Bind(pod=ref(), node="k1", job_id=5, slurm_node="n1"),)
    assert result.recheck_at == 1900.0
    bound = [pod(node_name="k1", job_id=5, grace_period_s=3600)]
    assert run(bound, [started], world=at(1899.0)) == Plan(recheck_at=1900.0)
    said = (
        "Slurm job 5 reaches its time limit (spec.terminationGracePeriodSeconds 3600 s is more than half its "
        "run of 1800 s: cut to the time left): pod deleted (grace period 900 s)"
    )
    assert run(bound, [started], world=at(1900.0)).actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 reaches its time limit"),
        DeletePod(pod=ref(), grace_s=900, cause="time-limit", job_id=5, message=said),
    )
    # half the run exactly: its grace period whole, nothing said
    half = run([pod(node_name="k1", job_id=5, grace_period_s=900)], [started], world=at(1900.0))
    assert [a.message for a in half.actions if isinstance(a, DeletePod)] == [
        "Slurm job 5 reaches its time limit: pod deleted (grace period 900 s)"
    ]
    # a gang stops together, from the longest grace period its run allows
    gang = [pod("a", group_="g", node_name="k1", job_id=5, grace_period_s=3600),
            pod("b", group_="g", node_name="k2", job_id=5, grace_period_s=60)]  # fmt: skip
    both = job(5, "a", "b", key="ns/group/g", nodes=("n1", "n2"), start_time=1000.0, end_time=2800.0)
    assert run(gang, [both], world=at(1000.0)) == Plan(recheck_at=1900.0)
    # preemption's deadline is Slurm's GraceTime: the pod's grace period capped, nothing cut to say
    preempted = job(5, "a", nodes=("n1",), start_time=1000.0, end_time=1930.0, preempt_time=1900.0)
    assert [
        a.message for a in run(bound, [preempted], world=at(1900.0)).actions if isinstance(a, DeletePod)
    ] == ["Slurm job 5 is being preempted: pod deleted (grace period 30 s)"]
    # any start counts (epoch seconds are never this small; the rule is "set")
    tiny = job(5, "a", nodes=("n1",), start_time=1.0, end_time=1801.0)
    assert run(bound, [tiny], world=at(1.0)) == Plan(recheck_at=901.0)
    # no start known: the end less the grace period (as before)
    unknown = job(5, "a", nodes=("n1",), end_time=2800.0)
    assert [type(a) for a in run(bound, [unknown], world=at(1000.0)).actions] == [Hold, DeletePod]


def test_suspend_and_requeue_take_the_pod_away() -> None:
    suspended = run(
        [pod(node_name="k1", job_id=5)], [job(5, "a", state="SUSPENDED", nodes=("n1",), end_time=1010.0)]
    )
    assert suspended.actions == (
        Hold(slurm_node="n1", reason="pod ns/a still runs: Slurm job 5 was suspended by Slurm (preemption)"),
        DeletePod(pod=ref(), grace_s=30, cause="suspended", job_id=5,
                  message="Slurm job 5 was suspended by Slurm (preemption): pod deleted (grace period 30 s)"),
    )  # fmt: skip
    requeued = run([pod(node_name="k1", job_id=5)], [job(5, "a", state="PENDING", nodes=("n1",))])
    assert [(type(a), getattr(a, "cause", "")) for a in requeued.actions] == [
        (Hold, ""),
        (DeletePod, "requeued"),
    ]
    # a suspended job whose pods are gone is cancelled
    alone = run([], [job(5, "a", state="SUSPENDED", nodes=("n1",))], key="ns/pod/a")
    assert alone.actions == (
        Cancel(
            job_id=5, cause="suspended", message="Slurm job 5 was suspended by Slurm (preemption): cancelled"
        ),
    )


def test_hold_only_the_jobs_nodes() -> None:
    shared = World(bindings={"n1": "k1", "n1b": "k1", "n2": "k2"}, nodes=NODES, fresh=True, now=1000.0)
    result = run(
        [pod(node_name="k1", job_id=5)], [job(5, "a", state="CANCELLED", nodes=("n1",))], world=shared
    )
    assert [a.slurm_node for a in result.actions if isinstance(a, Hold)] == ["n1"]
    gone = run([pod(node_name="k1", job_id=5)], world=shared)
    assert [a.slurm_node for a in gone.actions if isinstance(a, Hold)] == ["n1", "n1b"]
    no_nodes = run([pod(node_name="k1", job_id=5)], [job(5, "a", state="CANCELLED")], world=shared)
    assert [a.slurm_node for a in no_nodes.actions if isinstance(a, Hold)] == ["n1", "n1b"]


def test_a_finished_pod_is_not_deleted_and_holds_nothing() -> None:
    done = pod(node_name="k1", job_id=5, phase="Succeeded")
    assert run([done], [job(5, "a", state="CANCELLED", nodes=("n1",))], held=frozenset({"n1"})).actions == (
        Release(slurm_node="n1"),
    )
    preempting = job(5, "a", nodes=("n1",), preempt_time=990.0, end_time=1010.0)
    assert run([done], [preempting]).actions == (
        Cancel(job_id=5, cause="preempted", message="Slurm job 5 is being preempted: cancelled"),
    )


def test_holds_are_released_only_on_fresh_data() -> None:
    result = run([pod()], held=frozenset({"n2"}), submitted=3)
    assert result.actions == (Release(slurm_node="n2"),)
    stale = World(bindings=WORLD.bindings, nodes=NODES, fresh=False, now=1000.0)
    assert run([pod()], held=frozenset({"n2"}), world=stale).actions == ()


# --- duplicates


def test_a_duplicate_job_is_cancelled() -> None:
    result = run([pod()], [job(5, "a", state="PENDING"), job(6, "a", state="PENDING")])
    assert result.actions == (
        SetScheduled(pod=ref(), reason=PENDING, message="Slurm job 5 is pending"),
        Cancel(
            job_id=6,
            cause="duplicate",
            message="Slurm job 6 duplicates Slurm job 5 for pods both name: cancelled",
        ),
    )
    # the one the pod runs under stands, whatever its id; then a running one
    bound = run([pod(node_name="k1", job_id=6)], [job(5, "a", nodes=("n2",)), job(6, "a", nodes=("n1",))])
    assert bound.actions == (
        Cancel(
            job_id=5,
            cause="duplicate",
            message="Slurm job 5 gives way to Slurm job 6, which pod ns/a runs under: cancelled",
        ),
    )
    running = run([pod()], [job(5, "a", state="PENDING"), job(6, "a", nodes=("n1",))])
    assert running.actions == (
        Bind(pod=ref(), node="k1", job_id=6, slurm_node="n1"),
        Cancel(
            job_id=5,
            cause="duplicate",
            message="Slurm job 5 duplicates Slurm job 6 for pods both name: cancelled",
        ),
    )


def test_a_pod_running_under_a_duplicate_goes_before_the_duplicate() -> None:
    # two jobs each with a bound pod of the same gang (a split brain): the later one's pod goes first
    pods = [pod("a", group_="g", node_name="k1", job_id=5), pod("b", group_="g", node_name="k2", job_id=6)]
    jobs = [
        job(5, "a", "b", key="ns/group/g", nodes=("n1", "n3")),
        job(6, "a", "b", key="ns/group/g", nodes=("n2", "n3")),
    ]
    result = run(pods, jobs)
    message = (
        "Slurm job 6 gives way to Slurm job 5, which pod ns/a runs under: pod deleted (grace period 30 s)"
    )
    assert DeletePod(pod=ref("b"), grace_s=30, cause="duplicate", job_id=6, message=message) in result.actions
    assert not any(isinstance(a, Cancel) and a.job_id == 6 for a in result.actions)
    # already going: not deleted again, and the duplicate stays until it is gone (the gang, broken, goes)
    pods[1] = pod("b", group_="g", node_name="k2", job_id=6, deleting=True)
    result = run(pods, jobs)
    assert [(type(a), a.pod.name) for a in result.actions if isinstance(a, DeletePod)] == [(DeletePod, "a")]
    assert not any(isinstance(a, Cancel) for a in result.actions)


def test_a_new_instance_of_a_gang_does_not_disturb_the_old_one() -> None:
    # the old pod of a StatefulSet-like name still terminates under job 5; its successor has job 6
    old = pod("a", node_name="k1", job_id=5, deleting=True)
    result = run([old], [job(5, "a", nodes=("n1",))])
    assert result.actions == ()
    successor = Pod(namespace="ns", name="a", uid="u-a2", containers=REQ)
    marker6 = Marker(release="r1", key="ns/pod/a", pods=(("a", "u-a2"),))
    jobs = [job(5, "a", nodes=("n1",)), Job(job_id=6, state="PENDING", marker=marker6)]
    gangs = group([successor], jobs, {}, {"ns": {}}, OPTIONS)
    result = plan(gangs["ns/pod/a"], WORLD, OPTIONS)
    assert result.actions == (  # job 6 first: it stands for a pod here, job 5 for none
        SetScheduled(
            pod=PodRef(namespace="ns", name="a", uid="u-a2"), reason=PENDING, message="Slurm job 6 is pending"
        ),
        Cancel(job_id=5, cause="pod-deleted", message="Slurm job 5 lost a pod (deleted): cancelled"),
    )


def test_request_pods_deleted_now_are_not_submitted() -> None:
    said = Scheduled(status="False", reason=PENDING, message="Slurm job 5 is pending")
    pods = [pod("a", group_="g", scheduled=said), pod("b", group_="g")]
    result = run(pods, [job(5, "a", key="ns/group/g", state="CANCELLED")])
    assert not any(isinstance(a, Submit) for a in result.actions)
    gangs = group(pods, [job(5, "a", key="ns/group/g", state="CANCELLED")], {}, {"ns": {}}, OPTIONS)
    assert isinstance(gangs["ns/group/g"].want, JobRequest)


def test_a_job_naming_part_of_a_gang_gives_way_to_one_naming_all_of_it() -> None:
    # job 2 names only pod a (the gang was smaller when it was submitted): the older job, yet job 3 stands,
    # or pod b would be left without a job, waiting for a gang that a partial job has split
    pending = job(2, "a", key="ns/group/g", state="PENDING")
    whole = job(3, "a", "b", key="ns/group/g", state="PENDING")
    result = run(GANG, [pending, whole])
    assert result.actions == (
        SetScheduled(pod=ref("a"), reason=PENDING, message="Slurm job 3 is pending"),
        SetScheduled(pod=ref("b"), reason=PENDING, message="Slurm job 3 is pending"),
        Cancel(
            job_id=2,
            cause="duplicate",
            message="Slurm job 2 names 1 of the gang's pods, Slurm job 3 names 2: cancelled",
        ),
    )
    # even running: no pod holds resources under it yet
    running = job(2, "a", key="ns/group/g", nodes=("n1",))
    assert (
        Cancel(
            job_id=2,
            cause="duplicate",
            message="Slurm job 2 names 1 of the gang's pods, Slurm job 3 names 2: cancelled",
        )
        in run(GANG, [running, whole]).actions
    )
    # a pod running under the partial job keeps it: the whole one goes
    bound = [pod("a", group_="g", node_name="k1", job_id=2), pod("b", group_="g")]
    result = run(bound, [running, whole])
    assert (
        Cancel(
            job_id=3,
            cause="duplicate",
            message="Slurm job 3 gives way to Slurm job 2, which pod ns/a runs under: cancelled",
        )
        in result.actions
    )
    assert not any(isinstance(a, Cancel) and a.job_id == 2 for a in result.actions)


def test_a_pod_a_live_job_stands_for_shows_that_jobs_state_not_the_gangs_wait() -> None:
    # job 2 names only pod a; pod b waits for the rest of its gang. Telling pod a the gang waits too would
    # undo "job 2 is pending" on every other pass: a status rewrite loop
    pending = job(2, "a", key="ns/group/g", state="PENDING")
    waits = (
        "1 of the 2 pods of group g are here; its Slurm job is submitted when all are (pods of namespace ns"
    )
    waits += " only)"
    result = run(GANG, [pending])
    assert result.actions == (
        SetScheduled(pod=ref("a"), reason=PENDING, message="Slurm job 2 is pending"),
        SetScheduled(pod=ref("b"), reason=WAITING, message=waits),
    )
    told = [
        pod(
            "a",
            group_="g",
            scheduled=Scheduled(status="False", reason=PENDING, message="Slurm job 2 is pending"),
        ),
        pod("b", group_="g", scheduled=Scheduled(status="False", reason=WAITING, message=waits)),
    ]
    assert run(told, [pending]).actions == ()
