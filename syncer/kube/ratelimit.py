"""Client-side rate limit (token bucket), like client-go's QPS and burst."""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"rate limit needs qps > 0 and burst >= 1 (got qps={qps}, burst={burst})")
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()
        self.waited_s = 0.0  # total time callers spent throttled: a metric

    async def acquire(self) -> None:
        async with self._lock:  # FIFO: waiters are served in order
            self._refill()
            if self._tokens < 1:
                delay = (1 - self._tokens) / self.qps
                self.waited_s += delay
                await asyncio.sleep(delay)
                # a busy loop wakes us late: what accrued meanwhile is kept, or the rate falls below qps
                self._refill()
            self._tokens -= 1  # may go a hair below 0 after an early wake-up: the next caller repays it

    def would_wait(self) -> bool:
        """A request now would wait: no token left, or others wait for one already (FIFO)."""
        if self._lock.locked():
            return True
        self._refill()
        return self._tokens < 1

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
