"""The NodeSet plan: scale-out, scale-in (idle first, never on stale data), rolling updates within
maxUnavailable, Slurm record clean-up, and a simulation of whole rollouts."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncer.controllers.nodeset.plan import SCALE_IN, UPDATE, Plan, member_name, owns, plan, removal_stamp
from syncer.controllers.nodeset.spec import NodeSetSpec, parse
from syncer.model.keys import Keys
from syncer.model.kube import Condition, KubeNode, KubeNodeSet, KubePod
from syncer.model.slurm import SlurmNode

NOW = 1_700_000_000.0
NS = KubeNodeSet(namespace="hpc", name="gpu", uid="u1")
REASON = "k8s: scale-in of NodeSet gpu"
STAMP = removal_stamp(NS)  # what the reconciler writes on a record it starts removing
READY = (Condition(type="Ready", status="True"),)


def make_spec(replicas: int = 0, image: str = "slurmd:1", **fields: Any) -> NodeSetSpec:
    template = {"spec": {"containers": [{"name": "slurmd", "image": image}]}}
    return parse("gpu", {"replicas": replicas, "template": template, **fields})


def pod(
    name: str,
    spec: NodeSetSpec,
    *,
    removal: str = "",
    since: float = NOW,
    ready: bool = True,
    terminating: bool = False,
    hash_: str | None = None,
) -> KubePod:
    annotations = {Keys.REMOVAL: removal, Keys.REMOVAL_SINCE: f"{since:.0f}"} if removal else {}
    return KubePod(
        namespace="hpc",
        name=name,
        uid=f"uid-{name}",
        labels={
            Keys.NODE_NAME_LABEL: name,
            Keys.NODESET_LABEL: "gpu",
            Keys.TEMPLATE_HASH_LABEL: hash_ if hash_ is not None else spec.template_hash(),
        },
        annotations=annotations,
        conditions=READY if ready else (),
        deletion_timestamp=NOW if terminating else None,
        owner_kind="NodeSet",
        owner_name="gpu",
        owner_uid=NS.uid,
    )


def slurm(name: str, *flags: str, reason: str = "", comment: str | None = None) -> SlurmNode:
    """A Slurm node; drained with the scale-in reason, it carries NS's removal stamp unless told."""
    stamp = STAMP if reason == REASON else ""
    return SlurmNode(
        name=name,
        state=frozenset(flags or ("IDLE",)),
        reason=reason,
        comment=stamp if comment is None else comment,
    )


def run(
    spec: NodeSetSpec,
    pods: list[KubePod],
    nodes: dict[str, SlurmNode] | None = None,
    *,
    fresh: bool = True,
    kube_nodes: list[KubeNode] | None = None,
    now: float = NOW,
) -> Plan:
    return plan(NS, spec, pods, nodes or {}, nodes=kube_nodes or [], slurm_fresh=fresh, now=now)


def test_scale_out_creates_lowest_free_ordinals() -> None:
    spec = make_spec(4)
    result = run(spec, [pod("gpu-1", spec)], {"gpu-1": slurm("gpu-1")})
    assert [m.name for m in result.create] == ["gpu-0", "gpu-2", "gpu-3"]
    assert result.desired == 4


def test_scale_in_picks_idle_nodes_first_then_highest_ordinal() -> None:
    spec = make_spec(2)
    pods = [pod(f"gpu-{i}", spec) for i in range(5)]
    nodes = {
        "gpu-0": slurm("gpu-0", "ALLOCATED"),
        "gpu-1": slurm("gpu-1"),
        "gpu-2": slurm("gpu-2", "MIXED"),
        "gpu-3": slurm("gpu-3"),
        "gpu-4": slurm("gpu-4", "ALLOCATED"),
    }
    result = run(spec, pods, nodes)
    assert result.mark_removal == {"gpu-3": SCALE_IN, "gpu-1": SCALE_IN, "gpu-4": SCALE_IN}
    assert result.scale_in_marks == {"gpu-1", "gpu-3", "gpu-4"}
    assert not result.delete_pods  # the drain comes first
    assert result.busy_labels == {"gpu-0": True, "gpu-1": False, "gpu-2": True, "gpu-3": False, "gpu-4": True}


