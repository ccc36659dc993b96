"""Maintenance windows, pure: where a Node's window comes from, whether it is acceptable, and which
Slurm MAINT reservations make Slurm keep jobs off its nodes for exactly that window. No I/O; the
controller (controller.py) reads the caches, calls these and writes.

A window is an ISO 8601 interval, `2026-12-01T02:00:00Z/2026-12-01T06:00:00Z` or
`2026-12-01T02:00:00Z/PT4H`, from the Node annotation `slurm-syncer.dev/maintenance-window`, or read from
a Node condition that announces maintenance (docs/interop.md says what each source gives)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from syncer.model.keys import Keys
from syncer.model.kube import KubeNode
from syncer.slurm.models import Reservation

PREFIX = "k8s-maint-"
# Slurm: MAINT marks the nodes as in maintenance for accounting and lets the window overlap other
# reservations; IGNORE_JOBS lets it be made while jobs run on those nodes (else Slurm refuses it).
FLAGS = ("MAINT", "IGNORE_JOBS")
USERS = ("root",)  # a reservation needs users or accounts; nobody else may run jobs inside it
STAMP = "slurm-syncer.dev/maintenance"  # comment written on each reservation (scontrol shows it)

RULE_UNPARSEABLE = "not an ISO 8601 interval (start/end or start/duration, e.g. 2026-12-01T02:00:00Z/PT4H)"
RULE_END_BEFORE_START = "its end is not after its start"
RULE_TOO_LONG = "longer than --max-maintenance-window"
RULE_PAST = "its end has already passed"


@dataclass(frozen=True)
class Window:
    start: int  # epoch seconds, UTC
    end: int

    @property
    def text(self) -> str:
        return f"{_iso(self.start)}/{_iso(self.end)}"


@dataclass(frozen=True)
class MaintenanceCondition:
    """A Node condition type that announces maintenance while True; `shift_s` moves the start read from
    it (e.g. -1h: Nebius wants jobs gone an hour before its SLA deadline)."""

    type: str
    shift_s: float = 0.0


@dataclass(frozen=True)
class MaintenanceOptions:
    conditions: tuple[MaintenanceCondition, ...] = ()
    max_window_s: float = 7 * 86400.0
    default_duration_s: float = 4 * 3600.0  # a source that gives only a start


@dataclass(frozen=True)
class NodeWindow:
    """What a Node asks for: its window, or why its input was not used (`problem`, naming the rule)."""

    node: str
    source: str  # the annotation key or the condition type
    value: str  # as found, for Events
    window: Window | None
    problem: str = ""


class InvalidWindow(ValueError):
    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)")
_DURATION = re.compile(r"P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")
_INTERVAL = re.compile(r"(\S+)/(\S+)")


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> int:
    """An RFC 3339 / ISO 8601 timestamp with a zone (Z or +hh:mm): a time without one is ambiguous."""
    if not _TIMESTAMP.fullmatch(text):
        raise InvalidWindow(RULE_UNPARSEABLE)
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        raise InvalidWindow(RULE_UNPARSEABLE) from None


def parse_duration(text: str) -> int:
    match = _DURATION.fullmatch(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        raise InvalidWindow(RULE_UNPARSEABLE)
    weeks, days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int(((weeks * 7 + days) * 24 + hours) * 3600 + minutes * 60 + seconds)


def parse_interval(text: str) -> Window:
    """`start/end` or `start/duration` (durations as PT4H, P1DT2H, PT90M)."""
    match = _INTERVAL.fullmatch(text.strip())
    if match is None:
        raise InvalidWindow(RULE_UNPARSEABLE)
    start = parse_time(match.group(1))
    tail = match.group(2)
    end = start + parse_duration(tail) if tail.startswith("P") else parse_time(tail)
    return Window(start, end)


def check(window: Window, now: float, max_window_s: float) -> None:
    if window.end <= window.start:
        raise InvalidWindow(RULE_END_BEFORE_START)
    if window.end - window.start > max_window_s:
        raise InvalidWindow(f"{RULE_TOO_LONG} ({_span(max_window_s)})")
    if window.end <= now:
        raise InvalidWindow(RULE_PAST)


def _span(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours / 24:g} days" if hours >= 24 and hours % 24 == 0 else f"{hours:g} h"


def _from_condition(message: str, since: float, spec: MaintenanceCondition, default_s: float) -> Window:
    """An interval in the message wins; else its first timestamp is the start (and a second the end);
    else the condition's lastTransitionTime. Without an end: `default_s` after the start."""
    for candidate in _INTERVAL.findall(message):
        try:
            found = parse_interval("/".join(candidate))
        except InvalidWindow:
            continue
        return Window(found.start + int(spec.shift_s), found.end)
    stamps = [parse_time(t) for t in _TIMESTAMP.findall(message)]
    start = (stamps[0] if stamps else int(since)) + int(spec.shift_s)
    end = stamps[1] if len(stamps) > 1 else start + int(default_s)
    return Window(start, end)


