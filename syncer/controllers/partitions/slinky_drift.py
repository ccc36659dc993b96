"""Where slurmctld's partition no longer agrees with the slurm.conf line Slinky wrote for it (pure).

With `ReconfigFlags=KeepPartInfo` slurmctld keeps every partition it has through a reconfigure and a restart,
slurm.conf's own included (docs/slurm-releases.md): a changed NodeSet `partition.config` or extraConf line is
not applied, and a removed line leaves the partition in place. Only a new line is added. This module says
which of a line's settings slurmctld does not have, and what to run; it never writes to Slurm (slurm.conf
stays Slinky's source of truth).

Compared (the settings a SlurmPartition manages, read as slurmctld reads slurm.conf,
src/common/read_config.c): State, Default, Hidden, MaxTime, DefaultTime, MaxNodes, MinNodes, PriorityTier,
PriorityJobFactor (and Priority, which sets both), GraceTime, AllowAccounts, DenyAccounts, AllowGroups,
AllowQos, DenyQos, QOS, OverSubscribe (and its old name Shared), Alternate. Not compared: Nodes (a NodeSet's
name or `ALL` over dynamic nodes, not a host list), every other key, a value slurmctld would refuse, and a key
left off the line (slurmctld's default for it is not assumed)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from syncer.slurm.partitions import STATES, UNLIMITED, OverSubscribe, PartitionSettings

_TRUE, _FALSE = ("YES", "UP", "TRUE", "1"), ("NO", "DOWN", "FALSE", "0")  # slurm.conf's booleans
_UNLIMITED_WORDS = ("UNLIMITED", "INFINITE")


def _boolean(text: str) -> bool | None:
    word = text.upper()
    return True if word in _TRUE else False if word in _FALSE else None


def _state(text: str) -> str | None:
    """slurmctld takes a state by its first letters (`DOWNx` is DOWN)."""
    return next((state for state in STATES if text.upper().startswith(state)), None)


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdecimal() else None


def _count(text: str) -> Any:
    """A node count: a number, or UNLIMITED / INFINITE."""
    return UNLIMITED if text.upper() in _UNLIMITED_WORDS else _number(text)


def _minutes(text: str) -> Any:
    """A time limit as slurmctld reads slurm.conf's (time_str2mins): `minutes`, `minutes:seconds`,
    `hours:minutes:seconds`, `days-hours[:minutes[:seconds]]`, UNLIMITED / INFINITE / -1; seconds round up to
    whole minutes; 0 is 0 minutes."""
    if text.upper() in (*_UNLIMITED_WORDS, "-1"):
        return UNLIMITED
    days, dash, clock = text.rpartition("-")
    fields = clock.split(":")
    numbers = [days] * bool(dash) + fields
    if len(fields) > 3 or not all(part.isascii() and part.isdecimal() for part in numbers):
        return None
    units = (86400, 3600, 60, 1) if dash else ((60,), (60, 1), (3600, 60, 1))[len(fields) - 1]
    seconds = sum(int(part) * unit for part, unit in zip(numbers, units, strict=False))
    return -(-seconds // 60)


def _names(text: str, lower: bool) -> tuple[str, ...]:
    """A comma list, sorted; `ALL` is no restriction (read as (), as the partition view reads it). slurmctld
    lower-cases account and QOS names."""
    names = tuple(sorted(n.lower() if lower else n for n in text.split(",") if n))
    return () if tuple(n.upper() for n in names) == ("ALL",) else names


def _lowered_names(text: str) -> tuple[str, ...]:
    return _names(text, lower=True)


def _kept_names(text: str) -> tuple[str, ...]:
    return _names(text, lower=False)


def _oversubscribe(text: str) -> OverSubscribe | None:
    """NO, YES[:n], FORCE[:n] as slurmctld stores them (YES and FORCE alone: 4 jobs; a bad count: NO).
    EXCLUSIVE is not compared."""
    mode, colon, count = text.upper().partition(":")
    if mode == "NO" and not colon:
        return OverSubscribe("NO")
    if mode not in ("YES", "FORCE"):
        return None
    jobs = int(count) if count.isascii() and count.isdecimal() else 0
    if not colon:
        return OverSubscribe(mode, 4)
    return OverSubscribe(mode, jobs) if jobs > (1 if mode == "YES" else 0) else OverSubscribe("NO")


def _text(text: str) -> str:
    return text


def _lower(text: str) -> str:
    return text.lower()


@dataclass(frozen=True)
class _Key:
    spelling: str  # slurm.conf's and scontrol's
    field: str  # PartitionSettings'
    read: Callable[[str], Any]  # slurm.conf's text -> the field's value; None: not comparable
    empty: str = "(none)"  # slurmctld's empty value as shown


KEYS = {
    key.spelling.lower(): key
    for key in (
        _Key("State", "state", _state),
        _Key("Default", "default", _boolean),
        _Key("Hidden", "hidden", _boolean),
        _Key("MaxTime", "max_time", _minutes),
        _Key("DefaultTime", "default_time", _minutes),
        _Key("MaxNodes", "max_nodes", _count),
        _Key("MinNodes", "min_nodes", _number),
        _Key("PriorityTier", "priority_tier", _number),
        _Key("PriorityJobFactor", "priority_job_factor", _number),
        _Key("GraceTime", "grace_time", _number),
        _Key("AllowAccounts", "allow_accounts", _lowered_names, "ALL"),
        _Key("DenyAccounts", "deny_accounts", _lowered_names),
        _Key("AllowGroups", "allow_groups", _kept_names, "ALL"),
        _Key("AllowQos", "allow_qos", _lowered_names, "ALL"),
        _Key("DenyQos", "deny_qos", _lowered_names),
        _Key("QOS", "qos", _lower),
        _Key("OverSubscribe", "oversubscribe", _oversubscribe),
        _Key("Alternate", "alternate", _text),
    )
}


@dataclass(frozen=True)
class Difference:
    key: str  # slurm.conf's spelling
    declared: str  # slurm.conf's value, as written there (scontrol takes the same forms)
    live: str  # slurmctld's, as scontrol shows it


def _shown(value: Any, empty: str) -> str:
    """slurmctld's value as scontrol takes it (`empty` for an empty list or name)."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, OverSubscribe):
        return value.text
    if isinstance(value, tuple):
        value = ",".join(value)
    return str(value) or empty


