"""Slurm partitions as the syncer reads and writes them: typed settings, the decode shape of
`GET /partitions/` (only the fields used) and the body of `POST /partitions/` (v0.0.45, Slurm 26.05+).

Measured on 26.05.5 (docs/slurm-releases.md, "Partitions"): one POST creates or updates by name and changes
only the fields sent; `nodes.configured` takes `+node`/`-node`; some bad values are stored instead of refused
(an unknown state leaves the partition INACTIVE, a negative tier becomes 65535), so every value is checked
here before it is sent (`check`), not left to Slurm.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Literal

import msgspec

from syncer.slurm.errors import SlurmMessage
from syncer.slurm.hostlist import expand
from syncer.slurm.models import Envelope, MaybeNumber, Number

STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
# EXCLUSIVE is refused by v0.0.45's parser ("expected NO, YES[:#], or FORCE[:#]", measured)
OVERSUBSCRIBE = ("NO", "YES", "FORCE")
EXCLUSIVE = ("NO", "USER", "TOPO")  # partition.exclusive; "YES" is refused (measured)
DEFAULT_SHARE = 4  # YES/FORCE without a count: Slurm stores YES:4 / FORCE:4
UNLIMITED: Literal["UNLIMITED"] = "UNLIMITED"
Limit = int | Literal["UNLIMITED"]
U16_MAX = 65533  # PriorityTier/PriorityJobFactor are uint16; 65534 and 65535 mean "unset"/"infinite"
U32_MAX = 4294967293
# Slurm takes any name (a space too, measured); the syncer only writes names scontrol and sbatch -p can
# use without quoting.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True)
class OverSubscribe:
    mode: str  # NO, YES, FORCE
    jobs: int = 0  # YES:n / FORCE:n

    @property
    def text(self) -> str:
        return oversubscribe_text(self.mode, self.jobs)

    @classmethod
    def parse(cls, text: str) -> OverSubscribe:
        mode, _, jobs = text.upper().partition(":")
        return cls(mode, int(jobs) if jobs.isdigit() else 0)


# A plain function, not the property's body: mutmut 3 does not mutate decorated functions (scripts/mutation).
def oversubscribe_text(mode: str, jobs: int) -> str:
    """`YES:n` / `FORCE:n` with a count, the mode alone otherwise (a count means nothing to NO)."""
    return f"{mode}:{jobs}" if jobs and mode in ("YES", "FORCE") else mode


@dataclass(frozen=True)
class PartitionSettings:
    """The settings a SlurmPartition may manage; None: not managed (left as Slurm has it)."""

    state: str | None = None
    default: bool | None = None
    hidden: bool | None = None
    max_time: Limit | None = None  # minutes
    default_time: Limit | None = None  # minutes
    max_nodes: Limit | None = None  # per job
    min_nodes: int | None = None  # per job
    priority_tier: int | None = None
    priority_job_factor: int | None = None
    grace_time: int | None = None  # seconds
    allow_accounts: tuple[str, ...] | None = None  # sorted
    deny_accounts: tuple[str, ...] | None = None
    allow_groups: tuple[str, ...] | None = None
    allow_qos: tuple[str, ...] | None = None
    deny_qos: tuple[str, ...] | None = None
    qos: str | None = None
    oversubscribe: OverSubscribe | None = None
    exclusive: str | None = None  # NO, USER (a node runs one user's jobs), TOPO
    alternate: str | None = None

    def managed(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class PartitionState:
    """A partition as Slurm has it now."""

    name: str
    nodes: frozenset[str]  # expanded
    node_list: str  # as Slurm shows it (a hostlist)
    settings: PartitionSettings  # every field read (None only where this REST version does not show it)
    total_cpus: int = 0
    # how its jobs are preempted (("CANCEL",), ("OFF",), ...: the global PreemptMode unless it sets its own;
    # () before v0.0.45, which does not show it; read, never written: check's preemption line)
    preempt_mode: tuple[str, ...] = ()


class InvalidPartition(ValueError):
    """A value Slurm would refuse or, worse, store wrongly; names the field and the rule."""

    def __init__(self, field: str, value: object, rule: str) -> None:
        super().__init__(f"{field} {value!r}: {rule}")
        self.field = field
        self.value = value
        self.rule = rule


def _limit(field: str, value: Limit | None, low: int, high: int) -> None:
    if value is None or value == UNLIMITED:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidPartition(field, value, f"must be a whole number from {low} to {high}, or UNLIMITED")


def check(name: str, settings: PartitionSettings) -> None:
    """Refuse what Slurm would refuse or silently store as something else (measured, module docstring)."""
    if not NAME.fullmatch(name):
        raise InvalidPartition(
            "name", name, "letters, digits, '_', '.', '-' (at most 63, not starting with -)"
        )
    if settings.state is not None and settings.state not in STATES:
        raise InvalidPartition("state", settings.state, f"must be one of {', '.join(STATES)}")
    _limit("maxTime", settings.max_time, 1, U32_MAX)
    _limit("defaultTime", settings.default_time, 1, U32_MAX)
    _limit("maxNodes", settings.max_nodes, 1, U32_MAX)
    for field, number, high in (
        ("minNodes", settings.min_nodes, U32_MAX),
        ("priorityTier", settings.priority_tier, U16_MAX),
        ("priorityJobFactor", settings.priority_job_factor, U16_MAX),
        ("graceTime", settings.grace_time, U32_MAX),
    ):
        _limit(field, number, 0, high)
    default_time, max_time = settings.default_time, settings.max_time
    # Slurm drops a DefaultTime above MaxTime without an error
    if isinstance(default_time, int) and isinstance(max_time, int) and default_time > max_time:
        raise InvalidPartition("defaultTime", settings.default_time, "must not exceed maxTime")
    max_nodes, min_nodes = settings.max_nodes, settings.min_nodes
    if isinstance(max_nodes, int) and min_nodes is not None and min_nodes > max_nodes:
        raise InvalidPartition("minNodes", settings.min_nodes, "must not exceed maxNodes")
    for field, allow, deny in (
        ("denyAccounts", settings.allow_accounts, settings.deny_accounts),
        ("denyQos", settings.allow_qos, settings.deny_qos),
    ):
        if allow is not None and deny is not None:
            raise InvalidPartition(field, deny, f"cannot be set with {field.replace('deny', 'allow')}")
    if settings.oversubscribe is not None and settings.oversubscribe.mode not in OVERSUBSCRIBE:
        raise InvalidPartition(
            "overSubscribe", settings.oversubscribe.mode, f"one of {', '.join(OVERSUBSCRIBE)}"
        )
    if settings.exclusive is not None and settings.exclusive not in EXCLUSIVE:
        raise InvalidPartition("exclusive", settings.exclusive, f"one of {', '.join(EXCLUSIVE)}")
    if settings.alternate is not None and not NAME.fullmatch(settings.alternate):
        raise InvalidPartition("alternate", settings.alternate, "must be a partition name")


# --- the wire -----------------------------------------------------------------------------------------


def _number(value: Limit) -> dict[str, Any]:
    if value == UNLIMITED:
        return {"set": True, "infinite": True, "number": 0}
    return {"set": True, "infinite": False, "number": value}


def _flag(on: bool, flag: str) -> str:
    return flag if on else f"{flag}_CLEAR"


def body(name: str, settings: PartitionSettings, nodes: str | None = None) -> dict[str, Any]:
    """One entry of `POST /partitions/`: the name, `nodes` when given (a hostlist, or `+a,-b` changes) and
    the managed settings only, so whatever is not sent keeps its value in Slurm."""
    check(name, settings)
    entry: dict[str, Any] = {"name": name}
    if nodes is not None:
        entry["nodes"] = {"configured": nodes}
    s = settings
    section: dict[str, Any] = {}
    if s.state is not None:
        section["state"] = [s.state]
    if s.oversubscribe is not None:
        section["oversubscribe"] = s.oversubscribe.text
    if s.exclusive is not None:
        section["exclusive"] = s.exclusive
    if section:
        entry["partition"] = section
    flags = [_flag(on, flag) for on, flag in ((s.default, "DEFAULT"), (s.hidden, "HIDDEN")) if on is not None]
    if flags:
        entry["flags"] = flags
    maximums = {
        key: _number(value)
        for key, value in (("time", s.max_time), ("nodes", s.max_nodes))
        if value is not None
    }
    if maximums:
        entry["maximums"] = maximums
    if s.default_time is not None:
        entry["defaults"] = {"time": _number(s.default_time)}
    if s.min_nodes is not None:
        entry["minimums"] = {"nodes": s.min_nodes}
    priority = {
        key: value
        for key, value in (("tier", s.priority_tier), ("job_factor", s.priority_job_factor))
        if value is not None
    }
    if priority:
        entry["priority"] = priority
    if s.grace_time is not None:
        entry["grace_time"] = s.grace_time
    if s.alternate is not None:
        entry["alternate"] = s.alternate
    for section_name, pairs in (
        ("accounts", (("allowed", s.allow_accounts), ("deny", s.deny_accounts))),
        ("groups", (("allowed", s.allow_groups),)),
        ("qos", (("allowed", s.allow_qos), ("deny", s.deny_qos))),
    ):
        listed = {key: ",".join(names) for key, names in pairs if names is not None}
        if listed:
            entry[section_name] = listed
    if s.qos is not None:
        entry.setdefault("qos", {})["assigned"] = s.qos
    return entry


@dataclass(frozen=True)
class PartitionWrite:
    """One entry of a `POST /partitions/`: a create or an update."""

    name: str
    settings: PartitionSettings
    nodes: str | None = None


# "Failed to create partition x with description at index 1" (26.05.5): which entry of a list was refused
_AT_INDEX = re.compile(r"\bat index (\d+)\b")


def refused_entries(exc: Exception, count: int) -> dict[int, list[SlurmMessage]] | None:
    """The entries of a `count`-entry `POST /partitions/` that Slurm refused, by index, with their errors;
    None when an error names no entry (which entries were applied is then unknown)."""
    refused: dict[int, list[SlurmMessage]] = {}
    for error in getattr(exc, "errors", ()):
        found = _AT_INDEX.search(error.description)
        if found is None or not 0 <= int(found.group(1)) < count:
            return None
        refused.setdefault(int(found.group(1)), []).append(error)
    return refused or None


class _Nodes(msgspec.Struct):
    configured: str = ""


class _Allowed(msgspec.Struct):
    allowed: str = ""
    deny: str = ""
    assigned: str = ""


class _Section(msgspec.Struct):
    state: list[str] = []
    oversubscribe: str | None = None  # v0.0.45 only
    exclusive: str | None = None  # v0.0.45 only


class _Maximums(msgspec.Struct):
    time: MaybeNumber = None
    nodes: MaybeNumber = None


class _Defaults(msgspec.Struct):
    time: MaybeNumber = None


class _Minimums(msgspec.Struct):
    nodes: int = 0


class _Priority(msgspec.Struct):
    tier: int = 0
    job_factor: int = 0


class _Cpus(msgspec.Struct):
    total: int = 0


class RawPartition(msgspec.Struct):
    """The fields of a partition the syncer reads, v0.0.40 .. v0.0.45 (`flags` and the oversubscribe and
    exclusive strings only from v0.0.45)."""

    name: str
    nodes: _Nodes = msgspec.field(default_factory=_Nodes)
    partition: _Section = msgspec.field(default_factory=_Section)
    flags: list[str] | None = None
    maximums: _Maximums = msgspec.field(default_factory=_Maximums)
    defaults: _Defaults = msgspec.field(default_factory=_Defaults)
    minimums: _Minimums = msgspec.field(default_factory=_Minimums)
    priority: _Priority = msgspec.field(default_factory=_Priority)
    grace_time: int = 0
    alternate: str = ""
    accounts: _Allowed = msgspec.field(default_factory=_Allowed)
    groups: _Allowed = msgspec.field(default_factory=_Allowed)
    qos: _Allowed = msgspec.field(default_factory=_Allowed)
    cpus: _Cpus = msgspec.field(default_factory=_Cpus)
    preempt_mode: list[str] = []

    def to_state(self) -> PartitionState:
        flags = None if self.flags is None else {f.upper() for f in self.flags}
        section = self.partition
        states = [s.upper() for s in section.state]
        settings = PartitionSettings(
            state=states[0] if states else None,
            default=None if flags is None else "DEFAULT" in flags,
            hidden=None if flags is None else "HIDDEN" in flags,
            max_time=_read_limit(self.maximums.time),
            default_time=_read_limit(self.defaults.time),
            max_nodes=_read_limit(self.maximums.nodes),
            min_nodes=self.minimums.nodes,
            priority_tier=self.priority.tier,
            priority_job_factor=self.priority.job_factor,
            grace_time=self.grace_time,
            allow_accounts=_names(self.accounts.allowed),
            deny_accounts=_names(self.accounts.deny),
            allow_groups=_names(self.groups.allowed),
            allow_qos=_names(self.qos.allowed),
            deny_qos=_names(self.qos.deny),
            qos=self.qos.assigned,
            oversubscribe=None if (over := section.oversubscribe) is None else OverSubscribe.parse(over),
            exclusive=None if section.exclusive is None else section.exclusive.upper(),
            alternate=self.alternate,
        )  # fmt: skip
        listed = self.nodes.configured
        # REST names slurm.conf's PreemptMode=OFF "DISABLED" (26.05.5, every API version)
        modes = tuple("OFF" if m.upper() == "DISABLED" else m.upper() for m in self.preempt_mode)
        return PartitionState(self.name, frozenset(expand(listed)), listed, settings, self.cpus.total, modes)


def _read_limit(value: MaybeNumber) -> Limit | None:
    if isinstance(value, Number):
        if value.infinite:
            return UNLIMITED
        return value.number if value.set else None
    return value


def _names(listed: str) -> tuple[str, ...]:
    """`ALL` and empty both mean "no restriction" in Slurm: read as ()."""
    names = tuple(sorted(n for n in listed.split(",") if n))
    return () if names == ("ALL",) else names


class PartitionsResponse(Envelope):
    partitions: list[RawPartition] = []


def node_changes(have: Iterable[str], want: Iterable[str]) -> str:
    """`+a,+b,-c`: the incremental `nodes.configured` that turns `have` into `want` ("" when equal)."""
    have_set, want_set = set(have), set(want)
    return ",".join(
        [*(f"+{n}" for n in sorted(want_set - have_set)), *(f"-{n}" for n in sorted(have_set - want_set))]
    )


def partition_in_use(exc: Exception) -> bool:
    """Slurm refused a DELETE because jobs (running or pending) still name the partition (error 2075)."""
    errors = getattr(exc, "errors", ())
    return any(e.error_number == 2075 or "Partition is in use" in e.error for e in errors)