def test_unregistered_pods_go_before_registered_ones() -> None:
    spec = make_spec(1)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec, ready=False)]
    result = run(spec, pods, {"gpu-0": slurm("gpu-0"), "gpu-1": slurm("gpu-1")})
    assert result.mark_removal == {"gpu-1": SCALE_IN}


def test_pod_deleted_only_when_drained_and_idle() -> None:
    spec = make_spec(0)
    pods = [pod(f"gpu-{i}", spec, removal=SCALE_IN) for i in range(4)]
    nodes = {
        "gpu-0": slurm("gpu-0", "IDLE", "DRAIN", reason=REASON),  # drained
        "gpu-1": slurm("gpu-1", "MIXED", "DRAIN", reason=REASON),  # draining: job still runs
        "gpu-2": slurm("gpu-2", "IDLE", "DRAIN", "COMPLETING", reason=REASON),  # job finishing
        "gpu-3": slurm("gpu-3", "IDLE"),  # drain not seen yet
    }
    result = run(spec, pods, nodes)
    assert result.delete_pods == ["gpu-0"]
    assert result.draining == ["gpu-1", "gpu-2", "gpu-3"]
    assert result.scale_in_marks == {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}


def test_down_node_with_foreign_reason_is_removable() -> None:
    spec = make_spec(0)
    result = run(
        spec, [pod("gpu-0", spec, removal=SCALE_IN)], {"gpu-0": slurm("gpu-0", "DOWN", reason="dead PSU")}
    )
    assert result.delete_pods == ["gpu-0"]


def test_never_registered_pod_is_deleted_at_once() -> None:
    spec = make_spec(0)
    assert run(spec, [pod("gpu-0", spec, removal=SCALE_IN)], {}).delete_pods == ["gpu-0"]


def test_stale_slurm_data_removes_nothing() -> None:
    spec = make_spec(0)
    pods = [pod("gpu-0", spec, removal=SCALE_IN)]
    drained = {"gpu-0": slurm("gpu-0", "IDLE", "DRAIN", reason=REASON)}
    result = run(spec, pods, drained, fresh=False)
    assert not result.delete_pods
    assert result.draining == ["gpu-0"]
    assert result.blocked
    assert not result.busy_labels  # no busy label changes either
    phantom = {"gpu-7": slurm("gpu-7", "IDLE", "DRAIN", reason=REASON)}
    result = run(spec, [], phantom, fresh=False)
    assert not result.delete_slurm_nodes and result.blocked


def test_drain_timeout_is_reported_not_forced() -> None:
    spec = make_spec(0, drainTimeout="10m")
    pods = [pod("gpu-0", spec, removal=SCALE_IN, since=NOW - 601)]
    result = run(spec, pods, {"gpu-0": slurm("gpu-0", "ALLOCATED", "DRAIN", reason=REASON)})
    assert result.timed_out == ["gpu-0"]
    assert not result.delete_pods
    early = run(spec, pods, {"gpu-0": slurm("gpu-0", "ALLOCATED", "DRAIN", reason=REASON)}, now=NOW - 10)
    assert early.timed_out == []


def test_slurm_record_deleted_after_the_pod_only_if_ours_and_idle() -> None:
    spec = make_spec(0)
    nodes = {
        "gpu-0": slurm("gpu-0", "IDLE", "DRAIN", reason=REASON),
        "gpu-1": slurm(
            "gpu-1",
            "IDLE",
            "DRAIN",
            reason="k8s: pod hpc/gpu-1 terminating; scale-in of NodeSet gpu",
            comment=STAMP,
        ),
        "gpu-2": slurm("gpu-2", "IDLE", "DRAIN", reason="admin: bad fan"),  # not ours: kept
        "gpu-3": slurm("gpu-3", "IDLE", "DRAIN", "COMPLETING", reason=REASON),  # still busy
        "other-0": slurm("other-0", "IDLE", "DRAIN", reason="k8s: scale-in of NodeSet other"),
        "gpu-4": slurm("gpu-4", "IDLE", "DRAIN", reason=REASON),  # its pod still exists
    }
    result = run(spec, [pod("gpu-4", spec, removal=SCALE_IN, terminating=True)], nodes)
    assert result.delete_slurm_nodes == ["gpu-0", "gpu-1"]
    keep = make_spec(0, slurm={"nodeOnScaleIn": "Keep"})
    assert run(keep, [], nodes).delete_slurm_nodes == []


