"""The power-saving part of a NodeSet's plan (`spec.power`): which members Slurm wants powered, as a pure
function of the pods and the Slurm records. No I/O.

Slurm decides: its power saving marks the powered-down CLOUD nodes a pending job needs POWERING_UP and
powers idle ones down after SuspendTime. The NodeSet follows it: every member below the ceiling is
declared to Slurm (a powered-down CLOUD node) before any pod; a member Slurm powers up gets exactly its
pod; a member Slurm powers down loses its pod (it runs nothing: Slurm powers down idle nodes only, and a
forced power-down requeues the jobs); floor members always have a pod. An admin's DOWN or DRAIN is
respected (no pod for a node an admin took out). Members above a lowered ceiling go the scale-in way
(drained, then the pod, then the record) or, with no pod, their record is deleted once nothing runs there.

A declared record carries the NodeSet's identity in its comment (`declared_stamp`), written right after
the create (Slurm refuses a comment in `node_conf`), so a lowered ceiling deletes only its own records;
a slurm.conf member (no DYNAMIC_NORM: Slurm refuses to delete it) is never stamped nor deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from syncer.controllers.nodeset.spec import PowerSpec
from syncer.model.keys import Keys
from syncer.model.kube import KubePod
from syncer.model.slurm import SlurmNode
from syncer.model.slurm import powered_down as powered_down_state

# Only POWERING_UP: Slurm's power-save pass has stamped the power-up (boot_req_time). A POWER_UP request
# waits for that pass (up to power_save_interval, 10 s: 10.3 s measured on 24.11.5). A slurmd started
# before the stamp either registers first, leaving POWER_UP set for good on a node that is up, or is
# ignored as booted too early ("Still waiting for boot") until ResumeTimeout, its job CONFIGURING meanwhile
POWERING_UP = frozenset({"POWERING_UP"})
# Slurm writes of records a pass makes at most (a declare is two: the create and its comment); the rest go on
# the next pass, queued at once, so one large ceiling does not hold a worker for minutes
DECLARES_PER_PASS = 50
RECORD_WRITES_PER_PASS = 100
CEILING_LOWERED = "ceiling lowered below it while Slurm powered it up"


def declared_stamp(removal_stamp: str) -> str:
    """The comment of a member record this NodeSet declared (distinct from its removal stamp)."""
    return f"{removal_stamp} power=declared"


def declare_failed_message(refused: dict[str, str]) -> str:
    """One line naming the members Slurm refused to declare and why (the first error; they are alike)."""
    names = sorted(refused, key=lambda n: (len(n), n))
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (
        f"Slurm refused to declare {shown}: {refused[names[0]]}; members it powers up still get their pods "
        "(MaxNodeCount in slurm.conf bounds how many nodes Slurm holds)"
    )


def name_collision_message(names: tuple[str, ...] | list[str]) -> str:
    """Slurm records under member names that are not the NodeSet's, and what to do."""
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (
        f"Slurm nodes {shown} exist under this NodeSet's member names and are not its own (a slurmd -Z "
        "registration, another NodeSet's or someone's record): they are left alone, never stamped, given a "
        "pod or deleted; rename this NodeSet, or remove them (scontrol delete nodename=...) if they are stale"
    )


def made_over_rest(slurm: SlurmNode) -> bool:
    """A record made by `POST /new/node/` (DYNAMIC_NORM): the only kind Slurm lets us delete. A member named
    in slurm.conf (24.11 cannot declare) has no such flag; `DELETE /node/` refuses it (500, error 2028)."""
    return "DYNAMIC_NORM" in slurm.state


def powering_up(slurm: SlurmNode) -> bool:
    return bool(slurm.state & POWERING_UP)


def starts_powering_up(name: str, before: SlurmNode | None, after: SlurmNode | None) -> str | None:
    """The NodeSet name whose member `name` (`<nodeset>-<ordinal>`) a Slurm change shows starting to power
    up (POWERING_UP now, not before); None for any other change or name. A trigger only: which NodeSet
    owns the record, and whether it gets a pod, the plan decides."""
    if after is None or not powering_up(after) or (before is not None and powering_up(before)):
        return None
    nodeset, _, ordinal = name.rpartition("-")
    return nodeset if nodeset and ordinal.isdigit() else None


