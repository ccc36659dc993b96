"""Which Nodes a pod fits, and kube-scheduler's message when none does.

The filters the fake scheduler applies, in kube-scheduler's plugin order (the first that fails names
the Node's reason): NodeUnschedulable (a cordoned Node), TaintToleration (NoSchedule/NoExecute taints,
including those the node lifecycle controller puts on a Node whose Ready is False or Unknown), and
NodeAffinity (`nodeSelector` and required node affinity), and NodeResourcesFit (room.py: `Too many pods`,
`Insufficient <resource>` against the Node's allocatable less what the pods bound there request).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from syncer.testing.kubeapi import room
from syncer.testing.kubeapi.selectors import Requirement

NO_NODES = "no nodes available to schedule pods"
UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
_FILTERING = ("NoSchedule", "NoExecute")
_SET_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}


def misfits(
    pod: dict[str, Any], node: dict[str, Any], holders: int, others: Callable[[], list[dict[str, Any]]]
) -> list[str]:
    """Why `node` (`holders` pods holding room there, listed by `others()`) cannot take `pod`: the first
    failing filter's reasons, as kube-scheduler words them; [] when it fits."""
    why = misfit(pod, node)
    if why is not None:
        return [why]
    return [
        "Too many pods" if name == "pods" else f"Insufficient {name}"
        for name, *_ in room.shortfalls(pod, node, holders, others)
    ]


def misfit(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    """Why `node` cannot take `pod` by its filters before resources, as kube-scheduler words it."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not _tolerated(
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}, tolerations
    ):
        return UNSCHEDULABLE
    for taint in _taints(node):
        if taint.get("effect") in _FILTERING and not _tolerated(taint, tolerations):
            return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
    if not _affinity_matches(spec, node):
        return AFFINITY
    return None


def unschedulable_message(per_node: Iterable[list[str]]) -> str:
    """kube-scheduler's PodScheduled message for a pod no Node fits, from each Node's reasons."""
    nodes = list(per_node)
    if not nodes:
        return NO_NODES
    counts = Counter(why for reasons in nodes for why in reasons)
    reasons = ", ".join(sorted(f"{n} {why}" for why, n in counts.items()))
    # filters but NodeResourcesFit are UnschedulableAndUnresolvable: evicting pods would not help; where
    # room is short, preemption looks for lower-priority pods and the emulator's have none lower
    short = sum(1 for r in nodes if r[0] == "Too many pods" or r[0].startswith("Insufficient "))
    verdicts = (
        [f"{len(nodes) - short} Preemption is not helpful for scheduling"] if short < len(nodes) else []
    )
    verdicts += [f"{short} No preemption victims found for incoming pod"] if short else []
    return (
        f"0/{len(nodes)} nodes are available: {reasons}. "
        f"preemption: 0/{len(nodes)} nodes are available: {', '.join(sorted(verdicts))}."
    )


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The Node's taints, plus the one the node lifecycle controller adds while it is not Ready."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    ready = next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None
    )
    status = ready.get("status") if ready else "False"
    implied = {"False": "node.kubernetes.io/not-ready", "Unknown": "node.kubernetes.io/unreachable"}.get(
        status
    )
    if implied and not any(t.get("key") == implied for t in taints):
        taints.append({"key": implied, "effect": "NoSchedule"})
    return taints


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _affinity_matches(spec: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    if not required:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    # terms are ORed; within a term every expression must hold; an empty term matches nothing
    return any(
        (term.get("matchExpressions") or term.get("matchFields"))
        and all(_expression(e, labels) for e in term.get("matchExpressions") or [])
        and all(_expression(e, fields) for e in term.get("matchFields") or [])
        for term in required.get("nodeSelectorTerms") or []
    )


def _expression(expr: dict[str, Any], values: dict[str, str]) -> bool:
    key, op, wanted = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op in _SET_OPS:
        return Requirement(key, _SET_OPS[op], frozenset(wanted)).matches(values)
    if op in ("Gt", "Lt") and key in values and len(wanted) == 1:
        try:
            have, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False