def _effective(declared: Mapping[str, str]) -> dict[str, str]:
    """The line's settings with slurmctld's aliases folded in: `Priority` sets both priorities; `Shared`
    is OverSubscribe's old name (OverSubscribe wins)."""
    settings = dict(declared)
    if "priority" in settings:
        settings["prioritytier"] = settings["priorityjobfactor"] = settings["priority"]
    if "shared" in settings:
        settings.setdefault("oversubscribe", settings["shared"])
    return settings


def differences(declared: Mapping[str, str], live: PartitionSettings) -> list[Difference]:
    """Each compared key of a partition line ({lower-cased key: value}, DEFAULT lines applied) whose value
    slurmctld does not have; a key slurmctld does not show (None) or a value it would refuse is left out."""
    found = []
    for name, value in _effective(declared).items():
        key = KEYS.get(name)
        if key is None:
            continue
        wanted, have = key.read(value), getattr(live, key.field)
        if key.field == "qos" and isinstance(have, str):
            have = have.lower()
        if wanted is None or have is None or wanted == have:
            continue
        found.append(Difference(key.spelling, value, _shown(getattr(live, key.field), key.empty)))
    return sorted(found, key=lambda d: d.key)


def update_command(partition: str, found: list[Difference]) -> str:
    """The one scontrol line that gives slurmctld slurm.conf's values."""
    return " ".join([f"scontrol update partitionname={partition}", *(f"{d.key}={d.declared}" for d in found)])


def frozen_message(partition: str, where: str, found: list[Difference]) -> str:
    said = ", ".join(f"{d.key}={d.declared} (slurmctld has {d.key}={d.live})" for d in found)
    return (
        f"partition {partition}: slurm.conf ({where}) says {said}; KeepPartInfo keeps slurmctld's through a "
        f"reconfigure and a restart: apply it with `{update_command(partition, found)}`"
    )


def removed_message(partition: str, where: str) -> str:
    return (
        f"partition {partition} is no longer in slurm.conf ({where} dropped its line) but slurmctld keeps it "
        f"(KeepPartInfo keeps a removed partition through a reconfigure and a restart): remove it with "
        f"`scontrol delete partitionname={partition}` once its jobs are gone, or declare it again"
    )


def frozen(
    declared: Mapping[str, tuple[str, Mapping[str, str]]],
    removed: Mapping[str, str],
    present: Mapping[str, PartitionSettings],
) -> dict[tuple[str, str], str]:
    """(partition, the Slinky object) -> what to tell, for each partition slurmctld keeps unlike slurm.conf:
    - declared (partition -> (object, its line's settings)) and present with a compared key that differs;
    - removed from a line (partition -> the object that dropped it) while slurmctld still has it and no object
      declares it again.
    A declared partition slurmctld does not have is not frozen: KeepPartInfo adds a new line's partition at
    the next reconfigure (measured, docs/slurm-releases.md)."""
    told: dict[tuple[str, str], str] = {}
    for partition, (where, settings) in declared.items():
        live = present.get(partition)
        found = differences(settings, live) if live is not None else []
        if found:
            told[partition, where] = frozen_message(partition, where, found)
    for partition, where in removed.items():
        if partition in present and partition not in declared:
            told[partition, where] = removed_message(partition, where)
    return told