def slurmd_silent(slurm: SlurmNode) -> bool:
    """slurmctld cannot reach the member's slurmd: it never registered (powering up), or pings fail."""
    return "NOT_RESPONDING" in slurm.state


def powered_down(slurm: SlurmNode) -> bool:
    """Powering down or powered down: no pod is wanted."""
    return powered_down_state(slurm.state)


def held_by_admin(slurm: SlurmNode, owner_prefix: str) -> bool:
    """DOWN or DRAIN with a reason that is not the syncer's: someone took the node out (an admin, or
    Slurm itself after ResumeTimeout); it gets no pod until that is lifted."""
    taken = slurm.drain_flag or slurm.base_state == "DOWN"
    return taken and not slurm.reason.startswith(owner_prefix)


def power_state(slurm: SlurmNode, owner_prefix: str) -> str:
    """The status bucket of one member record."""
    if held_by_admin(slurm, owner_prefix):
        return "heldByAdmin"
    if powering_up(slurm):
        return "poweringUp"
    if "POWERED_DOWN" in slurm.state:
        return "poweredDown"
    if powered_down(slurm):
        return "poweringDown"
    return "poweredUp"


def ours(
    slurm: SlurmNode, name: str, mine: str, removal: str, declaring: frozenset[str], has_pod: bool
) -> bool:
    """Whether the record under member `name` is this NodeSet's: its stamp; or no comment yet on a record
    it recorded declaring (the comment follows the create), or that its own pod's slurmd registered; or no
    comment on a slurm.conf member (no DYNAMIC_NORM: 24.11 cannot declare). Any other record is someone
    else's: a `slurmd -Z` registration (Slinky's pods, another namespace's NodeSet) is DYNAMIC_NORM with no
    comment, as a declared record is before its comment."""
    if slurm.comment:
        return slurm.comment in (mine, removal)
    return not made_over_rest(slurm) or name in declaring or has_pod


def up(slurm: SlurmNode) -> bool:
    """Slurm has the member up: not powered down, powering down or asked to, and not DOWN."""
    return not slurm.state & {"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"} and slurm.base_state != "DOWN"


def registered_before(slurm: SlurmNode, pod: KubePod) -> bool:
    """The pod's slurmd registered the member already (Slurm's boot time of it, `slurmd -b`'s start, is not
    older than the pod): while Slurm powers the member up again it waits for a boot after its request, which
    that slurmd never makes. A pod made for this power-up has not registered (the record's boot time is an
    older slurmd's, or none)."""
    return bool(pod.created) and slurm.boot_time >= pod.created


def wanted(
    index: int,
    power: PowerSpec,
    pod: KubePod | None,
    slurm: SlurmNode,
    owner_prefix: str,
    slurm_fresh: bool,
) -> bool:
    """Whether member `name` (declared, below the ceiling) should have a pod now."""
    if pod is None and held_by_admin(slurm, owner_prefix):
        return False
    if index < power.min_replicas or powering_up(slurm):
        return True
    if pod is None:
        # up in Slurm without a slurmd: its pod was deleted under it (kubectl delete, an eviction), and the
        # sync engine's drain for the terminating pod would stay for good on the unbound node: its pod again
        return slurm_fresh and up(slurm)
    # a running member stays until Slurm powers it down
    return not powered_down(slurm)