def window_of(node: KubeNode, opts: MaintenanceOptions, now: float) -> NodeWindow | None:
    """The Node's window: the annotation first, then the listed conditions in their order."""
    value = node.annotations.get(Keys.MAINTENANCE_WINDOW)
    if value is not None:
        try:
            window = parse_interval(value)
            check(window, now, opts.max_window_s)
        except InvalidWindow as exc:
            return NodeWindow(node.name, Keys.MAINTENANCE_WINDOW, value, None, exc.rule)
        return NodeWindow(node.name, Keys.MAINTENANCE_WINDOW, value, window)
    for spec in opts.conditions:
        cond = node.condition(spec.type)
        if cond is None or cond.status != "True":
            continue
        shown = f"{cond.reason}: {cond.message}" if cond.reason else cond.message
        try:
            window = _from_condition(
                cond.message, cond.last_transition_time or now, spec, opts.default_duration_s
            )
            check(window, now, opts.max_window_s)
        except InvalidWindow as exc:
            return NodeWindow(node.name, spec.type, shown, None, exc.rule)
        return NodeWindow(node.name, spec.type, shown, window)
    return None


# -- reservations -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Desired:
    window: Window
    nodes: tuple[str, ...]  # Slurm node names, sorted


@dataclass(frozen=True)
class Write:
    action: str  # "create", "update" or "delete"
    name: str
    window: Window | None = None
    nodes: tuple[str, ...] = ()
    start: int | None = None  # None: leave the start alone (the reservation has begun)
    before: Reservation | None = None  # the reservation as it was (update, delete)


def owner_tag(owner: str) -> str:
    return hashlib.sha256(owner.encode()).hexdigest()[:6]


def reservation_name(tag: str, window: Window) -> str:
    """From the window at creation: the same window always gets the same name, so a create repeated
    after a crash updates the first one instead of making a second. An update keeps the name."""
    compact = "%Y%m%dT%H%M%SZ"
    start = datetime.fromtimestamp(window.start, UTC).strftime(compact)
    end = datetime.fromtimestamp(window.end, UTC).strftime(compact)
    return f"{PREFIX}{tag}-{start}-{end}"


def owned(reservation: Reservation, tag: str) -> bool:
    """Ours: our prefix with this syncer's owner tag, and MAINT. slurmrestd does not return the comment
    stamp, so the name is what can be checked; any other reservation is never changed or deleted."""
    return reservation.name.startswith(f"{PREFIX}{tag}-") and "MAINT" in reservation.flags


def group(windows: Mapping[str, Window]) -> list[Desired]:
    """Slurm nodes with the same window share one reservation."""
    by_window: dict[Window, list[str]] = {}
    for name, window in windows.items():
        by_window.setdefault(window, []).append(name)
    return [
        Desired(w, tuple(sorted(names)))
        for w, names in sorted(by_window.items(), key=lambda kv: (kv[0].start, kv[0].end))
    ]


