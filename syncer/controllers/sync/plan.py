"""The pure sync decision for one bound Slurm node: what to write on each side, given both sides now.

Level-triggered: the same inputs always give the same Decision, and applying it then deciding again gives
no further Slurm action (see tests/unit/test_sync_decide.py). No I/O, no clock: `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from syncer.controllers.sync.causes import Cause, Drain, drain_causes
from syncer.controllers.sync.options import SyncOptions
from syncer.controllers.sync.shown import Shown, shown
from syncer.model import Condition, KubeNode, KubePod, SlurmNode
from syncer.model.keys import CORDONED_BY_SLURM, Keys
from syncer.model.reason import MAX_MESSAGE_BYTES, sanitise_capped
from syncer.model.slurm import DRAIN_FLAGS, unhealthy_flags

SlurmActionKind = Literal["drain", "undrain"]
CordonAction = Literal["cordon", "uncordon"]
EventType = Literal["Normal", "Warning"]
Target = Literal["pod", "node"]

# Condition reasons (SlurmNodeDrained / SlurmNodeHealthy).
DRAINED: Final = "Drained"
DRAINING: Final = "Draining"
NOT_DRAINED: Final = "NotDrained"
HEALTHY: Final = "Healthy"
UNHEALTHY_REASONS: Final = (
    ("DOWN", "SlurmNodeDown"),
    ("FAIL", "SlurmNodeFailed"),
    ("NOT_RESPONDING", "SlurmNodeNotResponding"),
)

# Event reasons: transitions observed in Slurm...
EVENT_DRAINED: Final = "SlurmNodeDrained"
EVENT_UNDRAINED: Final = "SlurmNodeUndrained"
EVENT_UNHEALTHY: Final = "SlurmNodeUnhealthy"
EVENT_RECOVERED: Final = "SlurmNodeRecovered"
EVENT_REASON_CHANGED: Final = "SlurmDrainReasonChanged"
EVENT_STATE_CHANGED: Final = "SlurmStateChanged"
# ...and actions the syncer takes.
EVENT_DRAIN: Final = "DrainingSlurmNode"
EVENT_REDRAIN: Final = "UpdatingSlurmDrainReason"
EVENT_UNDRAIN: Final = "UndrainingSlurmNode"
EVENT_CORDON: Final = "CordoningForSlurmDrain"
EVENT_UNCORDON: Final = "UncordoningAfterSlurmUndrain"


@dataclass(frozen=True)
class SlurmAction:
    """A write to Slurm.

    `drain`: set DRAIN with `reason`; `redrain` is True when the node already carries our drain and only the
    reason changes (not a new drain: the safety valve need not count it).
    `undrain`: Slurm UNDRAIN (not RESUME); `reason` is the owned reason being lifted, so the writer can check
    it is still the node's reason right before writing.
    """

    kind: SlurmActionKind
    reason: str
    redrain: bool = False


@dataclass(frozen=True)
class EventSpec:
    """A Kubernetes Event to emit on the bound pod or on the Node."""

    reason: str
    message: str
    type: EventType
    on: Target


@dataclass(frozen=True)
class Decision:
    """Everything one reconcile of one Slurm node should write; empty fields mean nothing to do.

    - `annotations`: changes on the bound object (`annotations_on`); a None value deletes the key.
    - `pod_conditions` / `node_conditions`: conditions to set (only those that change) on pod / Node status.
    - `cordon`: "cordon" = set spec.unschedulable and annotation Keys.CORDONED_BY="slurm";
      "uncordon" = clear spec.unschedulable and remove that annotation.
    - `causes`, `recheck_at`: the drain causes and when a pending grace period runs out (for logs, requeue);
      `automatic`: every cause is automatic (`causes.is_automatic`).
    """

    slurm_action: SlurmAction | None = None
    annotations: dict[str, str | None] = field(default_factory=dict)
    annotations_on: Target | None = None
    pod_conditions: tuple[Condition, ...] = ()
    node_conditions: tuple[Condition, ...] = ()
    cordon: CordonAction | None = None
    events: tuple[EventSpec, ...] = ()
    causes: tuple[Cause, ...] = ()
    recheck_at: float | None = None
    automatic: bool = False  # every cause automatic: the safety valve may hold a new drain back

    @property
    def acts(self) -> bool:
        """True when the decision writes anything (events alone do not count)."""
        return bool(
            self.slurm_action
            or self.cordon
            or self.annotations
            or self.pod_conditions
            or self.node_conditions
        )


def has_drain(slurm: SlurmNode) -> bool:
    """DRAIN, DRAINING or DRAINED in the state list."""
    return bool(slurm.state & DRAIN_FLAGS)


def is_ours(reason: str, opts: SyncOptions) -> bool:
    """A reason the syncer wrote (and so may change or clear)."""
    return reason.startswith(opts.owner_prefix)


def _message(text: str) -> str:
    return sanitise_capped(text, MAX_MESSAGE_BYTES)


def slurm_action(
    slurm: SlurmNode | None, drain: Drain, *, opts: SyncOptions, slurm_fresh: bool
) -> SlurmAction | None:
    """Kubernetes -> Slurm for a bound node (the caller checks binding): `drain.reason` is what its causes
    ask for."""
    if slurm is None:
        return None
    ours = is_ours(slurm.reason, opts)
    if has_drain(slurm):
        if not ours:
            return None  # an admin's or health check's drain (or one without reason) wins
        if drain.causes:
            return None if slurm.reason == drain.reason else SlurmAction("drain", drain.reason, redrain=True)
        # Fail closed: stale data may hide a cause that still holds.
        return SlurmAction("undrain", slurm.reason) if slurm_fresh else None
    if not drain.causes:
        return None
    if slurm.reason and not ours:
        return None  # e.g. DOWN with an admin's reason: never overwritten; drained once it is cleared
    if "POWERING_UP" in slurm.state and slurm.busy:
        # Slurm requeues the jobs of a node drained while it powers up for them, and ends a --no-requeue job
        # NODE_FAIL (26.05.5: "DRAIN/FAIL request for node ... allocated and being powered up. Requeuing
        # jobs"): the drain waits for the registration, then stops new jobs as any drain does
        return None
    return SlurmAction("drain", drain.reason)


def desired_annotations(slurm: SlurmNode, shown: Shown) -> dict[str, str | None]:
    """Slurm -> Kubernetes annotations for the bound object (None: the key should be absent); `shown`: the
    node's derived facts (shown.py)."""
    reason = slurm.reason or None
    return {
        Keys.STATE: slurm.state_text,
        Keys.REASON: reason,
        Keys.REASON_BY: (slurm.reason_set_by or None) if reason else None,
        Keys.REASON_AT: shown.reason_at,
    }


