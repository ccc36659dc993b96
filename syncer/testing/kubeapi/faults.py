"""Fault injection: what tests turn on to make the emulator misbehave the way a real API server can."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Rule(Generic[T]):
    """Requests of `method` whose path contains `part` get `value`, for the next `left` of them."""

    method: str
    part: str
    value: T
    left: int


def take(rules: list[Rule[T]], method: str, path: str) -> Rule[T] | None:
    """The first rule this request meets, one of its `left` taken (the rule gone with its last)."""
    for index, rule in enumerate(rules):
        if method == rule.method and rule.part in path:
            rule.left -= 1
            if rule.left <= 0:
                del rules[index]
            return rule
    return None


@dataclass
class Faults:
    fail_remaining: int = 0
    fail_status: int = 500
    retry_after_s: int = 1
    latency_s: float = 0.0
    requests_total: int = 0
    requests_failed: int = 0
    # seconds: requests applied at once, answered late
    late_answers: list[Rule[float]] = field(default_factory=list)
    # requests refused with 409 Conflict, not applied
    conflicts: list[Rule[None]] = field(default_factory=list)
    # status: requests applied, then answered with that error
    lost_answers: list[Rule[int]] = field(default_factory=list)
    # (path fragment, field selector fragment): watches that send nothing until release_watches()
    held_watches: list[tuple[str, str]] = field(default_factory=list)
    _running: asyncio.Event = field(default_factory=asyncio.Event)
    _watches_free: asyncio.Event = field(default_factory=asyncio.Event)
    _answers_free: asyncio.Event = field(default_factory=asyncio.Event)  # a held lost answer: once set

    def __post_init__(self) -> None:
        self._running.set()
        self._watches_free.set()
        self._answers_free.set()

    def fail_next(self, count: int, status: int = 500, retry_after_s: int = 1) -> None:
        """The next `count` API requests (not watches already open) get `status` (429 adds Retry-After)."""
        self.fail_remaining, self.fail_status, self.retry_after_s = count, status, retry_after_s

    def answer_late(self, method: str, path_part: str, seconds: float, count: int = 1) -> None:
        """The next `count` `method` requests whose path contains `path_part` are carried out when they
        arrive and answered `seconds` later: a server (or a network) slow on the way back."""
        self.late_answers.append(Rule(method, path_part, seconds, count))

    def answer_delay(self, method: str, path: str) -> float:
        """Seconds to hold this request's answer (taking one from its rule), 0 for none."""
        rule = take(self.late_answers, method, path)
        return 0.0 if rule is None else rule.value

    def conflict_next(self, method: str, path_part: str, count: int = 1) -> None:
        """The next `count` `method` requests whose path contains `path_part` get 409 Conflict, as when
        another client wrote the object after this one read it (its resourceVersion is stale)."""
        self.conflicts.append(Rule(method, path_part, None, count))

    def conflicting(self, method: str, path: str) -> bool:
        """Whether to refuse this request with a conflict (taking one from its rule)."""
        return take(self.conflicts, method, path) is not None

    def lose_answers(
        self, method: str, path_part: str, status: int = 504, count: int = 1, *, held: bool = False
    ) -> None:
        """The next `count` `method` requests whose path contains `path_part` are carried out, then answered
        with `status`: a gateway that timed out (504) after the API server did the write. `held`: that answer
        waits for release_answers() (the client still waiting while the test acts)."""
        self.lost_answers.append(Rule(method, path_part, status, count))
        if held:
            self._answers_free.clear()

    def release_answers(self) -> None:
        self._answers_free.set()

    async def wait_answers_released(self) -> None:
        await self._answers_free.wait()

    def lost_status(self, method: str, path: str) -> int:
        """The error status to answer this request with once carried out (taking one from its rule), 0 for
        none."""
        rule = take(self.lost_answers, method, path)
        return 0 if rule is None else rule.value

    def hold_watches(self, path_part: str, selector_part: str = "") -> None:
        """Watch streams whose path contains `path_part` (and whose field selector contains `selector_part`)
        send nothing more until release_watches(), then everything they missed, in order: an informer that
        lags the API server (its client has not read the stream yet)."""
        self.held_watches.append((path_part, selector_part))
        self._watches_free.clear()

    def release_watches(self) -> None:
        self.held_watches.clear()
        self._watches_free.set()

    def watch_held(self, path: str, selector: str) -> bool:
        return any(part in path and wanted in selector for part, wanted in self.held_watches)

    async def wait_watches_released(self) -> None:
        await self._watches_free.wait()

    def pause(self) -> None:
        """Requests hang (accepted, unanswered) until resume(): an API server that stopped responding."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    async def wait_running(self) -> None:
        await self._running.wait()

    def clear(self) -> None:
        self.fail_remaining = 0
        self.latency_s = 0.0
        self.late_answers.clear()
        self.conflicts.clear()
        self.lost_answers.clear()
        self.release_answers()
        self.release_watches()
        self.resume()