def _same_start(reservation: Reservation, window: Window, now: float) -> bool:
    begun = reservation.start <= now
    return reservation.start == window.start or (begun and window.start <= now)


def _matches(reservation: Reservation, window: Window, now: float) -> bool:
    return reservation.end == window.end and _same_start(reservation, window, now)


def _merged(desired: Sequence[Desired], now: float) -> list[tuple[Window, tuple[str, ...], list[Window]]]:
    """Windows already under way with the same end are one window to Slurm (both start now): one
    reservation, named after the earliest. Returns (its window, its nodes, the windows it stands for)."""
    merged: dict[tuple[int | None, int], tuple[Window, set[str], list[Window]]] = {}
    for want in desired:
        key = (want.window.start if want.window.start > now else None, want.window.end)
        have = merged.get(key)
        if have is None:
            merged[key] = (want.window, set(want.nodes), [want.window])
        else:
            first = min(have[0], want.window, key=lambda w: w.start)
            merged[key] = (first, have[1] | set(want.nodes), [*have[2], want.window])
    return [(w, tuple(sorted(nodes)), windows) for w, nodes, windows in merged.values()]


def plan(
    desired: Sequence[Desired], existing: Iterable[Reservation], tag: str, now: float
) -> tuple[list[Write], dict[Window, str]]:
    """The writes that make Slurm's reservations (ours only: `existing` is already filtered) match.

    Each desired window takes the reservation named for it, else one with its window, else the one sharing
    most nodes (a changed window updates its reservation); the rest are deleted. A window already under
    way starts now. A reservation that has begun cannot move its start (Slurm refuses): it is replaced.
    Also returns each window's reservation name once the writes are done."""
    wants = _merged(desired, now)
    remaining = {r.name: r for r in existing}
    matched: dict[int, Reservation] = {}
    for i, (window, _nodes, _windows) in enumerate(wants):  # the same window always has the same name
        found = remaining.pop(reservation_name(tag, window), None)
        if found is not None:
            matched[i] = found
    for i, (window, _nodes, _windows) in enumerate(wants):
        if i not in matched and (
            found := next((r for r in remaining.values() if _matches(r, window, now)), None)
        ):
            matched[i] = remaining.pop(found.name)
    for i, (_window, nodes, _windows) in enumerate(wants):
        best = max(remaining.values(), key=lambda r: len(set(r.nodes) & set(nodes)), default=None)
        if i not in matched and best is not None and set(best.nodes) & set(nodes):
            matched[i] = remaining.pop(best.name)
    writes = [Write("delete", r.name, before=r) for r in remaining.values()]
    names: dict[Window, str] = {}
    for i, (window, nodes, windows) in enumerate(wants):
        have = matched.get(i)
        start = max(window.start, int(now))
        fresh = reservation_name(tag, window)
        replace = have is not None and have.start <= now < window.start
        names.update(dict.fromkeys(windows, fresh if have is None or replace else have.name))
        if have is None:
            writes.append(Write("create", fresh, window, nodes, start))
        elif replace:
            writes.append(Write("delete", have.name, before=have))
            writes.append(Write("create", fresh, window, nodes, start))
        elif not _matches(have, window, now) or have.nodes != nodes:
            begun = have.start <= now
            writes.append(Write("update", have.name, window, nodes, None if begun else start, have))
    return writes, names


def running_at(jobs: Iterable[tuple[Sequence[str], int]], starts: Mapping[str, int]) -> dict[str, int]:
    """Per Slurm node with a window start: its running jobs that will still run then (their end time,
    start plus time limit, is after it; a job with no end known counts)."""
    counts: dict[str, int] = dict.fromkeys(starts, 0)
    for nodes, end in jobs:
        for name in nodes:
            start = starts.get(name)
            if start is not None and (end == 0 or end > start):
                counts[name] += 1
    return counts