def test_scale_out_waits_for_an_old_record_of_ours_to_go() -> None:
    spec = make_spec(2)
    nodes = {"gpu-1": slurm("gpu-1", "IDLE", "DRAIN", reason=REASON)}
    result = run(spec, [], nodes)
    assert [m.name for m in result.create] == ["gpu-0"]
    assert result.delete_slurm_nodes == ["gpu-1"]
    keep = make_spec(2, slurm={"nodeOnScaleIn": "Keep"})
    assert [m.name for m in run(keep, [], nodes).create] == ["gpu-0", "gpu-1"]  # reused, then undrained


def test_scale_out_cancels_a_scale_in_first() -> None:
    spec = make_spec(3)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec), pod("gpu-2", spec, removal=SCALE_IN)]
    result = run(spec, pods, {n: slurm(n) for n in ("gpu-0", "gpu-1", "gpu-2")})
    assert result.unmark == ["gpu-2"]
    assert not result.create and not result.mark_removal
    assert "gpu-2" not in result.scale_in_marks


def test_terminating_pod_holds_its_ordinal() -> None:
    spec = make_spec(2)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec, terminating=True)]
    assert run(spec, pods, {"gpu-0": slurm("gpu-0")}).create == []


def test_rolling_update_respects_max_unavailable() -> None:
    old = make_spec(6, image="slurmd:1")
    new = make_spec(6, image="slurmd:2", updateStrategy={"rollingUpdate": {"maxUnavailable": 2}})
    pods = [pod(f"gpu-{i}", old) for i in range(6)]
    nodes = {f"gpu-{i}": slurm(f"gpu-{i}", "ALLOCATED" if i < 2 else "IDLE") for i in range(6)}
    result = run(new, pods, nodes)
    assert result.mark_removal == {"gpu-5": UPDATE, "gpu-4": UPDATE}  # idle first, highest ordinal
    marked = [pod(f"gpu-{i}", old, removal=UPDATE if i >= 4 else "") for i in range(6)]
    assert run(new, marked, nodes).mark_removal == {}  # budget used up


def test_on_delete_strategy_never_replaces() -> None:
    old = make_spec(3, image="slurmd:1")
    new = make_spec(3, image="slurmd:2", updateStrategy={"type": "OnDelete"})
    result = run(new, [pod(f"gpu-{i}", old) for i in range(3)], {})
    assert result.mark_removal == {}


def test_daemonset_mode_follows_matching_nodes() -> None:
    spec = make_spec(mode="DaemonSet", nodeSelector={"pool": "gpu"})
    kube_nodes = [
        KubeNode(name="n1.example.com", labels={"pool": "gpu"}),
        KubeNode(name="n2", labels={"pool": "cpu"}),
        KubeNode(name="n3", labels={"pool": "gpu"}),
    ]
    gone = pod("gpu-n9", spec)
    result = run(spec, [pod("gpu-n3", spec), gone], {}, kube_nodes=kube_nodes)
    assert [(m.name, m.node_name) for m in result.create] == [("gpu-n1-example-com", "n1.example.com")]
    assert result.mark_removal == {"gpu-n9": SCALE_IN}
    assert member_name("gpu", "a.b.c") == "gpu-a-b-c"


