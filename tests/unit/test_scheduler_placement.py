"""What kube-scheduler (and the kubelet's admission) would say of a pod on a Node: cordon, taints, node
selector and required node affinity, resources beside the pods already there, the pod count."""

from __future__ import annotations

import pytest

from syncer.controllers.scheduler.placement import misfit, placed, tolerates, usage
from syncer.controllers.scheduler.values import (
    Container,
    Node,
    Pod,
    Requirement,
    SelectorTerm,
    Taint,
    Toleration,
)

NODE = Node(name="k1", labels={"zone": "a", "gen": "5"}, allocatable={"cpu": 4000, "memory": 8, "pods": 10})
REQ = {"cpu": 1000, "memory": 1}


def pod(**more: object) -> Pod:
    return Pod(namespace="ns", name="p", uid="u", **more)  # type: ignore[arg-type]


def test_fits_an_empty_node() -> None:
    assert misfit(pod(), REQ, NODE) == ""
    assert misfit(pod(), {"cpu": 4000, "memory": 8}, NODE) == ""  # all of it
    assert misfit(pod(), {"cpu": 4001}, NODE) == "Insufficient cpu"


def test_cordoned_unless_tolerated() -> None:
    cordoned = Node(name="k1", allocatable=NODE.allocatable, unschedulable=True)
    assert misfit(pod(), REQ, cordoned) == "node(s) were unschedulable"
    tolerating = (Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),)
    assert misfit(pod(tolerations=tolerating), REQ, cordoned) == ""


def test_taints() -> None:
    tainted = Node(
        name="k1", allocatable=NODE.allocatable, taints=(Taint(key="gpu", value="yes", effect="NoSchedule"),)
    )
    assert misfit(pod(), REQ, tainted) == "node(s) had untolerated taint {gpu: yes}"
    assert misfit(pod(tolerations=(Toleration(key="gpu", value="yes"),)), REQ, tainted) == ""
    assert misfit(pod(tolerations=(Toleration(key="gpu", operator="Exists"),)), REQ, tainted) == ""
    assert (
        misfit(pod(tolerations=(Toleration(operator="Exists"),)), REQ, tainted) == ""
    )  # tolerates everything
    assert misfit(pod(tolerations=(Toleration(key="gpu", value="no"),)), REQ, tainted) != ""
    assert (
        misfit(pod(tolerations=(Toleration(key="gpu", value="yes", effect="NoExecute"),)), REQ, tainted) != ""
    )
    execute = Node(name="k1", allocatable=NODE.allocatable, taints=(Taint(key="x", effect="NoExecute"),))
    assert misfit(pod(), REQ, execute) == "node(s) had untolerated taint {x: }"
    prefer = Node(
        name="k1", allocatable=NODE.allocatable, taints=(Taint(key="x", effect="PreferNoSchedule"),)
    )
    assert misfit(pod(), REQ, prefer) == ""


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration(key="k", operator="Equal", value="v"), Taint(key="k", value="v"), True),
        (Toleration(key="k", operator="", value="v"), Taint(key="k", value="v"), True),
        (Toleration(key="k", operator="Equal", value="v"), Taint(key="k", value="w"), False),
        (Toleration(key="k", operator="Exists"), Taint(key="k", value="w"), True),
        (Toleration(key="j", operator="Exists"), Taint(key="k"), False),
        (Toleration(operator="Exists", effect="NoSchedule"), Taint(key="k", effect="NoExecute"), False),
        (Toleration(operator="Exists", effect="NoExecute"), Taint(key="k", effect="NoExecute"), True),
        (Toleration(key="k", operator="Lt", value="v"), Taint(key="k", value="v"), False),  # unknown operator
        (Toleration(operator="Equal"), Taint(key="k"), True),  # empty key and value: Kubernetes matches
    ],
)
def test_tolerates(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_node_selector() -> None:
    assert misfit(pod(node_selector={"zone": "a"}), REQ, NODE) == ""
    assert (
        misfit(pod(node_selector={"zone": "b"}), REQ, NODE)
        == "node(s) didn't match Pod's node affinity/selector"
    )
    assert misfit(pod(node_selector={"rack": "a"}), REQ, NODE) != ""


def term(*expressions: Requirement, fields: tuple[Requirement, ...] = ()) -> SelectorTerm:
    return SelectorTerm(match_expressions=expressions, match_fields=fields)


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (Requirement(key="zone", operator="In", values=("a", "b")), True),
        (Requirement(key="zone", operator="In", values=("b",)), False),
        (Requirement(key="rack", operator="In", values=("a",)), False),
        (Requirement(key="zone", operator="NotIn", values=("b",)), True),
        (Requirement(key="zone", operator="NotIn", values=("a",)), False),
        (Requirement(key="rack", operator="NotIn", values=("a",)), True),
        (Requirement(key="zone", operator="Exists"), True),
        (Requirement(key="rack", operator="Exists"), False),
        (Requirement(key="rack", operator="DoesNotExist"), True),
        (Requirement(key="zone", operator="DoesNotExist"), False),
        (Requirement(key="gen", operator="Gt", values=("4",)), True),
        (Requirement(key="gen", operator="Gt", values=("5",)), False),
        (Requirement(key="gen", operator="Lt", values=("6",)), True),
        (Requirement(key="gen", operator="Lt", values=("5",)), False),
        (Requirement(key="zone", operator="Gt", values=("4",)), False),  # not a number
        (Requirement(key="gen", operator="Gt", values=("x",)), False),
        (Requirement(key="gen", operator="Gt", values=("1", "2")), False),  # exactly one value
        (Requirement(key="rack", operator="Lt", values=("9",)), False),
        (Requirement(key="zone", operator="Near", values=("a",)), False),
    ],
)
def test_affinity_expressions(requirement: Requirement, expected: bool) -> None:
    assert (misfit(pod(affinity=(term(requirement),)), REQ, NODE) == "") is expected