def annotation_changes(
    desired: Mapping[str, str | None], current: Mapping[str, str]
) -> dict[str, str | None]:
    return {key: value for key, value in desired.items() if current.get(key) != value}


def desired_conditions(slurm: SlurmNode, shown: Shown) -> tuple[Condition, Condition]:
    """SlurmNodeDrained and SlurmNodeHealthy (last_transition_time left 0; see condition_changes);
    `shown`: the node's derived facts (shown.py)."""
    if has_drain(slurm):
        drained = Condition(
            type=Keys.CONDITION_DRAINED,
            status="True",
            reason=DRAINING if slurm.busy else DRAINED,
            message=shown.message,
        )
    else:
        drained = Condition(type=Keys.CONDITION_DRAINED, status="False", reason=NOT_DRAINED)
    faults = shown.faults
    bad = next((reason for flag, reason in UNHEALTHY_REASONS if flag in faults), None)
    if bad is None:
        healthy = Condition(type=Keys.CONDITION_HEALTHY, status="True", reason=HEALTHY)
    else:
        # the flags are a few fixed ASCII names: no cap to apply
        text = shown.message if slurm.reason else f"Slurm reports {'+'.join(sorted(faults))}"
        healthy = Condition(type=Keys.CONDITION_HEALTHY, status="False", reason=bad, message=text)
    return drained, healthy