# -- simulation ------------------------------------------------------------------------------------
def simulate(
    spec: NodeSetSpec, pods: dict[str, KubePod], busy: set[str], max_steps: int = 200
) -> tuple[dict[str, KubePod], int]:
    """Apply plans until idle. Slurm drains a node once it is marked; busy nodes finish their job
    after one step. Returns the final pods and the most members unavailable at any step."""
    slurm_nodes: dict[str, SlurmNode] = {}
    worst = 0
    for _ in range(max_steps):
        for name, p in pods.items():
            marked = Keys.REMOVAL in p.annotations
            flags = ("ALLOCATED" if name in busy else "IDLE",) + (("DRAIN",) if marked else ())
            slurm_nodes[name] = slurm(name, *flags, reason=REASON if marked else "")
            if marked:
                busy.discard(name)  # the job ends; the drain completes next step
        result = plan(NS, spec, list(pods.values()), slurm_nodes, nodes=[], slurm_fresh=True, now=NOW)
        unavailable = sum(
            1
            for p in pods.values()
            if Keys.REMOVAL in p.annotations and p.annotations[Keys.REMOVAL] == UPDATE
        ) + max(0, spec.replicas - len(pods))
        worst = max(worst, unavailable)
        if result.idle:
            return pods, worst
        for name, why in result.mark_removal.items():
            pods[name] = pod(name, spec, removal=why, hash_=pods[name].labels[Keys.TEMPLATE_HASH_LABEL])
        for name in result.unmark:
            pods[name] = pod(name, spec, hash_=pods[name].labels[Keys.TEMPLATE_HASH_LABEL])
        for name in result.delete_pods:
            del pods[name]
            slurm_nodes.pop(name, None)
        for member in result.create:
            pods[member.name] = pod(member.name, spec)
    raise AssertionError("the plan never settled")


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(min_value=0, max_value=12),
    start=st.integers(min_value=0, max_value=12),
    max_unavailable=st.integers(min_value=1, max_value=4),
    busy=st.sets(st.integers(min_value=0, max_value=11)),
)
def test_rollout_converges_within_max_unavailable(
    replicas: int, start: int, max_unavailable: int, busy: set[int]
) -> None:
    old = make_spec(start, image="slurmd:1")
    new = make_spec(
        replicas, image="slurmd:2", updateStrategy={"rollingUpdate": {"maxUnavailable": max_unavailable}}
    )
    pods = {f"gpu-{i}": pod(f"gpu-{i}", old) for i in range(start)}
    final, worst = simulate(new, pods, {f"gpu-{i}" for i in busy})
    assert sorted(final) == sorted(f"gpu-{i}" for i in range(replicas))
    assert all(p.labels[Keys.TEMPLATE_HASH_LABEL] == new.template_hash() for p in final.values())
    assert not any(Keys.REMOVAL in p.annotations for p in final.values())
    if start == replicas:  # pure update: never more members down than allowed
        assert worst <= max_unavailable


# -- ownership by identity -------------------------------------------------------------------------
GPU_A = KubeNodeSet(namespace="hpc", name="gpu-a", uid="u2")
OTHER_NS = KubeNodeSet(namespace="team-b", name="gpu", uid="u3")


def test_a_record_being_removed_by_nodeset_gpu_a_is_never_taken_by_nodeset_gpu() -> None:
    """`gpu-a-1` drained with "k8s: scale-in of NodeSet gpu-a" (which contains "scale-in of NodeSet
    gpu" and starts with "gpu-") belongs to gpu-a, whose nodeOnScaleIn is Keep: gpu never deletes it
    nor waits on it, whatever its name or reason say."""
    theirs = slurm(
        "gpu-a-1", "IDLE", "DRAIN", reason="k8s: scale-in of NodeSet gpu-a", comment=removal_stamp(GPU_A)
    )
    spec = make_spec(2)  # gpu, nodeOnScaleIn Delete
    result = run(spec, [], {"gpu-a-1": theirs})
    assert result.delete_slurm_nodes == []
    assert [m.name for m in result.create] == ["gpu-0", "gpu-1"]


