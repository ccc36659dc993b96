"""SlurmPartitions, pure: from the partitions wanted (each CR with its member Slurm nodes resolved), the
partitions Slurm has, who owns which, and whether slurmctld keeps partitions over a reconfigure, the writes
that make Slurm match, and what each CR's status says. No I/O; the controller reads and writes.

Rules (docs/partitions.md):
- Only partitions this syncer owns are changed. Ownership is recorded on the CR itself (an annotation the
  controller writes *before* it creates the partition: `claim`), so a restart, a failover to another replica
  or a slurmctld restart cannot lose it; Slurm keeps no marker on a partition (no comment field in any REST
  version). `created` partitions are drained and deleted with their CR; `adopted` ones are only released.
- A partition that exists and is not ours is a Conflict, unless the CR sets `adopt`; Slinky-managed
  partitions (NodeSet `partition`, `extraConf`) are a Conflict even then.
- No create or update unless slurmctld has `ReconfigFlags=KeepPartInfo`: without it the next reconfigure
  deletes partitions made over REST and kills their jobs (measured). Draining and deleting stay allowed.
- A partition with jobs is never deleted: it is closed first (UP -> DRAIN, DOWN -> INACTIVE: no new
  submissions and no job started that would not have started anyway) and deleted once Slurm counts no running
  or pending job in it (Slurm itself refuses to delete it before). guards.py has the rules and measurements.
- A `created` claim is written as `creating` before the create and confirmed once Slurm showed the
  partition this syncer made: a partition that appears under an unconfirmed claim may be someone else's.
- What stops work in Slurm is kept: a state someone set there that stops what the CR's state allows
  (an admin's DOWN under a CR saying UP) is not written over until the CR changes (`HeldInSlurm`).
- With preemption by partition priority, a busy node joins a partition of a higher tier than one whose jobs
  it runs only once idle (`NodesHeld`).
- Only changed fields are sent; nodes as `+a,-b` changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from syncer.controllers.partitions.guards import DEFAULT_TIER, closing_state, lifts, preempting
from syncer.slurm.partitions import (
    InvalidPartition,
    PartitionSettings,
    PartitionState,
    check,
    node_changes,
)

Ownership = Literal["creating", "created", "adopted"]
ActionKind = Literal["claim", "create", "update", "drain", "delete", "release"]

READY = "Ready"
CONFLICT = "Conflict"
INVALID = "Invalid"
UNSUPPORTED = "Unsupported"
PRECONDITION = "KeepPartInfoMissing"
DRAINING = "Draining"
DELETING = "Deleting"
CREATING = "Creating"
UPDATING = "Updating"
HELD = "HeldInSlurm"  # a state someone set in Slurm that stops what the CR allows: kept until the CR changes
NODES_HELD = "NodesHeld"  # busy nodes kept out of a partition whose jobs would preempt theirs
NEEDS = "partitions declared in Kubernetes need Slurm 26.05+ (REST v0.0.45 writes partitions)"
ADD_KEEP = (
    "add 'ReconfigFlags=KeepPartInfo' to slurm.conf (Slinky: controller.extraConf) and reconfigure: without "
    "it a reconfigure deletes partitions made over REST and kills their jobs"
)
NOTHING = PartitionSettings()


@dataclass(frozen=True)
class Wanted:
    """One SlurmPartition CR, with its membership already resolved to Slurm node names."""

    cr: str  # the CR's name (cluster-scoped)
    partition: str  # the Slurm partition it declares
    nodes: frozenset[str]
    settings: PartitionSettings
    adopt: bool = False
    deleting: bool = False  # deletionTimestamp set: the finalizer is ours to remove
    order: tuple[str, str] = ("", "")  # (creationTimestamp, uid): the older CR wins a name both declare
    problems: tuple[str, ...] = ()  # membership the controller could not resolve, each naming its field
    joining: frozenset[str] = frozenset()  # NodeSet members: left out while Slurm does not know them yet
    generation: int = 0  # metadata.generation
    observed: int | None = None  # the generation its last status was written for; None: no status yet


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    cr: str
    partition: str
    nodes: str | None = None  # create: the full hostlist (comma list); update: "+a,-b"; else None
    settings: PartitionSettings = NOTHING  # create: all managed; update: the changed fields only
    before: PartitionSettings | None = None  # update: what Slurm had (for the Event: what was put back)
    ownership: Ownership | None = None  # claim: how it becomes ours
    replaces: Ownership | None = None  # claim: the record it replaces (the claim is written only over that)


@dataclass(frozen=True)
class Outcome:
    """What the CR's status and Events say after this plan (its `Ready` condition)."""

    cr: str
    partition: str
    ready: bool
    reason: str
    message: str
    jobs: int = 0  # running + pending in the partition (draining: how many remain)


