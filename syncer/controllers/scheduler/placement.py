"""Would kube-scheduler (and the kubelet's admission) take this pod on this Node? The filters that decide
whether a pod bound where Slurm placed it can run there: NodeUnschedulable, TaintToleration,
NodeAffinity (nodeSelector and required node affinity) and NodeResourcesFit (requests beside those of the
pods already there, and the pod count). Not checked: host ports, volumes' zones, inter-pod affinity and
topology spread (Slurm chooses the node; docs/scheduler.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Final

from syncer.controllers.scheduler.request import canonical_requests
from syncer.controllers.scheduler.values import (
    TERMINAL_PHASES,
    Node,
    Pod,
    Requirement,
    SelectorTerm,
    Taint,
    Toleration,
)
from syncer.model.fit import label_selects

UNSCHEDULABLE_TAINT: Final = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
FILTERED_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})  # PreferNoSchedule only scores
PODS: Final = "pods"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """k8s.io/api's Toleration.ToleratesTaint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.operator in ("", "Equal") and toleration.value == taint.value


def _tolerated(pod: Pod, taint: Taint) -> bool:
    return any(tolerates(toleration, taint) for toleration in pod.tolerations)


def _matches(requirement: Requirement, value: str | None) -> bool:
    return label_selects(requirement.operator, requirement.values, value)


def _term_matches(term: SelectorTerm, node: Node) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term matches no object (k8s.io/component-helpers nodeaffinity)
    fields = {"metadata.name": node.name}
    return all(_matches(r, node.labels.get(r.key)) for r in term.match_expressions) and all(
        _matches(r, fields.get(r.key)) for r in term.match_fields
    )


def _selects(pod: Pod, node: Node) -> bool:
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    return not pod.affinity or any(_term_matches(term, node) for term in pod.affinity)


def _short(resources: Mapping[str, int], node: Node) -> list[str]:
    """The resources the Node lacks for `resources` beside what its pods already request."""
    return sorted(
        name
        for name, amount in resources.items()
        if amount > node.allocatable.get(name, 0) - node.requested.get(name, 0)
    )


def misfit(pod: Pod, requests: Mapping[str, int], node: Node) -> str:
    """Why kube-scheduler would not place `pod` (requesting `requests`, canonical) on `node`; "" if it would.
    The texts are kube-scheduler's own."""
    if node.unschedulable and not _tolerated(pod, UNSCHEDULABLE_TAINT):
        return "node(s) were unschedulable"
    for taint in node.taints:
        if taint.effect in FILTERED_EFFECTS and not _tolerated(pod, taint):
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    if not _selects(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    if node.pods + 1 > node.allocatable.get(PODS, 0):
        return "Too many pods"
    short = _short(requests, node)
    if short:
        return ", ".join(f"Insufficient {name}" for name in short)
    return ""


def placed(node: Node, requests: Mapping[str, int]) -> Node:
    """The Node as it is once the pod is bound there (for the next pod of a gang sent to the same Node)."""
    used = dict(node.requested)
    for name, amount in requests.items():
        used[name] = used.get(name, 0) + amount
    return replace(node, requested=used, pods=node.pods + 1)


def usage(pods: Iterable[Pod]) -> tuple[dict[str, int], int]:
    """What the pods bound to a Node take from it as kube-scheduler counts (its `requested` and `pods`): every
    pod not in a terminal phase, terminating ones included, whatever scheduler placed it."""
    return summed(canonical_requests(pod) for pod in pods if pod.phase not in TERMINAL_PHASES)


def summed(requests: Iterable[Mapping[str, int]]) -> tuple[dict[str, int], int]:
    """Pods' requests added up by resource, and how many pods (a Node's `requested` and `pods`)."""
    used: dict[str, int] = {}
    count = 0
    for one in requests:
        count += 1
        for name, amount in one.items():
            used[name] = used.get(name, 0) + amount
    return used, count