def shared_node_conditions(
    members: Sequence[tuple[str, SlurmNode | None]], facts: Mapping[str, Shown], *, slurm_fresh: bool
) -> tuple[Condition, Condition] | None:
    """SlurmNodeDrained and SlurmNodeHealthy for a Kubernetes Node hosting the slurmd pods of `members`
    (Slurm node name, its Slurm data), all of them together, `facts` their derived facts by Slurm node name
    (`shown`); None: do not write the Node's conditions.

    The same members give the same conditions whichever of them is being reconciled (they are taken in name
    order). One member gives exactly its own `desired_conditions`. Fail closed: stale data, or no data for
    any member, gives None. With several: drained if any is drained (`Draining` while any drained one still
    runs or completes jobs, else `Drained`), unhealthy if any is (reason by the flag precedence of
    UNHEALTHY_REASONS over all of them); the messages name each such Slurm node with its reason.
    """
    if not slurm_fresh or not members:
        return None
    known: list[tuple[str, SlurmNode]] = []
    for name, slurm in sorted(members, key=lambda member: member[0]):
        if slurm is None:
            return None
        known.append((name, slurm))
    if len(known) == 1:
        return desired_conditions(known[0][1], facts[known[0][1].name])
    # each member's own conditions, combined: the Node is as drained and as unhealthy as its worst member
    own = [(name, *desired_conditions(slurm, facts[slurm.name])) for name, slurm in known]
    drained = [(name, cond) for name, cond, _healthy in own if cond.status == "True"]
    if drained:
        drained_cond = Condition(
            type=Keys.CONDITION_DRAINED,
            status="True",
            reason=DRAINING if any(cond.reason == DRAINING for _name, cond in drained) else DRAINED,
            message=_named(drained),
        )
    else:
        drained_cond = own[0][1]  # NotDrained, the same for every member
    bad = [(name, cond) for name, _drained, cond in own if cond.status == "False"]
    if not bad:
        return drained_cond, own[0][2]  # Healthy, the same for every member
    reasons = {cond.reason for _name, cond in bad}
    reason = next(reason for _flag, reason in UNHEALTHY_REASONS if reason in reasons)
    healthy = Condition(type=Keys.CONDITION_HEALTHY, status="False", reason=reason, message=_named(bad))
    return drained_cond, healthy


def _named(members: list[tuple[str, Condition]]) -> str:
    """`node-a: its message; node-b` for a condition shared by several Slurm nodes."""
    return _message("; ".join(f"{name}: {cond.message}" if cond.message else name for name, cond in members))


def condition_changes(
    desired: Iterable[Condition], current: Iterable[Condition], now: float
) -> tuple[Condition, ...]:
    """The desired conditions that differ from current; transition time kept while the status holds."""
    have = {cond.type: cond for cond in current}
    changes: list[Condition] = []
    for want in desired:
        old = have.get(want.type)
        if old is not None and (old.status, old.reason, old.message) == (
            want.status,
            want.reason,
            want.message,
        ):
            continue
        keep = old is not None and old.status == want.status and old.last_transition_time > 0
        changes.append(
            Condition(
                type=want.type,
                status=want.status,
                reason=want.reason,
                message=want.message,
                last_transition_time=old.last_transition_time if keep and old is not None else now,
            )
        )
    return tuple(changes)


def foreign_drains(
    slurm: SlurmNode, node_slurm: Sequence[tuple[str, SlurmNode | None]] | None, opts: SyncOptions
) -> list[SlurmNode] | None:
    """The Slurm nodes on this Kubernetes Node drained by someone else (an admin, a health check); with
    several slurmd pods on the Node, any of them counts. None when one of them is unknown."""
    members = [slurm] if node_slurm is None else [m for _name, m in node_slurm]
    if any(m is None for m in members):
        return None
    return [m for m in members if m is not None and has_drain(m) and not is_ours(m.reason, opts)]


def cordon_action(
    slurm: SlurmNode | None,
    node: KubeNode | None,
    *,
    opts: SyncOptions,
    slurm_fresh: bool,
    node_slurm: Sequence[tuple[str, SlurmNode | None]] | None = None,
) -> CordonAction | None:
    """Slurm -> Kubernetes cordon (`--cordon-on-slurm-drain`); only cordons marked as ours are lifted.
    With several slurmd pods on the Node the cordon holds while any of their Slurm nodes is drained."""
    if slurm is None or node is None or not slurm_fresh:
        return None
    foreign = foreign_drains(slurm, node_slurm, opts)
    if foreign is None:
        return None  # a sibling's Slurm data is missing: neither cordon nor lift on half the picture
    foreign_drain = bool(foreign)
    if node.annotations.get(Keys.CORDONED_BY) == CORDONED_BY_SLURM:
        # Lifted even with the option off, so turning it off never strands our cordons.
        if not foreign_drain:
            return "uncordon"
        if opts.cordon_on_slurm_drain and not node.unschedulable:
            return "cordon"  # someone uncordoned while the Slurm drain holds: level-triggered, put it back
        return None
    if opts.cordon_on_slurm_drain and foreign_drain and not node.unschedulable:
        return "cordon"
    return None