@dataclass(frozen=True)
class Plan:
    actions: list[Action] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # by CR
    held_out: set[str] = field(default_factory=set)  # busy nodes kept out of a partition until idle


@dataclass(frozen=True)
class World:
    """Everything the plan reads besides the CRs."""

    present: Mapping[str, PartitionState]  # by partition name, freshly listed
    owned: Mapping[str, tuple[str, Ownership]]  # partition -> (CR, how): the records on the CRs
    jobs: Mapping[str, int] | None  # partition -> running + pending jobs; None: not counted yet
    slurm_nodes: frozenset[str]  # every node Slurm knows: an unknown one would be refused (error 2018)
    keeps_partitions: bool | None  # ReconfigFlags has KeepPartInfo; None: /conf could not be read
    writes: bool  # the REST version writes partitions (v0.0.45)
    # partitions Slinky manages -> the object declaring them ("NodeSet ns/name", "Controller ns/name")
    slinky: Mapping[str, str] = field(default_factory=dict)
    made: frozenset[str] = frozenset()  # partitions this process created, their claims not confirmed yet
    busy: frozenset[str] = frozenset()  # Slurm nodes running jobs (ALLOCATED, MIXED, COMPLETING)
    preempts: str = ""  # how slurmctld preempts by partition priority ("" where it does not)


def diff(want: PartitionSettings, have: PartitionSettings) -> PartitionSettings:
    """The managed fields of `want` whose value Slurm does not have (order of names does not count)."""
    changed: dict[str, Any] = {}
    for f in fields(want):
        wanted = getattr(want, f.name)
        if wanted is None:
            continue
        current = getattr(have, f.name)
        if isinstance(wanted, tuple):
            wanted, current = tuple(sorted(wanted)), tuple(sorted(current)) if current is not None else None
        if wanted != current:
            changed[f.name] = wanted
    return PartitionSettings(**changed)


def _age(want: Wanted) -> tuple[tuple[str, str], str]:
    return want.order, want.cr


def _winners(wanted: Sequence[Wanted]) -> tuple[dict[str, Wanted], dict[str, Wanted]]:
    """Per partition name the oldest CR declaring it; the others, by CR name, with the one they lose to."""
    first: dict[str, Wanted] = {}
    losers: dict[str, Wanted] = {}
    for want in sorted(wanted, key=_age):
        if want.partition in first:
            losers[want.cr] = first[want.partition]
        else:
            first[want.partition] = want
    return first, losers


def plan(wanted: Sequence[Wanted], world: World) -> Plan:
    result = Plan()
    first, losers = _winners(wanted)
    for want in wanted:
        winner = losers.get(want.cr)
        if winner is not None:
            if want.deleting:
                result.actions.append(Action("release", want.cr, want.partition))
            result.outcomes[want.cr] = _outcome(
                want, False, CONFLICT,
                f"partition {want.partition} is declared by SlurmPartition {winner.cr} (older); rename one",
            )  # fmt: skip
    defaults = [w for w in sorted(first.values(), key=_age) if w.settings.default is True and not w.deleting]
    for want in defaults[1:]:  # Slurm has one default partition: the oldest CR asking for it gets it
        result.outcomes[want.cr] = _outcome(
            want, False, CONFLICT,
            f"spec.default: SlurmPartition {defaults[0].cr} (older) makes its partition the default already; "
            "Slurm has one",
        )  # fmt: skip
    for want in first.values():
        if want.deleting:
            _delete(want, world, result)
        elif want.cr not in result.outcomes:
            _one(want, world, result)
    return result


def _outcome(want: Wanted, ready: bool, reason: str, message: str, jobs: int = 0) -> Outcome:
    return Outcome(want.cr, want.partition, ready, reason, message, jobs)