@dataclass
class PowerDecision:
    members: dict[str, int] = field(default_factory=dict)  # name -> ordinal: members that keep or get a pod
    create: list[str] = field(default_factory=list)  # pods to create (their records exist)
    powered_up: set[str] = field(default_factory=set)  # of those, the ones Slurm powers up (not the floor)
    declare: list[str] = field(default_factory=list)  # records to create in Slurm (powered-down CLOUD)
    stamp: list[str] = field(default_factory=list)  # records declared but not yet marked as ours
    unmark: list[str] = field(default_factory=list)  # scale-in cancelled: the ceiling went up again
    scale_in: list[str] = field(default_factory=list)  # pods above the ceiling, removed the scale-in way
    power_down_pods: list[str] = field(default_factory=list)  # pods of members Slurm powered down
    replace: list[str] = field(default_factory=list)  # pods whose slurmd cannot answer Slurm's power-up
    undeclare: list[str] = field(default_factory=list)  # our records above the ceiling, no pod, idle
    conf_above: list[str] = field(default_factory=list)  # slurm.conf members above the ceiling: kept
    force_down: dict[str, str] = field(default_factory=dict)  # record -> reason of a POWER_DOWN_FORCE
    foreign: list[str] = field(default_factory=list)  # member names whose record someone else commented
    failed: dict[str, str] = field(default_factory=dict)  # member -> our power-down reason (still DOWN)
    resume: list[str] = field(default_factory=list)  # powered down after our failure: Slurm may try again
    undrain: list[str] = field(default_factory=list)  # powered down, no pod, the sync engine's drain left on
    counts: dict[str, int] = field(default_factory=dict)  # status: members by power state
    stale: bool = False  # something waits for fresh Slurm data
    fresh: bool = True  # planned on fresh Slurm data (else none is declared: which are missing is unknown)
    more: bool = False  # records left for the next pass (the per-pass bound): look again at once


def decide_power(
    nodeset: str,
    power: PowerSpec,
    pods: list[KubePod],
    slurm_nodes: dict[str, SlurmNode],
    *,
    removal_stamp: str,
    ordinal: Callable[[str], int],
    slurm_fresh: bool,
    owner_prefix: str,
    declaring: frozenset[str] = frozenset(),
    in_flight: frozenset[str] = frozenset(),
) -> PowerDecision:
    """`in_flight`: members whose declare was sent a moment ago and that the Slurm data does not show yet:
    not declared again, so the per-pass bound takes the next ones."""
    out = PowerDecision(fresh=slurm_fresh)
    by_name = {p.name: p for p in pods}
    mine = declared_stamp(removal_stamp)
    out.counts = dict.fromkeys(
        ("declared", "poweredDown", "poweringUp", "poweredUp", "poweringDown", "heldByAdmin"), 0
    )
    for index in range(power.max_replicas):
        name = f"{nodeset}-{index}"
        pod = by_name.get(name)
        slurm = slurm_nodes.get(name)
        removal = pod.annotations.get(Keys.REMOVAL) if pod is not None else None
        if pod is not None and removal == "scale-in" and not pod.terminating:
            out.unmark.append(name)
        if slurm is None:
            if pod is not None:
                out.members[name] = index  # its slurmd may register it again: not ours to stop
            elif slurm_fresh and name not in in_flight:
                out.declare.append(name)
            continue
        if not ours(slurm, name, mine, removal_stamp, declaring, pod is not None):
            out.foreign.append(name)  # a record under our member's name is someone else's: left alone
            if pod is not None:
                out.members[name] = index
            continue
        out.counts["declared"] += 1
        out.counts[power_state(slurm, owner_prefix)] += 1
        # our reason without DRAIN: a POWER_DOWN_FORCE's (the sync engine's drains carry the DRAIN flag)
        forced = slurm.reason.startswith(owner_prefix) and not powering_up(slurm) and not slurm.drain_flag
        if forced and (
            slurm.base_state == "DOWN" or slurm.state & {"POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"}
        ):
            # powered down by us because its pod could not run (POWER_DOWN_FORCE leaves it IDLE, measured);
            # one left DOWN is resumed once powered down without a pod, so Slurm may power it up again
            out.failed[name] = slurm.reason
            if slurm.base_state == "DOWN" and pod is None and "POWERED_DOWN" in slurm.state and slurm_fresh:
                out.resume.append(name)
        if not slurm.comment and slurm_fresh and made_over_rest(slurm):
            out.stamp.append(name)  # ours, the comment not written yet (a slurm.conf member: left unstamped)
        # a pod that ended is as good as gone (the plan deletes it): the member is judged as one without a
        # pod, and gets one once the ended pod is gone
        ended = pod is not None and pod.ended and not pod.terminating
        if wanted(index, power, None if ended else pod, slurm, owner_prefix, slurm_fresh):
            out.members[name] = index
            if pod is None:
                out.create.append(name)
                if powering_up(slurm):
                    out.powered_up.add(name)
            elif (
                powering_up(slurm) and not (pod.terminating or ended) and registered_before(slurm, pod)
                and slurm_fresh
            ):  # fmt: skip
                # Slurm powered it down and up again with its pod left running (the syncer away meanwhile):
                # its job waited for ResumeTimeout (NODE_FAIL without requeue); a new pod registers it
                out.replace.append(name)
        elif pod is None:
            # powered down with the drain its pod's end left (the sync engine's, the node unbound): lifted,
            # or Slurm never powers it up again. Not a record being removed: that goes its own way
            ours_drain = slurm.drain_flag and slurm.reason.startswith(owner_prefix)
            if ours_drain and slurm.comment != removal_stamp and not slurm.busy and slurm_fresh:
                out.undrain.append(name)
        elif not pod.terminating and not removal and not ended:
            if not slurm_fresh:
                out.stale = True
            elif not slurm.busy:
                out.power_down_pods.append(name)
    _above_ceiling(out, nodeset, power, pods, slurm_nodes, (mine, removal_stamp), ordinal, slurm_fresh)
    return _bounded(out)


