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
- A partition with jobs is never deleted: it is set DRAIN first (new submissions refused, running jobs go on)
  and deleted once Slurm counts no running or pending job in it (Slurm itself refuses to delete it before).
- Only changed fields are sent; nodes as `+a,-b` changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from syncer.slurm.partitions import (
    InvalidPartition,
    PartitionSettings,
    PartitionState,
    check,
    node_changes,
)

Ownership = Literal["created", "adopted"]
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


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    cr: str
    partition: str
    nodes: str | None = None  # create: the full hostlist (comma list); update: "+a,-b"; else None
    settings: PartitionSettings = NOTHING  # create: all managed; update: the changed fields only
    before: PartitionSettings | None = None  # update: what Slurm had (for the Event: what was put back)
    ownership: Ownership | None = None  # claim: how it becomes ours


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


@dataclass(frozen=True)
class World:
    """Everything the plan reads besides the CRs."""

    present: Mapping[str, PartitionState]  # by partition name, freshly listed
    owned: Mapping[str, tuple[str, Ownership]]  # partition -> (CR, how): the records on the CRs
    jobs: Mapping[str, int]  # partition -> running + pending jobs
    slurm_nodes: frozenset[str]  # every node Slurm knows: an unknown one would be refused (error 2018)
    keeps_partitions: bool | None  # ReconfigFlags has KeepPartInfo; None: /conf could not be read
    writes: bool  # the REST version writes partitions (v0.0.45)
    # partitions Slinky manages -> the object declaring them ("NodeSet ns/name", "Controller ns/name")
    slinky: Mapping[str, str] = field(default_factory=dict)


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
            record = world.owned.get(want.partition)
            ownership = record[1] if record is not None and record[0] == want.cr else None
            _delete(want, world, result, world.present.get(want.partition), ownership)
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
    record = world.owned.get(want.partition)
    add, say = result.actions.append, result.outcomes.__setitem__
    if record is None:
        add(Action("claim", want.cr, want.partition, ownership="created" if have is None else "adopted"))
    elif record[1] == "adopted" and have is None:
        add(Action("claim", want.cr, want.partition, ownership="created"))  # made anew by us: ours to delete
    if have is None:
        add(Action("create", want.cr, want.partition, ",".join(sorted(want.nodes)), want.settings))
        say(want.cr, _outcome(want, False, CREATING, f"creating partition {want.partition}"))
        return
    changed = diff(want.settings, have.settings)
    nodes = node_changes(have.nodes, want.nodes)
    jobs = world.jobs.get(want.partition, 0)
    if changed.managed() or nodes:
        add(Action("update", want.cr, want.partition, nodes or None, changed, have.settings))
        say(want.cr, _outcome(want, False, UPDATING, f"updating partition {want.partition}", jobs))
        return
    say(want.cr, _outcome(want, True, READY, f"partition {want.partition} matches", jobs))


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
    if name in world.present and record is None and not want.adopt:
        return CONFLICT, (
            f"partition {name} exists in Slurm and was not created by slurm-syncer; set spec.adopt: true to "
            "manage it"
        )
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
    unknown = sorted(want.nodes - world.slurm_nodes)
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


def _delete(
    want: Wanted, world: World, result: Plan, have: PartitionState | None, ownership: Ownership | None
) -> None:
    """A CR being deleted: a partition it created is drained, then deleted once its jobs are gone; anything
    else (adopted, foreign, never made) is only released."""
    add, say = result.actions.append, result.outcomes.__setitem__
    if have is None or ownership != "created" or want.partition in world.slinky or not world.writes:
        add(Action("release", want.cr, want.partition))
        say(want.cr, _outcome(want, False, DELETING, f"releasing partition {want.partition}"))
        return
    jobs = world.jobs.get(want.partition, 0)
    if jobs:
        if have.settings.state != "DRAIN":
            add(Action("drain", want.cr, want.partition, settings=PartitionSettings(state="DRAIN"),
                       before=have.settings))  # fmt: skip
        say(want.cr, _outcome(want, False, DRAINING,
                              f"partition {want.partition} drains: {jobs} job(s) remain", jobs))  # fmt: skip
        return
    add(Action("delete", want.cr, want.partition))
    add(Action("release", want.cr, want.partition))
    say(want.cr, _outcome(want, False, DELETING, f"deleting partition {want.partition}"))


def records(crs: Iterable[tuple[str, str | None, str | None]]) -> dict[str, tuple[str, Ownership]]:
    """Ownership from the CRs' annotations: (CR, partition recorded, "created"|"adopted"). A record with
    another value is ignored (never ours by guesswork)."""
    owned: dict[str, tuple[str, Ownership]] = {}
    for cr, partition, how in crs:
        if partition and how in ("created", "adopted"):
            owned.setdefault(partition, (cr, "created" if how == "created" else "adopted"))
    return owned
