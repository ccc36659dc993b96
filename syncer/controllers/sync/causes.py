"""Kubernetes -> Slurm: why a bound Slurm node should be drained, recomputed from current state, and the
Slurm reason those causes compose: found here in order, their texts cleaned and composed by
syncer/model/reason.py."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from syncer.controllers.sync.options import SyncOptions
from syncer.model import Condition, KubeNode, KubePod
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.model.reason import compose, distinct

CORDON: Final = "cordon"
# One text for every cordon without a reason annotation: a rack cordoned at once is one bulk drain in
# Slurm (its bulk update takes one reason); the Node stays named by the pod's spec.nodeName.
CORDON_TEXT: Final = "Node cordoned"
NOT_READY: Final = "not-ready"
CONDITION: Final = "condition"
DRAIN_ANNOTATION: Final = "drain-annotation"
TERMINATING: Final = "terminating"
SCALE_IN: Final = "scale-in"
# the one-pool scheduler holds the node while a pod whose Slurm job ended still terminates there
SCHEDULER_HOLD: Final = "scheduler-hold"
KINDS: Final = (CORDON, NOT_READY, CONDITION, DRAIN_ANNOTATION, TERMINATING, SCALE_IN, SCHEDULER_HOLD)
# What the safety valve may hold back: health signals that can go wrong on many nodes at once (a partition,
# a flapping check). The other kinds are someone's explicit intent and are never held back nor counted.
AUTOMATIC: Final = frozenset({NOT_READY, CONDITION})
EXPLICIT: Final = frozenset(KINDS) - AUTOMATIC

DEFAULT_DRAIN_TEXT: Final = "drain requested via annotation"
# Stands in for a Node that reports no Ready condition at all: not ready since forever.
MISSING_READY: Final = Condition(
    type="Ready", status="Unknown", reason="NoReadyCondition", message="Node reports no Ready condition"
)


@dataclass(frozen=True)
class Cause:
    """One reason to drain: `kind` is one of KINDS, `text` is sanitised and goes into the Slurm reason."""

    kind: str
    text: str


def is_automatic(causes: tuple[Cause, ...]) -> bool:
    """A drain for these causes is automatic (the valve limits it) when every cause is automatic;
    one explicit cause makes it an operator's or a controller's intent."""
    return bool(causes) and all(cause.kind in AUTOMATIC for cause in causes)


def condition_text(cond: Condition) -> str:
    """`(Type: Reason: Message)`; an empty reason shows the status, an empty message is left out."""
    parts = [cond.type, cond.reason or cond.status]
    if cond.message:
        parts.append(cond.message)
    return "(" + ": ".join(parts) + ")"


def cordon_note(node: KubeNode, opts: SyncOptions) -> str:
    """Why the Node was cordoned, as its cordoner wrote it: the first reason annotation present, else the
    first reason label (NVSentinel writes its reason as a label); "" when none says."""
    for holder, keys in (
        (node.annotations, opts.cordon_reason_annotations),
        (node.labels, opts.cordon_reason_labels),
    ):
        for key in keys:
            if holder.get(key):
                return holder[key]
    return ""


@dataclass(frozen=True)
class Drain:
    """The drain side of one decision: what `decide` asks of this module, in one call."""

    causes: tuple[Cause, ...]  # in a stable order (drain_causes)
    recheck_at: float | None  # when a pending Ready grace period runs out
    reason: str  # the Slurm reason the causes compose: `<owner_prefix><cause>; <cause>`, capped ("": none)
    automatic: bool  # every cause automatic (`is_automatic`): the safety valve may hold its drain back


def drain_causes(
    pod: KubePod | None,
    node: KubeNode | None,
    *,
    now: float,
    opts: SyncOptions,
    scale_in_of: str | None = None,
    held: str | None = None,
) -> Drain:
    """The drain causes in a stable order, when a pending Ready grace period runs out (else None), and the
    reason they compose, capped at `opts.max_reason_bytes` (prefix included; "" without a cause), and
    whether they are all automatic (what the safety valve may hold back).

    Order: cordon, not-ready, configured conditions (in option order), drain annotation on the pod, then
    on the Node, terminating pod, scale-in, the scheduler's hold (`held`: its text, syncer/control/holds.py).
    Each text is sanitised and capped too (a 1 MB annotation must not travel into logs or the Decision); a
    text already present is not repeated.
    """
    found, recheck_at = _found(pod, node, now=now, opts=opts, scale_in_of=scale_in_of, held=held)
    causes = tuple(Cause(kind, text) for kind, text in distinct(found, opts.max_reason_bytes))
    # most reconciles find no cause: nothing to compose then
    reason = compose(opts.owner_prefix, [c.text for c in causes], opts.max_reason_bytes) if causes else ""
    return Drain(causes, recheck_at, reason, is_automatic(causes))


def _found(
    pod: KubePod | None,
    node: KubeNode | None,
    *,
    now: float,
    opts: SyncOptions,
    scale_in_of: str | None,
    held: str | None,
) -> tuple[list[tuple[str, str, str | None]], float | None]:
    """Each cause that holds, in order, as (kind, raw text, the text standing in where nothing is left of the
    raw one once sanitised), and when a pending Ready grace period runs out."""
    found: list[tuple[str, str, str | None]] = []
    recheck_at: float | None = None
    if node is not None:
        # Our own echo of a Slurm drain is not a Kubernetes-side cause (no feedback loop).
        if node.unschedulable and node.annotations.get(Keys.CORDONED_BY) != CORDONED_BY_SLURM:
            found.append((CORDON, cordon_note(node, opts), CORDON_TEXT))
        ready = node.condition("Ready") or MISSING_READY
        if ready.status != "True":
            since = ready.last_transition_time if math.isfinite(ready.last_transition_time) else 0.0
            due = since + opts.ready_grace_s
            if now >= due:
                found.append((NOT_READY, condition_text(ready), None))
            else:
                recheck_at = due
        for type_, status in opts.drain_on_conditions:
            cond = node.condition(type_)
            if cond is not None and cond.status == status:
                found.append((CONDITION, condition_text(cond), None))
    for holder in (pod, node):
        if holder is not None and Keys.DRAIN_REQUEST in holder.annotations:
            found.append((DRAIN_ANNOTATION, holder.annotations[Keys.DRAIN_REQUEST], DEFAULT_DRAIN_TEXT))
    # a pod deleted by a power-managed NodeSet because Slurm powered the node down: a drain would only keep
    # Slurm from powering it up again
    if pod is not None and pod.terminating and Keys.POWER_DOWN not in pod.annotations:
        found.append((TERMINATING, f"pod {pod.namespace}/{pod.name} terminating", None))
    if scale_in_of is not None:
        found.append((SCALE_IN, f"scale-in of NodeSet {scale_in_of}", None))
    if held is not None:
        found.append((SCHEDULER_HOLD, held, None))
    return found, recheck_at