def test_affinity_terms_and_fields() -> None:
    no = Requirement(key="zone", operator="In", values=("b",))
    yes = Requirement(key="zone", operator="In", values=("a",))
    assert misfit(pod(affinity=(term(no), term(yes))), REQ, NODE) == ""  # terms are ORed
    assert misfit(pod(affinity=(term(yes, no),)), REQ, NODE) != ""  # requirements ANDed
    assert misfit(pod(affinity=(term(),)), REQ, NODE) != ""  # an empty term matches nothing
    by_name = Requirement(key="metadata.name", operator="In", values=("k1",))
    assert misfit(pod(affinity=(term(fields=(by_name,)),)), REQ, NODE) == ""
    other = Requirement(key="metadata.name", operator="In", values=("k2",))
    assert misfit(pod(affinity=(term(yes, fields=(other,)),)), REQ, NODE) != ""
    assert (
        misfit(pod(affinity=(term(fields=(Requirement(key="zone", operator="Exists"),)),)), REQ, NODE) != ""
    )


def test_resources_beside_the_pods_there() -> None:
    busy = Node(name="k1", allocatable=NODE.allocatable, requested={"cpu": 3000, "memory": 7}, pods=3)
    assert misfit(pod(), REQ, busy) == ""  # exactly full
    assert misfit(pod(), {"cpu": 1001, "memory": 1}, busy) == "Insufficient cpu"
    assert misfit(pod(), {"cpu": 1001, "memory": 2}, busy) == "Insufficient cpu, Insufficient memory"
    assert misfit(pod(), {"cpu": 1, "nvidia.com/gpu": 1}, busy) == "Insufficient nvidia.com/gpu"
    full = Node(name="k1", allocatable=NODE.allocatable, pods=10)
    assert misfit(pod(), REQ, full) == "Too many pods"
    assert misfit(pod(), REQ, Node(name="k1", allocatable=NODE.allocatable, pods=9)) == ""
    assert misfit(pod(), REQ, Node(name="k1", allocatable={"cpu": 4000, "memory": 8})) == "Too many pods"


def test_placed_counts_the_pod() -> None:
    after = placed(NODE, {"cpu": 1000, "x": 2})
    assert after.requested == {"cpu": 1000, "x": 2}
    assert after.pods == 1
    again = placed(after, {"cpu": 500})
    assert again.requested == {"cpu": 1500, "x": 2}
    assert again.pods == 2
    assert again.allocatable == NODE.allocatable
    assert NODE.requested == {}


def test_usage_of_the_pods_on_a_node() -> None:
    two = (Container(requests={"cpu": "500m", "memory": "1Ki"}),)
    pods = [
        pod(containers=two),
        pod(containers=two, deleting=True),  # still there until gone
        pod(containers=two, phase="Succeeded"),
        pod(containers=two, phase="Failed"),
        pod(containers=(Container(requests={"nvidia.com/gpu": "1"}),), phase="Running"),
    ]
    assert usage(pods) == ({"cpu": 1000, "memory": 2048, "nvidia.com/gpu": 1}, 3)
    assert usage([]) == ({}, 0)
