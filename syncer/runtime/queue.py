"""A keyed work queue like client-go's rate-limited workqueue.

    queue = WorkQueue(handler, workers=8)   # handler: async (key) -> None
    task = asyncio.create_task(queue.run())
    queue.add("n1")                         # queued once however often it is added
    queue.add("n3", lane=Lane.FIRST)        # ahead of URGENT and NORMAL keys
    queue.add("n4", lane=Lane.RESYNC)       # a periodic resync's: behind every other key, its own worker
    queue.add_after("n2", 5.0)              # later; an earlier pending time for the key wins
    queue.depth, queue.in_flight, queue.delayed
    await queue.wait_idle()                 # nothing queued or in flight (tests, benchmarks)
    queue.stop(); await task                # running handlers finish, nothing new starts

Keys wait in four lanes: FIRST, URGENT, NORMAL (the default), served in that order by the `workers`, and
RESYNC (a periodic resync's keys), served by one worker of its own and by no other; a key added to a faster
lane than the one it waits in moves up. `first_workers` are more workers that take FIRST keys only, so
FIRST keys are served even while every other worker is busy. So an event-driven key never waits for a worker
behind a periodic resync's backlog, and that backlog is never starved by events: its worker takes nothing
else and serves its line in order. A worker lets the event loop run between two keys, so a run of handlers
that never suspend (a resync of keys in agreement) cannot hold the loop. The handler can ask which lane its
key was taken from (`taken_from()`). A key is never handled by two workers at once: adding a key that is being
handled re-runs it once after the current run. The queue has no retry policy of its own: the handler (the
ControllerRunner's) handles every failure and requeues with the runtime's one backoff; an exception that
escapes it anyway ends `run()` with it, so the Manager stops the process instead of a worker dying quietly.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from enum import IntEnum


class Lane(IntEnum):
    """Where a key waits; lower lanes are served first."""

    FIRST = 0
    URGENT = 1
    NORMAL = 2
    RESYNC = 3  # a periodic resync's keys: the resync worker's alone


EVENT_LANES = (Lane.FIRST, Lane.URGENT, Lane.NORMAL)  # what the general workers take, in this order
Waiters = deque[asyncio.Future[None]]  # idle workers of one kind, first to wake first


_taken_from: ContextVar[Lane] = ContextVar("taken_from", default=Lane.NORMAL)


def taken_from() -> Lane:
    """The lane the key being handled (in this worker) was taken from."""
    return _taken_from.get()


class WorkQueue:
    def __init__(
        self,
        handler: Callable[[str], Awaitable[None]],
        *,
        workers: int = 8,
        first_workers: int = 0,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if first_workers < 0:
            raise ValueError(f"first_workers must be >= 0, got {first_workers}")
        self.handler = handler
        self.workers = workers
        self.first_workers = first_workers  # more workers that take FIRST keys only
        self.processed_total = 0  # handler runs finished
        # one line per lane; a line may hold keys taken already or moved to a faster lane (skipped)
        self._lines: tuple[deque[str], ...] = tuple(deque() for _ in Lane)
        self._queued: dict[str, Lane] = {}  # waiting key -> the lane it will be taken from
        self._processing: set[str] = set()
        self._dirty: dict[str, Lane] = {}  # added again while being processed -> its fastest lane
        self._timers: dict[str, tuple[float, asyncio.TimerHandle]] = {}  # key -> (due, handle)
        self._waiters: Waiters = deque()  # idle general workers
        self._first_waiters: Waiters = deque()  # idle workers of FIRST keys only
        self._resync_waiters: Waiters = deque()  # the resync worker, idle
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopped = False

    # -- state --------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Keys waiting for a worker."""
        return len(self._queued)

    @property
    def in_flight(self) -> int:
        """Keys being handled now."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Keys waiting on an `add_after` timer (the runner's retries included)."""
        return len(self._timers)

    @property
    def stopped(self) -> bool:
        return self._stopped

    # -- input --------------------------------------------------------------------------------------
    def add(self, key: str, *, lane: Lane = Lane.NORMAL) -> None:
        """Queue `key` in `lane` (no-op when already queued there or faster, so a key keeps its place in
        line; once more after the current run when in flight). A key in a faster lane goes ahead of the
        others: a fresh change (URGENT) never waits behind a full resync of thousands of keys. Ignored after
        stop()."""
        if self._stopped:
            return
        if key in self._processing:
            self._dirty[key] = min(lane, self._dirty.get(key, lane))
            return
        waiting = self._queued.get(key)
        if waiting is not None and waiting <= lane:
            return
        self._queued[key] = lane
        self._lines[lane].append(key)  # a place in a slower line is skipped when reached
        self._idle.clear()
        self._wake(lane)  # new, or moved up: now a key other workers may take (FIRST-only, general)

    def add_after(self, key: str, delay_s: float) -> None:
        """Queue `key` after `delay_s`; of several pending times for a key the earliest wins."""
        if self._stopped:
            return
        if delay_s <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay_s
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        self._timers[key] = (due, loop.call_at(due, self._fire, key))

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def _wake(self, lane: Lane) -> None:
        """One idle worker that may take a key of `lane` (a FIRST-only one first, for a FIRST key)."""
        if lane == Lane.RESYNC:
            _wake_one(self._resync_waiters)
        elif not (lane == Lane.FIRST and _wake_one(self._first_waiters)):
            _wake_one(self._waiters)

    # -- lifecycle ----------------------------------------------------------------------------------
    async def wait_idle(self) -> None:
        """Until nothing is queued or in flight (pending `add_after` timers do not count)."""
        await self._idle.wait()

    def stop(self) -> None:
        """Workers finish the handler they are in and return; timers are cancelled; later adds are
        ignored. A stopped queue stays stopped."""
        self._stopped = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for line in self._lines:
            line.clear()
        self._queued.clear()
        self._dirty.clear()
        for waiters in (self._waiters, self._first_waiters, self._resync_waiters):
            while _wake_one(waiters):
                pass
        self._update_idle()

    async def run(self) -> None:
        """Runs the workers until stop(); returns at once on a stopped queue."""
        await asyncio.gather(
            *(self._worker(EVENT_LANES, self._waiters) for _ in range(self.workers)),
            *(self._worker((Lane.FIRST,), self._first_waiters) for _ in range(self.first_workers)),
            self._worker((Lane.RESYNC,), self._resync_waiters),
        )

    # -- workers ------------------------------------------------------------------------------------
    async def _next(self, lanes: tuple[Lane, ...], waiters: Waiters) -> tuple[str, Lane] | None:
        """The next key of `lanes` (in their order); idle in `waiters` (the lanes' `_wake`) meanwhile."""
        while not self._stopped:
            taken = self._pop(lanes)
            if taken is not None:
                return taken
            waiter = asyncio.get_running_loop().create_future()
            waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    _wake_one(waiters)  # pass on a wake-up this worker can no longer take
                raise
        return None

    def _pop(self, lanes: tuple[Lane, ...]) -> tuple[str, Lane] | None:
        for lane in lanes:
            line = self._lines[lane]
            while line:
                key = line.popleft()
                if self._queued.get(key) == lane:  # else taken already, or moved to a faster lane
                    del self._queued[key]
                    self._processing.add(key)
                    return key, lane
        return None

    async def _worker(self, lanes: tuple[Lane, ...], waiters: Waiters) -> None:
        while (taken := await self._next(lanes, waiters)) is not None:
            key, lane = taken
            _taken_from.set(lane)
            try:
                await self.handler(key)  # handles its own failures (the runner's error vocabulary)
            finally:
                self.processed_total += 1
                self._processing.discard(key)
                again = self._dirty.pop(key, None)
                if again is not None:
                    self.add(key, lane=again)
                self._update_idle()
            # the loop runs between two keys: a handler that never suspends (a key in agreement) would
            # otherwise take the next key in the same step, and a backlog of them holds every other task
            await asyncio.sleep(0)

    def _update_idle(self) -> None:
        if self._queued or self._processing:
            self._idle.clear()
        else:
            self._idle.set()


def _wake_one(waiters: Waiters) -> bool:
    """Wakes the first idle worker still waiting; False when there is none."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return True
    return False