_Said = tuple[str, EventType, str]  # an Event's reason, type and message


def transition_events(
    slurm: SlurmNode, shown: Shown, current: Mapping[str, str], on: Target
) -> list[EventSpec]:
    """Events for what changed in Slurm since the state recorded on the bound object (none on first sight);
    `shown`: the node's derived facts (its faults now)."""
    before = current.get(Keys.STATE)
    after = slurm.state_text
    if before is None:
        return []
    name = slurm.name
    if before == after:
        old_reason = current.get(Keys.REASON)
        if has_drain(slurm) and old_reason is not None and slurm.reason and old_reason != slurm.reason:
            message = f"Slurm node {name} drain reason now: {slurm.reason} (was: {old_reason})"
            return [EventSpec(EVENT_REASON_CHANGED, _message(message), "Normal", on)]
        return []
    flags = frozenset(before.split("+"))
    events: list[EventSpec] = []
    # (was, is now, the Event when it begins, the Event when it ends): a drain, then bad health
    transitions: tuple[tuple[bool, bool, _Said, _Said], ...] = (
        (
            bool(flags & DRAIN_FLAGS),
            has_drain(slurm),
            (EVENT_DRAINED, "Warning", f"Slurm node {name} drained: {slurm.reason} (state {after})"),
            (EVENT_UNDRAINED, "Normal", f"Slurm node {name} undrained (state {after})"),
        ),
        (
            bool(unhealthy_flags(flags)),
            bool(shown.faults),
            (EVENT_UNHEALTHY, "Warning", f"Slurm node {name} is {after}: {slurm.reason}"),
            (EVENT_RECOVERED, "Normal", f"Slurm node {name} recovered (state {after})"),
        ),
    )
    for was, is_now, began, ended in transitions:
        if is_now != was:
            reason, type_, message = began if is_now else ended
            events.append(EventSpec(reason, _message(message), type_, on))
    if not events:
        message = f"Slurm node {name}: {before} -> {after}"
        events.append(EventSpec(EVENT_STATE_CHANGED, _message(message), "Normal", on))
    return events


def decide(
    slurm: SlurmNode | None,
    pod: KubePod | None,
    node: KubeNode | None,
    *,
    now: float,
    opts: SyncOptions,
    slurm_fresh: bool,
    scale_in_of: str | None = None,
    node_slurm: Sequence[tuple[str, SlurmNode | None]] | None = None,
    held: str | None = None,
) -> Decision:
    """Both directions for one Slurm node bound to `pod` (pod-bound) or only to `node` (node-bound): its
    drain causes (`drain_causes`), then the decision on them (`decide_with`), as the sync controller's
    reconcile takes those two steps. `held`: the scheduler's hold on this node (syncer/control/holds.py), a
    drain cause."""
    drain = drain_causes(pod, node, now=now, opts=opts, scale_in_of=scale_in_of, held=held)
    facts = shown(slurm, node_slurm)
    return decide_with(
        slurm, pod, node, drain, facts, now=now, opts=opts, slurm_fresh=slurm_fresh, node_slurm=node_slurm
    )


