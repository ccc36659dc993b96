"""A keyed work queue like client-go's: a key is queued once however often it is added, never
processed by two workers at once (an add during processing re-runs it once afterwards), failures
retry with exponential backoff and jitter, and `add_after` schedules a key for later."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger("syncer.sync")


class WorkQueue:
    def __init__(
        self,
        handler: Callable[[str], Awaitable[None]],
        *,
        workers: int = 8,
        base_backoff_s: float = 0.05,
        max_backoff_s: float = 30.0,
        max_retries: int | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.handler = handler
        self.workers = workers
        self.base_backoff_s = base_backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_retries = max_retries
        self._queued: OrderedDict[str, None] = OrderedDict()
        self._processing: set[str] = set()
        self._dirty_while_processing: set[str] = set()
        self._attempts: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._timer_due: dict[str, float] = {}
        self._ready = asyncio.Condition()
        self._stopped = False
        self._idle = asyncio.Event()
        self._idle.set()
        self.retries_total = 0
        self.processed_total = 0

    @property
    def depth(self) -> int:
        return len(self._queued)

    @property
    def in_flight(self) -> int:
        return len(self._processing)

    def _update_idle(self) -> None:
        if self._queued or self._processing:
            self._idle.clear()
        else:
            self._idle.set()

    def add(self, key: str) -> None:
        if key in self._processing:
            self._dirty_while_processing.add(key)
        elif key not in self._queued:
            self._queued[key] = None
            self._notify()
        self._update_idle()

    def add_after(self, key: str, delay_s: float) -> None:
        """Queue `key` after `delay_s`; an earlier pending timer for the key wins."""
        if delay_s <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay_s
        if key in self._timers and self._timer_due[key] <= due:
            return
        if key in self._timers:
            self._timers[key].cancel()
        self._timer_due[key] = due
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self._timer_due.pop(key, None)
        self.add(key)

    def _notify(self) -> None:
        async def wake() -> None:
            async with self._ready:
                self._ready.notify()

        with contextlib.suppress(RuntimeError):  # no loop: the workers will see it when they start
            asyncio.get_running_loop().create_task(wake())

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def stop(self) -> None:
        self._stopped = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._timer_due.clear()

        async def wake_all() -> None:
            async with self._ready:
                self._ready.notify_all()

        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(wake_all())

    async def run(self) -> None:
        """Runs the workers until stop() (a stopped queue stays stopped)."""
        await asyncio.gather(*(self._worker() for _ in range(self.workers)))

    async def _next(self) -> str | None:
        async with self._ready:
            while not self._queued and not self._stopped:
                await self._ready.wait()
            if self._stopped:
                return None
            key, _ = self._queued.popitem(last=False)
            self._processing.add(key)
            return key

    async def _worker(self) -> None:
        while True:
            key = await self._next()
            if key is None:
                return
            try:
                await self.handler(key)
                self._attempts.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                attempt = self._attempts.get(key, 0) + 1
                self._attempts[key] = attempt
                self.retries_total += 1
                if self.max_retries is not None and attempt > self.max_retries:
                    log.error("giving up on key after retries", key=key, attempts=attempt, error=str(exc))
                    self._attempts.pop(key, None)
                else:
                    delay = min(self.max_backoff_s, self.base_backoff_s * 2 ** (attempt - 1))
                    delay *= random.uniform(0.8, 1.2)
                    log.warning(
                        "reconcile failed, retrying",
                        key=key,
                        attempt=attempt,
                        delay_s=round(delay, 3),
                        error=str(exc),
                    )
                    self.add_after(key, delay)
            finally:
                self.processed_total += 1
                self._processing.discard(key)
                if key in self._dirty_while_processing:
                    self._dirty_while_processing.discard(key)
                    self.add(key)
                self._update_idle()
