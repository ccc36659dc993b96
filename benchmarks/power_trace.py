"""A benchmark-only probe of the syncer's part of a power-up (issue 47): from the Slurm node cache applying
the list that first shows a member POWERING_UP, to its NodeSet's pass beginning, to that pass POSTing the
member's pod. Wraps the running service's objects (no code of the syncer changes for it); every time is
this host's wall clock (`time.time()`), as the benchmark's other stamps.

    trace = PowerTrace(service)      # after service.start()
    trace.of("lat-3")                # {"list_asked", "seen", "pass_busy", "pass_began", "post_sent", ...}
    trace.passes()                   # every NodeSet pass: began, seconds, pods it created
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from syncer.app.service import SyncerService
from syncer.controllers.nodeset.power import powering_up
from syncer.runtime.controller import Result
from syncer.slurm.cache import NodeChange


def _wall(monotonic: float) -> float:
    """A `time.monotonic()` stamp on the wall clock."""
    return time.time() - (time.monotonic() - monotonic)


@dataclass
class Pass:
    key: str
    began: float
    ended: float = 0.0
    created: list[str] = field(default_factory=list)
    requeue_after: float | None = None  # what the pass asked for


class PowerTrace:
    def __init__(self, service: SyncerService) -> None:
        controller = service.nodesets
        if controller is None:
            raise RuntimeError("the NodeSet controller is off")
        self.cache = service.slurm_cache
        self.queue = controller.runner.queue
        self.seen: dict[str, float] = {}  # member -> the cache applied a list showing it POWERING_UP
        self.list_asked: dict[str, float] = {}  # ... and when that list was asked for
        self.busy: dict[str, bool] = {}  # ... a NodeSet pass was running then (the key waits for its end)
        self.post: dict[str, tuple[float, float, float]] = {}  # member -> (its pass began, sent, answered)
        self._passes: list[Pass] = []
        self._current: dict[str, Pass] = {}
        self.cache.subscribe(self._changes)
        reconcile, create = controller.reconcile, controller.writes.create_pod

        async def traced_reconcile(key: str) -> Result:
            current = self._current[key] = Pass(key, time.time())
            try:
                result = await reconcile(key)
                current.requeue_after = result.requeue_after
                return result
            finally:
                current.ended = time.time()
                self._passes.append(current)
                self._current.pop(key, None)

        async def traced_create(nodeset: Any, spec: Any, member: Any) -> str:
            current = self._current.get(nodeset.key)
            sent = time.time()
            outcome = await create(nodeset, spec, member)
            if current is not None:
                current.created.append(member.name)
                self.post.setdefault(member.name, (current.began, sent, time.time()))
            return outcome

        controller.reconcile = traced_reconcile  # type: ignore[method-assign]
        controller.writes.create_pod = traced_create  # type: ignore[method-assign]

    def _changes(self, changes: list[NodeChange]) -> None:
        now = time.time()
        for change in changes:
            if change.after is None or not powering_up(change.after) or change.name in self.seen:
                continue
            self.seen[change.name] = now
            self.list_asked[change.name] = _wall(self.cache.listed_at)
            self.busy[change.name] = self.queue.in_flight > 0

    def of(self, member: str) -> dict[str, Any]:
        began, sent, answered = self.post.get(member, (None, None, None))
        return {
            "list_asked": self.list_asked.get(member),
            "seen": self.seen.get(member),
            "pass_busy": self.busy.get(member),
            "pass_began": began,
            "post_sent": sent,
            "post_answered": answered,
        }

    def passes(self) -> list[dict[str, Any]]:
        return [self._row(p) for p in self._passes]

    @staticmethod
    def _row(p: Pass) -> dict[str, Any]:
        seconds = round(p.ended - p.began, 4)
        return {"key": p.key, "began": p.began, "seconds": seconds, "created": p.created,
                "requeue_after": p.requeue_after}  # fmt: skip


# (start, end, label) of the syncer's way, per member
PARTS: tuple[tuple[str, str, str], ...] = (
    ("powering_up", "list_asked", "POWERING_UP -> the list that shows it asked for (probe, duty limit)"),
    ("list_asked", "seen", "list asked -> applied (list, decode)"),
    ("seen", "pass_began", "applied -> the pass that creates the pod began (queue, a pass running)"),
    ("pass_began", "post_sent", "pass began -> pod POST sent (the pass's work before it)"),
    ("post_sent", "post_answered", "POST sent -> answered"),
    ("powering_up", "pod_created", "POWERING_UP -> pod created (the syncer)"),
)


def traced_parts(
    samples: list[dict[str, Any]], summary: Callable[[list[float]], dict[str, float]]
) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for start, end, label in PARTS:
        values = [s[end] - s[start] for s in samples if s.get(start) and s.get(end)]
        table[label] = summary(values) if values else {"n": 0}
    table["a pass was running when the cache showed it"] = sum(1 for s in samples if s.get("pass_busy"))
    return table


def pass_seconds(passes: list[dict[str, Any]], summary: Callable[[list[float]], dict[str, float]]) -> Any:
    """Every pass's seconds, and those that created pods apart."""
    creating = [p["seconds"] for p in passes if p["created"]]
    return {
        "all": summary([p["seconds"] for p in passes]) if passes else {"n": 0},
        "creating pods": summary(creating) if creating else {"n": 0},
    }
