"""Whether a pod fits a Node, as kube-scheduler's filters decide it, in their order: NodeUnschedulable,
TaintToleration (NoSchedule and NoExecute), NodeAffinity (nodeSelector and required node affinity), then
NodeResourcesFit (every resource the pod requests, and the pod count, against the Node's allocatable less
what the pods already there request). The first filter that fails gives the reasons, worded as
kube-scheduler words them in `0/N nodes are available: ...`. Pure: the caller reads the pods on the Node
(SchedulingReads.pods_on_node)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from syncer.model.kube import (
    KubeNode,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodUsage,
    SchedulerPod,
    Taint,
)

UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
_UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(pod: SchedulerPod, taint: Taint) -> bool:
    """v1.Toleration.ToleratesTaint: effect (empty: any), key (empty with Exists: any), then value."""
    for toleration in pod.tolerations:
        if toleration.effect and toleration.effect != taint.effect:
            continue
        if toleration.key and toleration.key != taint.key:
            continue
        if toleration.operator == "Exists" or toleration.value == taint.value:
            return True
    return False


def label_selects(operator: str, wanted: Sequence[str], value: str | None) -> bool:
    """One node selector requirement's operator on the value of its key (None: the Node has no such key), as
    k8s.io/component-helpers nodeaffinity reads it; an unknown operator selects nothing."""
    if operator == "In":
        return value is not None and value in wanted
    if operator == "NotIn":
        return value not in wanted
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(wanted) == 1:
        try:
            have, bound = int(value), int(wanted[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _requirement(requirement: NodeSelectorRequirement, values: dict[str, str]) -> bool:
    return label_selects(requirement.operator, requirement.values, values.get(requirement.key))


def _term(term: NodeSelectorTerm, node: KubeNode) -> bool:
    """All of the term's requirements; a term without any matches no Node."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(_requirement(r, node.labels) for r in term.match_expressions) and all(
        _requirement(r, {"metadata.name": node.name}) for r in term.match_fields
    )


def affinity_matches(pod: SchedulerPod, node: KubeNode) -> bool:
    """nodeSelector (every label equal) and required node affinity (any of its terms)."""
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    return not pod.affinity or any(_term(term, node) for term in pod.affinity)


def insufficient(pod: SchedulerPod, node: KubeNode, on_node: Iterable[PodUsage]) -> list[str]:
    """NodeResourcesFit: `Too many pods`, then `Insufficient <resource>` for each resource short."""
    others = [p for p in on_node if p.uid != pod.uid and p.phase not in ("Succeeded", "Failed")]
    reasons = []
    if len(others) + 1 > node.allocatable.get("pods", 0):
        reasons.append(TOO_MANY_PODS)
    used: dict[str, int] = {}
    for other in others:
        for name, value in other.requests.items():
            used[name] = used.get(name, 0) + value
    for name, wanted in sorted(pod.requests.items()):
        if wanted > 0 and wanted > node.allocatable.get(name, 0) - used.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def misfits(pod: SchedulerPod, node: KubeNode, on_node: Iterable[PodUsage]) -> tuple[str, ...]:
    """Why `pod` cannot be bound to `node` beside the pods `on_node`: the first failing filter's reasons;
    () when it fits."""
    if node.unschedulable and not tolerates(pod, _UNSCHEDULABLE_TAINT):
        return (UNSCHEDULABLE,)
    for taint in node.taints:
        if taint.effect in _FILTERED_EFFECTS and not tolerates(pod, taint):
            return (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}",)
    if not affinity_matches(pod, node):
        return (AFFINITY,)
    return tuple(insufficient(pod, node, on_node))