def test_two_nodesets_of_one_name_in_two_namespaces_own_different_records() -> None:
    """Same name, same reason text, another namespace (and UID): not ours."""
    theirs = slurm("gpu-1", "IDLE", "DRAIN", reason=REASON, comment=removal_stamp(OTHER_NS))
    spec = make_spec(0)
    assert run(spec, [], {"gpu-1": theirs}).delete_slurm_nodes == []
    assert plan(
        OTHER_NS, spec, [], {"gpu-1": theirs}, nodes=[], slurm_fresh=True, now=NOW
    ).delete_slurm_nodes == ["gpu-1"]
    # a NodeSet deleted and created again under the same name is a new owner as well
    again = KubeNodeSet(namespace="hpc", name="gpu", uid="u9")
    old = slurm("gpu-1", "IDLE", "DRAIN", reason=REASON)  # stamped by uid u1
    assert plan(again, spec, [], {"gpu-1": old}, nodes=[], slurm_fresh=True, now=NOW).delete_slurm_nodes == []


def test_removal_stamps_the_record_and_a_cancelled_removal_clears_it() -> None:
    spec = make_spec(1)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec)]
    nodes = {"gpu-0": slurm("gpu-0"), "gpu-1": slurm("gpu-1", "ALLOCATED")}
    result = run(spec, pods, nodes)
    assert result.mark_removal == {"gpu-0": SCALE_IN}
    assert result.stamp == ["gpu-0"]
    # an admin's comment is not overwritten: that record is kept after its pod goes
    noted = {**nodes, "gpu-0": slurm("gpu-0", comment="rma ticket 42")}
    kept = run(spec, pods, noted)
    assert kept.stamp == [] and kept.unstampable == ["gpu-0"]
    # scaled out again before the drain finished: the removal and its stamp go
    grown = make_spec(2)
    marked = [pod("gpu-0", spec, removal=SCALE_IN), pod("gpu-1", spec)]
    back = run(grown, marked, {**nodes, "gpu-0": slurm("gpu-0", "IDLE", "DRAIN", reason=REASON)})
    assert back.unmark == ["gpu-0"] and back.unstamp == ["gpu-0"]
    assert run(spec, pods, nodes, fresh=False).stamp == []  # never on stale data


def test_ownership_of_a_pod_is_its_controlling_owner_uid() -> None:
    spec = make_spec(1)
    ours = pod("gpu-0", spec)
    assert owns(NS, ours)
    assert not owns(GPU_A, ours)
    assert not owns(OTHER_NS, ours)  # same name, other namespace and UID
    stray = KubePod(namespace="hpc", name="gpu-5", labels={Keys.NODESET_LABEL: "gpu"})  # copies the label
    assert not owns(NS, stray)


def test_a_member_that_stays_loses_a_stamp_left_from_an_earlier_removal() -> None:
    """Under Keep a removed member's record stays stamped; when its name is used again the stamp goes,
    so a later policy change to Delete cannot take a live member's record."""
    keep = make_spec(1, slurm={"nodeOnScaleIn": "Keep"})
    reused = run(keep, [pod("gpu-0", keep)], {"gpu-0": slurm("gpu-0", "IDLE", comment=STAMP)})
    assert reused.unstamp == ["gpu-0"] and reused.stamp == []
    leaving = run(keep, [pod("gpu-0", keep, terminating=True)], {"gpu-0": slurm("gpu-0", comment=STAMP)})
    assert leaving.unstamp == []  # a terminating pod is on its way out: its stamp stays


def test_a_member_without_a_slurm_record_does_not_stop_the_stamping_of_the_next() -> None:
    """Scale-in from 3 to 1: gpu-1's slurmd never registered (no record), gpu-2's record must still get
    the removal stamp, so its record can be found and removed later."""
    spec = make_spec(1)
    pods = [pod("gpu-0", spec), pod("gpu-1", spec), pod("gpu-2", spec)]
    result = run(spec, pods, {"gpu-0": slurm("gpu-0", "ALLOCATED"), "gpu-2": slurm("gpu-2")})
    assert set(result.mark_removal) == {"gpu-1", "gpu-2"}
    assert result.stamp == ["gpu-2"]


