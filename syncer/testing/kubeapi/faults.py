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
    _running: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._running.set()

    def fail_next(self, count: int, status: int = 500, retry_after_s: int = 1) -> None:
        """The next `count` API requests (not watches already open) get `status` (429 adds Retry-After)."""
        self.fail_remaining, self.fail_status, self.retry_after_s = count, status, retry_after_s

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
        self.resume()