def decide_with(
    slurm: SlurmNode | None,
    pod: KubePod | None,
    node: KubeNode | None,
    drain: Drain,
    facts: Mapping[str, Shown],
    *,
    now: float,
    opts: SyncOptions,
    slurm_fresh: bool,
    node_slurm: Sequence[tuple[str, SlurmNode | None]] | None = None,
) -> Decision:
    """Both directions for one Slurm node bound to `pod` (pod-bound) or only to `node` (node-bound), its
    drain causes found (`drain`) and its derived facts, and those of the other Slurm nodes in `node_slurm`,
    by Slurm node name (`facts`, shown.py).

    With neither pod nor Node the Slurm node is unbound and left alone. With `slurm` None or stale
    (`slurm_fresh` False) nothing is written to Kubernetes and nothing is undrained.
    `node_slurm`: when `node` hosts several bound slurmd pods, (Slurm node name, Slurm data) of each, this
    one included; the Node's conditions then come from all of them (`shared_node_conditions`).
    """
    holder: KubePod | KubeNode
    on: Target
    if pod is not None:
        holder, on = pod, "pod"
    elif node is not None:
        holder, on = node, "node"
    else:
        return Decision(causes=drain.causes, recheck_at=drain.recheck_at)
    action = slurm_action(slurm, drain, opts=opts, slurm_fresh=slurm_fresh)
    annotations: dict[str, str | None] = {}
    pod_conditions: tuple[Condition, ...] = ()
    node_conditions: tuple[Condition, ...] = ()
    events: list[EventSpec] = []
    if slurm is not None and slurm_fresh:
        own = facts[slurm.name]
        annotations = annotation_changes(desired_annotations(slurm, own), holder.annotations)
        events.extend(transition_events(slurm, own, holder.annotations, on))
        desired = desired_conditions(slurm, own)
        if pod is not None:
            pod_conditions = condition_changes(desired, pod.conditions, now)
        if node is not None:
            wanted = (
                desired
                if node_slurm is None
                else shared_node_conditions(node_slurm, facts, slurm_fresh=slurm_fresh)
            )
            if wanted is not None:
                node_conditions = condition_changes(wanted, node.conditions, now)
    cordon = cordon_action(slurm, node, opts=opts, slurm_fresh=slurm_fresh, node_slurm=node_slurm)
    if action is not None and slurm is not None:
        events.append(_action_event(slurm, action, on))
    if cordon is not None and slurm is not None and node is not None:
        events.append(_cordon_event(slurm, node, cordon, node_slurm, opts))
    return Decision(
        slurm_action=action,
        annotations=annotations,
        annotations_on=on,
        pod_conditions=pod_conditions,
        node_conditions=node_conditions,
        cordon=cordon,
        events=tuple(events),
        causes=drain.causes,
        recheck_at=drain.recheck_at,
        automatic=drain.automatic,
    )


def _action_event(slurm: SlurmNode, action: SlurmAction, on: Target) -> EventSpec:
    """The Event of the Slurm write decided now: a drain, a new drain reason or an undrain."""
    if action.kind == "undrain":
        return EventSpec(
            EVENT_UNDRAIN, f"undraining Slurm node {slurm.name}: no drain cause left", "Normal", on
        )
    if action.redrain:
        message = f"updating drain reason of Slurm node {slurm.name}: {action.reason}"
        return EventSpec(EVENT_REDRAIN, _message(message), "Normal", on)
    return EventSpec(
        EVENT_DRAIN, _message(f"draining Slurm node {slurm.name}: {action.reason}"), "Normal", on
    )


def _cordon_event(
    slurm: SlurmNode,
    node: KubeNode,
    cordon: CordonAction,
    node_slurm: Sequence[tuple[str, SlurmNode | None]] | None,
    opts: SyncOptions,
) -> EventSpec:
    """The Event of a cordon (naming every drained Slurm node it follows) or an uncordon decided now."""
    if cordon == "cordon":
        drained = foreign_drains(slurm, node_slurm, opts) or [slurm]
        which = "; ".join(f"Slurm node {m.name} drained: {m.reason}" for m in drained)
        message = f"cordoning Node {node.name}: {which}"
        return EventSpec(EVENT_CORDON, _message(message), "Normal", "node")
    message = f"uncordoning Node {node.name}: Slurm node {slurm.name} no longer drained by Slurm"
    return EventSpec(EVENT_UNCORDON, _message(message), "Normal", "node")


def drift(
    slurm: SlurmNode | None,
    pod: KubePod | None,
    node: KubeNode | None,
    opts: SyncOptions,
    now: float,
    *,
    slurm_fresh: bool = True,
    scale_in_of: str | None = None,
    node_slurm: Sequence[tuple[str, SlurmNode | None]] | None = None,
    held: str | None = None,
) -> bool:
    """True when the two sides disagree: the decision for them would write something."""
    decision = decide(
        slurm, pod, node, now=now, opts=opts, slurm_fresh=slurm_fresh, scale_in_of=scale_in_of,
        node_slurm=node_slurm, held=held,
    )  # fmt: skip
    return decision.acts
