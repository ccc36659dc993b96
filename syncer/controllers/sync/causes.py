"""Kubernetes -> Slurm: why a bound Slurm node should be drained, recomputed from current state."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.reason import SEPARATOR, cap_utf8, sanitise, sanitise_capped
from syncer.model import Condition, KubeNode, KubePod
from syncer.model.keys import CORDONED_BY_SLURM, Keys

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


def drain_causes(
    pod: KubePod | None,
    node: KubeNode | None,
    *,
    now: float,
    opts: SyncOptions,
    scale_in_of: str | None = None,
    held: str | None = None,
) -> tuple[tuple[Cause, ...], float | None]:
    """The drain causes in a stable order, and when a pending Ready grace period runs out (else None).

    Order: cordon, not-ready, configured conditions (in option order), drain annotation on the pod, then
    on the Node, terminating pod, scale-in, the scheduler's hold (`held`: its text, syncer/control/holds.py).
    A text already present is not repeated.
    """
    found: list[Cause] = []
    recheck_at: float | None = None

    def add(kind: str, raw: str) -> None:
        # Each text is capped too: a 1 MB annotation must not travel into logs or the Decision.
        text = sanitise_capped(raw, opts.max_reason_bytes)
        if text and all(other.text != text for other in found):  # the same text twice adds nothing
            found.append(Cause(kind, text))

    if node is not None:
        # Our own echo of a Slurm drain is not a Kubernetes-side cause (no feedback loop).
        if node.unschedulable and node.annotations.get(Keys.CORDONED_BY) != CORDONED_BY_SLURM:
            raw = cordon_note(node, opts)
            note = sanitise_capped(raw, opts.max_reason_bytes)
            add(CORDON, note or CORDON_TEXT)
        ready = node.condition("Ready") or MISSING_READY
        if ready.status != "True":
            since = ready.last_transition_time if math.isfinite(ready.last_transition_time) else 0.0
            due = since + opts.ready_grace_s
            if now >= due:
                add(NOT_READY, condition_text(ready))
            else:
                recheck_at = due
        for type_, status in opts.drain_on_conditions:
            cond = node.condition(type_)
            if cond is not None and cond.status == status:
                add(CONDITION, condition_text(cond))
    for holder in (pod, node):
        if holder is not None and Keys.DRAIN_REQUEST in holder.annotations:
            request = sanitise_capped(holder.annotations[Keys.DRAIN_REQUEST], opts.max_reason_bytes)
            add(DRAIN_ANNOTATION, request or DEFAULT_DRAIN_TEXT)
    if pod is not None and pod.terminating:
        add(TERMINATING, f"pod {pod.namespace}/{pod.name} terminating")
    if scale_in_of is not None:
        add(SCALE_IN, f"scale-in of NodeSet {scale_in_of}")
    if held is not None:
        add(SCHEDULER_HOLD, held)
    return tuple(found), recheck_at


def compose_reason(causes: Iterable[Cause], opts: SyncOptions) -> str:
    """`<owner_prefix><cause>; <cause>`, sanitised and capped at `opts.max_reason_bytes` (prefix included)."""
    texts = [text for text in (sanitise(cause.text) for cause in causes) if text]
    full = opts.owner_prefix + SEPARATOR.join(texts)
    reason = cap_utf8(full, opts.max_reason_bytes)
    if len(reason) == len(full):
        return full
    # A cut may end in a space or a dangling separator; drop it so the text reads cleanly.
    return opts.owner_prefix + reason[len(opts.owner_prefix) :].rstrip(" ;")


def is_ours(reason: str, opts: SyncOptions) -> bool:
    """A reason the syncer wrote (and so may change or clear)."""
    return reason.startswith(opts.owner_prefix)