def _one(want: Wanted, world: World, result: Plan) -> None:
    refused = _refusal(want, world)
    if refused is not None:
        result.outcomes[want.cr] = _outcome(want, False, *refused)
        return
    have = world.present.get(want.partition)
    add, say = result.actions.append, result.outcomes.__setitem__
    _claim(want, world, have, add)
    members = want.nodes - (want.joining - world.slurm_nodes)  # NodeSet members not registered yet wait
    held_out = _held_out(want, world, have, members)
    members -= frozenset(held_out)
    result.held_out.update(held_out)
    if have is None:
        add(Action("create", want.cr, want.partition, ",".join(sorted(members)), want.settings))
        say(want.cr, _outcome(want, False, CREATING, f"creating partition {want.partition}"))
        return
    changed = diff(want.settings, have.settings)
    held = lifts(have.settings.state, changed.state) and not _changed_since_seen(want)
    if held:
        changed = replace(changed, state=None)
    nodes = node_changes(have.nodes, members)
    jobs = (world.jobs or {}).get(want.partition, 0)
    if changed.managed() or nodes:
        add(Action("update", want.cr, want.partition, nodes or None, changed, have.settings))
        say(want.cr, _outcome(want, False, UPDATING, f"updating partition {want.partition}", jobs))
    elif held:
        say(want.cr, _outcome(want, False, HELD, _held_message(want, have), jobs))
    elif held_out:
        say(want.cr, _outcome(want, False, NODES_HELD, _held_out_message(want, world, held_out), jobs))
    else:
        say(want.cr, _outcome(want, True, READY, f"partition {want.partition} matches", jobs))


def _claim(want: Wanted, world: World, have: PartitionState | None, add: Any) -> None:
    """The ownership record before anything is written: `creating` before a create, `created` once Slurm
    shows the partition this process made, `adopted` for an existing one the CR adopts."""
    record = world.owned.get(want.partition)
    how = record[1] if record is not None else None
    if have is None and how != "creating":
        add(Action("claim", want.cr, want.partition, ownership="creating", replaces=how))
    elif have is not None and how == "creating" and want.partition in world.made:
        add(Action("claim", want.cr, want.partition, ownership="created", replaces="creating"))
    elif have is not None and how in (None, "creating"):  # foreign, or an unconfirmed claim: adopt says so
        add(Action("claim", want.cr, want.partition, ownership="adopted", replaces=how))


def _changed_since_seen(want: Wanted) -> bool:
    """The CR changed after its last status was written: its author has spoken since Slurm was looked at."""
    return want.observed is not None and want.generation > want.observed


def _held_message(want: Wanted, have: PartitionState) -> str:
    name, state, wanted = want.partition, have.settings.state, want.settings.state
    return (
        f"partition {name} is {state} in Slurm, set there, not by this CR (spec.state {wanted}): kept, since "
        f"{wanted} would let jobs in or start jobs it stops; the CR's state is written again once the CR "
        f"changes (any edit of its spec), or lift it in Slurm: scontrol update partitionname={name} "
        f"state={wanted}"
    )


def _tier(want: Wanted, have: PartitionState | None) -> int:
    for tier in (want.settings.priority_tier, have.settings.priority_tier if have is not None else None):
        if tier is not None:
            return tier
    return DEFAULT_TIER


def _held_out(
    want: Wanted, world: World, have: PartitionState | None, members: frozenset[str]
) -> dict[str, tuple[str, int]]:
    """Busy nodes this CR would add where Slurm preempts by partition priority and this partition's tier is
    above one whose jobs they run: they join once idle."""
    if not world.preempts:
        return {}
    adding = members - have.nodes if have is not None else members
    return preempting(adding, _tier(want, have), want.partition, world.present, world.busy)


def _held_out_message(want: Wanted, world: World, held_out: Mapping[str, tuple[str, int]]) -> str:
    nodes = sorted(held_out)
    shown = ", ".join(f"{n} (in {held_out[n][0]}, tier {held_out[n][1]})" for n in nodes[:5])
    more = f" and {len(nodes) - 5} more" if len(nodes) > 5 else ""
    return (
        f"node(s) {shown}{more} run jobs that partition {want.partition} (tier "
        f"{_tier(want, world.present.get(want.partition))}) would preempt ({world.preempts}): they join once "
        "idle; to move them sooner, drain them (annotation slurm-syncer.dev/drain on their Node)"
    )