def _above_ceiling(
    out: PowerDecision, nodeset: str, power: PowerSpec, pods: list[KubePod],
    slurm_nodes: dict[str, SlurmNode], stamps: tuple[str, str], ordinal: Callable[[str], int],
    slurm_fresh: bool,
) -> None:  # fmt: skip
    """Pods and records above a lowered ceiling: pods go the scale-in way (or at once when powered down and
    idle), our idle records are deleted, one Slurm powers up for a job is forced down (the job requeued).
    `stamps`: (declared, removal) - ours by either, as below the ceiling: a member whose scale-in was cut
    short by Slurm's own power-down (its pod deleted that way, then undrained) keeps the removal stamp
    without our drain, which the scale-in way needs to delete its record."""
    mine = stamps[0]
    by_name = {p.name for p in pods}
    for pod in pods:
        index = ordinal(pod.name)
        if 0 <= index < power.max_replicas or pod.terminating or pod.annotations.get(Keys.REMOVAL):
            continue
        if pod.ended:
            continue  # the plan deletes it, no drain needed
        slurm = slurm_nodes.get(pod.name)
        if slurm is not None and powered_down(slurm) and not slurm.busy and slurm_fresh:
            out.power_down_pods.append(pod.name)  # idle and powered down: no drain needed
        else:
            out.scale_in.append(pod.name)
    prefix = nodeset + "-"
    for name, slurm in sorted(slurm_nodes.items()):
        if not name.startswith(prefix) or name in by_name or not 0 <= power.max_replicas <= ordinal(name):
            continue
        if not made_over_rest(slurm) and slurm.comment in ("", mine) and not slurm.busy:
            out.conf_above.append(name)  # only its slurm.conf line can remove it
        if slurm.comment not in stamps:
            continue
        if not slurm_fresh:
            out.stale = True
        elif powering_up(slurm):
            out.force_down[name] = CEILING_LOWERED  # a job waits for it: requeued, never killed
        elif not slurm.busy and made_over_rest(slurm):
            out.undeclare.append(name)


def _bounded(out: PowerDecision) -> PowerDecision:
    """At most DECLARES_PER_PASS declares and RECORD_WRITES_PER_PASS stamps and deletes this pass (a
    ceiling of 100,000 was 200,000 serial writes in one pass); `more` says the rest wait for the next."""
    out.more = (
        len(out.declare) > DECLARES_PER_PASS
        or len(out.stamp) > RECORD_WRITES_PER_PASS
        or len(out.undeclare) > RECORD_WRITES_PER_PASS
    )
    del out.declare[DECLARES_PER_PASS:]
    del out.stamp[RECORD_WRITES_PER_PASS:]
    del out.undeclare[RECORD_WRITES_PER_PASS:]
    return out