def ended(name: str, spec: NodeSetSpec, phase: str = "Failed", **fields: Any) -> KubePod:
    """A pod that ended: evicted by the kubelet (Failed), or slurmd exited for good (Succeeded)."""
    return msgspec.structs.replace(pod(name, spec, ready=False, **fields), phase=phase)


def test_a_pod_that_ended_is_replaced() -> None:
    """review5 #3: an evicted pod (Failed) was a member for good, never deleted nor replaced. It is deleted
    at once, without a drain, and its name is held (no second pod) until the old object is gone."""
    spec = make_spec(2)
    gone = slurm("gpu-1", "DOWN", "NOT_RESPONDING", reason="Not responding")
    nodes = {"gpu-0": slurm("gpu-0"), "gpu-1": gone}
    result = run(spec, [pod("gpu-0", spec), ended("gpu-1", spec)], nodes)
    assert result.delete_pods == ["gpu-1"] and not result.idle
    assert result.ended == {"gpu-1": True}
    assert result.create == [] and result.mark_removal == {} and result.draining == []
    assert result.desired == 2
    # once it is gone, the member's pod comes back under the same name
    again = run(spec, [pod("gpu-0", spec)], nodes)
    assert [m.name for m in again.create] == ["gpu-1"]


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
@pytest.mark.parametrize("state", [("IDLE",), ("ALLOCATED",), ("IDLE", "DRAIN")])
def test_an_ended_pod_goes_whatever_slurm_shows_and_on_stale_data(phase: str, state: tuple[str, ...]) -> None:
    """Its containers ended: no job runs in it, so neither Slurm's view (slurmd gone before Slurm notices,
    a job Slurm still counts) nor stale data keeps it."""
    spec = make_spec(1)
    for fresh in (True, False):
        result = run(spec, [ended("gpu-0", spec, phase)], {"gpu-0": slurm("gpu-0", *state)}, fresh=fresh)
        assert result.delete_pods == ["gpu-0"] and result.ended == {"gpu-0": True}
        assert result.timed_out == [] and result.draining == []


def test_a_pod_that_ended_and_terminates_is_left_to_terminate() -> None:
    spec = make_spec(1)
    result = run(spec, [ended("gpu-0", spec, terminating=True)], {"gpu-0": slurm("gpu-0")})
    assert result.delete_pods == [] and result.ended == {} and result.create == [] and result.idle


def test_an_ended_pod_being_removed_goes_at_once_and_is_not_replaced() -> None:
    """Being scaled in (or marked in this pass): deleted without waiting for a drain, not a member."""
    spec = make_spec(1)
    busy = {"gpu-0": slurm("gpu-0"), "gpu-1": slurm("gpu-1", "ALLOCATED"), "gpu-2": slurm("gpu-2")}
    pods = [pod("gpu-0", spec), ended("gpu-1", spec, removal=SCALE_IN, since=NOW - 10**6)]
    result = run(spec, pods, busy)
    assert result.delete_pods == ["gpu-1"] and result.ended == {"gpu-1": False}
    assert result.draining == [] and result.timed_out == [] and result.create == []
    assert result.scale_in_marks == {"gpu-1"}
    # replicas lowered: the ended pod is the one chosen, and goes in the same pass
    lowered = run(spec, [pod("gpu-0", spec), ended("gpu-2", spec)], busy)
    assert lowered.mark_removal == {"gpu-2": SCALE_IN} and lowered.delete_pods == ["gpu-2"]
    assert lowered.ended == {"gpu-2": False} and lowered.draining == []


def test_daemonset_mode_replaces_an_ended_pod_too() -> None:
    spec = make_spec(mode="DaemonSet", nodeSelector={"pool": "a"})
    kube = [KubeNode(name="n1", labels={"pool": "a"})]
    name = member_name("gpu", "n1")
    result = run(spec, [ended(name, spec, "Succeeded")], {name: slurm(name)}, kube_nodes=kube)
    assert result.delete_pods == [name] and result.ended == {name: True} and result.create == []