def _refusal(want: Wanted, world: World) -> tuple[str, str] | None:
    """Why nothing may be written for this CR now: (reason, message), or None."""
    name = want.partition
    record = world.owned.get(name)
    if not world.writes:
        return UNSUPPORTED, NEEDS
    if name in world.slinky:
        return CONFLICT, (
            f"partition {name} is Slinky's (its {world.slinky[name]} declares it in slurm.conf): "
            "slurm-syncer never changes it, adopt or not (slurm.conf is its source of truth); "
            "name another partition"
        )
    if record is not None and record[0] != want.cr:
        return CONFLICT, f"partition {name} is owned by SlurmPartition {record[0]}"
    problem = _invalid(want, world)
    if problem:
        return INVALID, problem
    unconfirmed = record is not None and record[1] == "creating" and name not in world.made
    if name in world.present and (record is None or unconfirmed) and not want.adopt:
        how = (
            "appeared in Slurm while this CR's create of it was not confirmed (a create Slurm refused, or a "
            "restart between the create and its record): it may be someone else's"
            if unconfirmed
            else "exists in Slurm and was not created by slurm-syncer"
        )
        return CONFLICT, f"partition {name} {how}; set spec.adopt: true to manage it"
    stolen = _default_taken(want, world)
    if stolen:
        return CONFLICT, stolen
    if world.keeps_partitions is not True:
        unread = " (slurmrestd's /conf could not be read)" if world.keeps_partitions is None else ""
        return PRECONDITION, f"slurmctld does not keep partitions{unread}: {ADD_KEEP}"
    return None


def _invalid(want: Wanted, world: World) -> str:
    if want.problems:
        return "; ".join(want.problems)
    try:
        check(want.partition, want.settings)
    except InvalidPartition as exc:
        return f"spec.{exc.field}: {exc}" if exc.field != "name" else f"partition {exc}"
    unknown = sorted(want.nodes - want.joining - world.slurm_nodes)
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        return f"spec.nodes: {shown} unknown to Slurm (Slurm refuses the whole write: error 2018)"
    return ""


def _default_taken(want: Wanted, world: World) -> str:
    """Slurm has one default partition: making this one the default clears it elsewhere (measured). That
    is a change to another partition, so only where that one is ours too."""
    if want.settings.default is not True:
        return ""
    for name, other in world.present.items():
        owner = world.owned.get(name)
        if name != want.partition and other.settings.default and (owner is None or name in world.slinky):
            return (
                f"spec.default: partition {name} is Slurm's default and not ours; Slurm has one default, so "
                "setting it here would change that partition"
            )
    return ""


def _delete(want: Wanted, world: World, result: Plan) -> None:
    """A CR being deleted: a partition it created is closed (guards.closing_state), then deleted once its
    jobs are gone; anything else (adopted, foreign, never made) is only released."""
    add, say = result.actions.append, result.outcomes.__setitem__
    have = world.present.get(want.partition)
    record = world.owned.get(want.partition)
    ownership = record[1] if record is not None and record[0] == want.cr else None
    ours = ownership == "created" or (ownership == "creating" and want.partition in world.made)
    if have is None or not ours or want.partition in world.slinky or not world.writes:
        add(Action("release", want.cr, want.partition))
        say(want.cr, _outcome(want, False, DELETING, f"releasing partition {want.partition}"))
        return
    jobs = world.jobs.get(want.partition, 0) if world.jobs is not None else None
    if jobs == 0:
        add(Action("delete", want.cr, want.partition))
        add(Action("release", want.cr, want.partition))
        say(want.cr, _outcome(want, False, DELETING, f"deleting partition {want.partition}"))
        return
    closing = closing_state(have.settings.state)
    if closing is not None:
        add(Action("drain", want.cr, want.partition, settings=PartitionSettings(state=closing),
                   before=have.settings))  # fmt: skip
    message = _draining_message(want.partition, closing or have.settings.state, jobs)
    say(want.cr, _outcome(want, False, DRAINING, message, jobs or 0))


def _draining_message(name: str, state: str | None, jobs: int | None) -> str:
    remain = f"{jobs} job(s) remain" if jobs is not None else "job(s) remain (not counted yet)"
    if state == "INACTIVE":  # closed from DOWN, or INACTIVE already (guards.closing_state)
        return (
            f"partition {name} is {state}: {remain}, held there (none starts, none is refused or ended); it "
            f"is deleted once none remain: cancel them (scancel --partition={name}) or let them run "
            f"(scontrol update partitionname={name} state=DRAIN)"
        )
    return f"partition {name} drains: {remain}; deleted once they have ended"


OWNERSHIPS: dict[str, Ownership] = {"creating": "creating", "created": "created", "adopted": "adopted"}


def records(crs: Iterable[tuple[str, str | None, str | None]]) -> dict[str, tuple[str, Ownership]]:
    """Ownership from the CRs' annotations: (CR, partition recorded, "creating"|"created"|"adopted"). A
    record with another value is ignored (never ours by guesswork)."""
    owned: dict[str, tuple[str, Ownership]] = {}
    for cr, partition, how in crs:
        known = OWNERSHIPS.get(how or "")
        if partition and known is not None:
            owned.setdefault(partition, (cr, known))
    return owned
