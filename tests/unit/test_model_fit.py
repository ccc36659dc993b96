"""kube-scheduler's filters as the bind check applies them (syncer/model/fit.py): one rule per test."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from syncer.model import fit
from syncer.model.kube import (
    KubeNode,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodUsage,
    SchedulerPod,
    Taint,
    Toleration,
)

ROOM = {"cpu": 8000, "memory": 64 * 2**30, "nvidia.com/gpu": 4, "pods": 110}


def node(**fields: Any) -> KubeNode:
    return KubeNode(
        **{"name": "n1", "allocatable": dict(ROOM), "labels": {"zone": "a", "rank": "5"}, **fields}
    )


def pod(**fields: Any) -> SchedulerPod:
    return SchedulerPod(**{"namespace": "ns", "name": "p", "uid": "u", "requests": {"cpu": 1000}, **fields})


def usage(name: str, **requests: int) -> PodUsage:
    return PodUsage(namespace="ns", name=name, uid=name, requests=dict(requests))


def test_a_pod_fits_an_empty_node() -> None:
    assert fit.misfits(pod(), node(), []) == ()


def test_a_cordoned_node_unless_tolerated() -> None:
    assert fit.misfits(pod(), node(unschedulable=True), []) == (fit.UNSCHEDULABLE,)
    tolerant = Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")
    assert fit.misfits(pod(tolerations=(tolerant,)), node(unschedulable=True), []) == ()


def test_untolerated_noschedule_and_noexecute_taints_but_not_prefer() -> None:
    for effect in ("NoSchedule", "NoExecute"):
        tainted = node(taints=(Taint(key="gpu", value="a100", effect=effect),))
        assert fit.misfits(pod(), tainted, []) == ("node(s) had untolerated taint {gpu: a100}",)
    assert fit.misfits(pod(), node(taints=(Taint(key="gpu", effect="PreferNoSchedule"),)), []) == ()


def test_toleration_matching() -> None:
    taint = Taint(key="gpu", value="a100", effect="NoSchedule")
    assert fit.tolerates(pod(tolerations=(Toleration(key="gpu", value="a100"),)), taint)
    assert fit.tolerates(pod(tolerations=(Toleration(key="gpu", operator="Exists"),)), taint)
    assert fit.tolerates(pod(tolerations=(Toleration(operator="Exists"),)), taint)  # every key
    assert fit.tolerates(pod(tolerations=(Toleration(key="gpu", value="a100", effect="NoSchedule"),)), taint)
    assert not fit.tolerates(pod(tolerations=(Toleration(key="gpu", value="h100"),)), taint)
    assert not fit.tolerates(
        pod(tolerations=(Toleration(key="gpu", value="a100", effect="NoExecute"),)), taint
    )
    assert not fit.tolerates(pod(tolerations=(Toleration(key="other", operator="Exists"),)), taint)
    assert not fit.tolerates(pod(), taint)
    # any one toleration that matches will do, whichever comes first
    others_first = (Toleration(key="other", operator="Exists"), Toleration(key="gpu", operator="Exists"))
    assert fit.tolerates(pod(tolerations=others_first), taint)
    wrong_effect_first = (
        Toleration(key="gpu", operator="Exists", effect="NoExecute"),
        Toleration(key="gpu", value="a100"),
    )
    assert fit.tolerates(pod(tolerations=wrong_effect_first), taint)
    tainted = node(taints=(taint,))
    assert fit.misfits(pod(tolerations=(Toleration(key="gpu", operator="Exists"),)), tainted, []) == ()


def term(*requirements: tuple[str, str, tuple[str, ...]], fields: tuple[Any, ...] = ()) -> NodeSelectorTerm:
    made = tuple(NodeSelectorRequirement(key=k, operator=o, values=v) for k, o, v in requirements)
    return NodeSelectorTerm(match_expressions=made, match_fields=fields)


def test_node_selector_and_required_affinity() -> None:
    assert fit.misfits(pod(node_selector={"zone": "b"}), node(), []) == (fit.AFFINITY,)
    assert fit.misfits(pod(node_selector={"zone": "a"}), node(), []) == ()
    cases = {
        ("zone", "In", ("a", "b")): True, ("zone", "In", ("b",)): False, ("zone", "NotIn", ("b",)): True,
        ("zone", "NotIn", ("a",)): False, ("missing", "NotIn", ("a",)): True, ("zone", "Exists", ()): True,
        ("missing", "Exists", ()): False, ("missing", "DoesNotExist", ()): True,
        ("zone", "DoesNotExist", ()): False,
        ("rank", "Gt", ("4",)): True, ("rank", "Gt", ("5",)): False, ("rank", "Lt", ("6",)): True,
        ("rank", "Lt", ("5",)): False, ("zone", "Gt", ("1",)): False, ("rank", "Gt", ("x",)): False,
        ("missing", "Gt", ("1",)): False, ("rank", "Gt", ("1", "2")): False, ("zone", "Bogus", ("a",)): False,
    }  # fmt: skip
    for requirement, fits in cases.items():
        assert fit.affinity_matches(pod(affinity=(term(requirement),)), node()) is fits, requirement
    # terms are ORed, requirements within a term ANDed; an empty term matches nothing
    either = (term(("zone", "In", ("b",))), term(("zone", "In", ("a",))))
    assert fit.affinity_matches(pod(affinity=either), node())
    both = (term(("zone", "In", ("a",)), ("rank", "Gt", ("9",))),)
    assert not fit.affinity_matches(pod(affinity=both), node())
    assert not fit.affinity_matches(pod(affinity=(NodeSelectorTerm(),)), node())
    by_name = NodeSelectorRequirement(key="metadata.name", operator="In", values=("n1",))
    assert fit.affinity_matches(pod(affinity=(term(fields=(by_name,)),)), node())
    assert not fit.affinity_matches(pod(affinity=(term(fields=(by_name,)),)), node(name="n2"))


def test_resources_beside_the_pods_already_there() -> None:
    greedy = pod(requests={"cpu": 2000, "nvidia.com/gpu": 2})
    assert fit.misfits(greedy, node(), [usage("a", cpu=6000, **{"nvidia.com/gpu": 2})]) == ()
    assert fit.misfits(greedy, node(), [usage("a", cpu=6001)]) == ("Insufficient cpu",)
    assert fit.misfits(greedy, node(), [usage("a", cpu=3000), usage("b", cpu=3001)]) == ("Insufficient cpu",)
    short = [usage("a", cpu=7000), usage("b", **{"nvidia.com/gpu": 3})]
    assert fit.misfits(greedy, node(), short) == ("Insufficient cpu", "Insufficient nvidia.com/gpu")
    # a resource the Node does not have at all; a zero request needs nothing
    assert fit.misfits(pod(requests={"example.com/fpga": 1}), node(), []) == (
        "Insufficient example.com/fpga",
    )
    assert fit.misfits(pod(requests={"example.com/fpga": 0}), node(), []) == ()
    # a Node already over-committed (bound by someone else) still takes a pod that asks for none of it
    over = [usage("a", cpu=9000)]
    assert fit.misfits(pod(requests={"cpu": 0, "memory": 1}), node(), over) == ()


def test_ended_pods_and_the_pod_itself_hold_nothing() -> None:
    me = pod(requests={"cpu": 8000})
    ended = PodUsage(namespace="ns", name="d", uid="d", phase="Succeeded", requests={"cpu": 8000})
    failed = PodUsage(namespace="ns", name="f", uid="f", phase="Failed", requests={"cpu": 8000})
    myself = PodUsage(namespace="ns", name="p", uid="u", requests={"cpu": 8000})
    assert fit.misfits(me, node(), [ended, failed, myself]) == ()
    held = PodUsage(namespace="ns", name="t", uid="t", terminating=True, requests={"cpu": 1})
    assert fit.misfits(me, node(), [held]) == ("Insufficient cpu",)  # terminating still holds its room


def test_the_pod_count() -> None:
    full = node(allocatable={**ROOM, "pods": 2})
    assert fit.misfits(pod(), full, [usage("a")]) == ()
    assert fit.misfits(pod(), full, [usage("a"), usage("b")]) == (fit.TOO_MANY_PODS,)
    assert (
        fit.misfits(pod(), node(allocatable={"cpu": 8000}), []) == (fit.TOO_MANY_PODS, "Insufficient cpu")[:1]
    )


def test_the_first_failing_filter_names_the_reason() -> None:
    everything = node(unschedulable=True, taints=(Taint(key="t", effect="NoSchedule"),))
    assert fit.misfits(pod(requests={"cpu": 10**6}, node_selector={"x": "y"}), everything, []) == (
        fit.UNSCHEDULABLE,
    )
    tainted = node(taints=(Taint(key="t", effect="NoSchedule"),))
    assert fit.misfits(pod(node_selector={"x": "y"}), tainted, []) == ("node(s) had untolerated taint {t: }",)
    assert fit.misfits(pod(requests={"cpu": 10**6}, node_selector={"x": "y"}), node(), []) == (fit.AFFINITY,)


@given(
    wanted=st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(0, 10**11)),
    used=st.lists(
        st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(0, 10**11)),
        max_size=5,
    ),
)
def test_resources_fit_exactly_when_each_request_is_within_what_is_left(
    wanted: dict[str, int], used: list[dict[str, int]]
) -> None:
    others = [usage(f"o{i}", **requests) for i, requests in enumerate(used)]
    left = {name: ROOM[name] - sum(u.get(name, 0) for u in used) for name in ROOM}
    short = sorted(name for name, value in wanted.items() if value > 0 and value > left[name])
    assert fit.misfits(pod(requests=wanted), node(), others) == tuple(f"Insufficient {n}" for n in short)
