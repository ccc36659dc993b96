"""Fault injection: what tests turn on to make the emulator misbehave the way a real API server can."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class Faults:
    fail_remaining: int = 0
    fail_status: int = 500
    retry_after_s: int = 1
    latency_s: float = 0.0
    requests_total: int = 0
    requests_failed: int = 0
    # (method, path fragment, seconds, answers left): requests applied at once, answered late
    late_answers: list[tuple[str, str, float, int]] = field(default_factory=list)
    # (method, path fragment, answers left): requests refused with 409 Conflict, not applied
    conflicts: list[tuple[str, str, int]] = field(default_factory=list)
    _running: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._running.set()

    def fail_next(self, count: int, status: int = 500, retry_after_s: int = 1) -> None:
        """The next `count` API requests (not watches already open) get `status` (429 adds Retry-After)."""
        self.fail_remaining, self.fail_status, self.retry_after_s = count, status, retry_after_s

    def answer_late(self, method: str, path_part: str, seconds: float, count: int = 1) -> None:
        """The next `count` `method` requests whose path contains `path_part` are carried out when they
        arrive and answered `seconds` later: a server (or a network) slow on the way back."""
        self.late_answers.append((method, path_part, seconds, count))

    def answer_delay(self, method: str, path: str) -> float:
        """Seconds to hold this request's answer (taking one from its rule), 0 for none."""
        for index, (wanted, part, seconds, left) in enumerate(self.late_answers):
            if method == wanted and part in path:
                if left <= 1:
                    del self.late_answers[index]
                else:
                    self.late_answers[index] = (wanted, part, seconds, left - 1)
                return seconds
        return 0.0

    def conflict_next(self, method: str, path_part: str, count: int = 1) -> None:
        """The next `count` `method` requests whose path contains `path_part` get 409 Conflict, as when
        another client wrote the object after this one read it (its resourceVersion is stale)."""
        self.conflicts.append((method, path_part, count))

    def conflicting(self, method: str, path: str) -> bool:
        """Whether to refuse this request with a conflict (taking one from its rule)."""
        for index, (wanted, part, left) in enumerate(self.conflicts):
            if method == wanted and part in path:
                if left <= 1:
                    del self.conflicts[index]
                else:
                    self.conflicts[index] = (wanted, part, left - 1)
                return True
        return False

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
        self.resume()
