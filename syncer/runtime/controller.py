"""The Controller contract and the one runner every controller runs under.

A controller implements `reconcile(key) -> Result`: it looks at the current state of one key and
makes it right, level-triggered. It returns `Result(requeue_after=s)` to be looked at again later
(something it waits for has no event of its own), `DONE` when done, or raises (syncer/runtime/errors.py:
`Terminal` is not retried, `RetryAfter` is retried after its delay, `NotLeader` drops the key's remaining
writes, anything else is retried with the one backoff policy). `watches()` declares what it watches and
how an event maps to keys (syncer/runtime/watch.py); `keys()` names every key it has, for the resync;
`prepare()` waits until it can reconcile; `tick()` is its once-a-second housekeeping; `elected()` is told
when this replica starts leading.

    class Pinger(Controller):
        name = "pinger"
        def watches(self): return [Watch(source.subscribe, lambda name: [name])]
        async def keys(self): return ["a", "b"]
        async def reconcile(self, key): ...; return DONE

    runner = ControllerRunner(Pinger(), workers=2)   # subscribes its watches; pinger.runner is it
    manager.add(runner.name, runner.serve)           # the one run loop, resync included

The runner owns leadership: a replica that does not lead reconciles nothing (the key is dropped; on gaining
leadership every key is looked at again), as controller-runtime starts no reconciler on a follower. It counts
and times every reconcile per controller into the registry it is given, and every log line of a reconcile
carries the controller, the key and a reconcile ID (structlog context variables).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram

from syncer.runtime.backoff import Backoff
from syncer.runtime.errors import NotLeader, RetryAfter, Terminal
from syncer.runtime.queue import Lane, WorkQueue
from syncer.runtime.spread import Spread
from syncer.runtime.tasks import cancel_and_wait
from syncer.runtime.watch import Watch, Watches

log = structlog.get_logger("syncer.runtime")
RECONCILE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RESULTS = ("ok", "requeue", "error", "terminal", "not_leader")
# a periodic resync hands its keys to the queue (its RESYNC lane) over this share of its period: 10,000 keys
# queued at once took one worker ~3 s of the event loop every minute, and cordons waited for it (issue 47)
RESYNC_SPREAD = 0.5
_reconcile_ids = itertools.count(1)


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None  # seconds; None: nothing to look at again unless something changes


DONE = Result()


class Controller:
    """Subclass it (its defaults are inherited): `name`, `keys` and `reconcile` are each controller's own."""

    name: str  # the `controller` label of its metrics and logs, and its Manager task's name
    runner: ControllerRunner  # set by the runner that runs it
    workers: int = 0  # reconciles at once; 0: the service's --workers
    first_workers: int = 0  # more workers taking Lane.FIRST keys only (the sync engine's Kubernetes changes)

    async def reconcile(self, key: str) -> Result:
        raise NotImplementedError

    def watches(self) -> Watches:
        """What it watches and how an event maps to keys (syncer/runtime/watch.py); read once, by its runner,
        before any source runs."""
        return ()

    async def keys(self) -> Iterable[str]:
        """Every key it has now: at the start, every resync and on gaining leadership (it may refresh what
        a resync refreshes first)."""
        raise NotImplementedError

    async def prepare(self) -> None:
        """Until it can reconcile (its caches synced); once, before the first keys."""
        return None

    def tick(self) -> bool:
        """Once a second: housekeeping; True when every key must be looked at again."""
        return False

    def elected(self) -> None:
        """This replica starts leading (every key is looked at again next): forget what another leader may
        have changed meanwhile."""
        return None

    def loops(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """Loops it needs beside its runner (its own informer), supervised by the Manager with it."""
        return {}

    def not_ready(self) -> list[str]:
        """Why it keeps the syncer not ready now (/readyz), if it does (the sync engine's open valve)."""
        return []


class ReconcileMetrics:
    """Reconciles per controller and outcome, and how long they took; one set per registry."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.total = Counter(
            "slurm_syncer_reconcile",
            "Reconciles by controller and result (ok, requeue, error: retried with backoff, terminal: not "
            "retried, not_leader: writes dropped when leadership was lost).",
            ["controller", "result"],
            registry=registry,
        )
        self.seconds = Histogram(
            "slurm_syncer_reconcile_duration_seconds",
            "Time spent in one reconcile, by controller.",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=registry,
        )


class ControllerRunner:
    """Runs a controller's keys through a work queue: its watches feed the queue, a follower reconciles
    nothing, errors back off, results requeue, all counted."""

    def __init__(
        self,
        controller: Controller,
        *,
        workers: int,
        first_workers: int = 0,
        metrics: ReconcileMetrics | None = None,
        backoff: Backoff | None = None,
        resync_s: float = 60.0,
        leading: Callable[[], bool] = lambda: True,
    ) -> None:
        self.controller = controller
        self.backoff = backoff or Backoff()
        self.metrics = metrics
        self.resync_s = resync_s
        self.leading = leading
        self._spread = Spread(resync_s * RESYNC_SPREAD)  # the periodic resync's keys not queued yet
        self.queue = WorkQueue(self._handle, workers=workers, first_workers=first_workers)
        self.retries_total = 0  # retries scheduled after a failure (a reconcile's or a write's beside it)
        self._attempts: dict[str, int] = {}  # consecutive failures per key
        self._beside: dict[str, set[asyncio.Task[None]]] = {}  # key -> its writes running beside
        self._led = False  # leading when last looked (a change to leading: elected(), every key again)
        if metrics is not None:
            for result in RESULTS:
                metrics.total.labels(controller.name, result)  # present from the start
            metrics.seconds.labels(controller.name)
        controller.runner = self
        for watch in controller.watches():
            self._connect(watch)

    def _connect(self, watch: Watch[Any]) -> None:
        """The watch's source tells this runner's queue, through the watch's mapper."""
        queue, lane, after_s = self.queue, watch.lane, watch.after_s

        def notify(*event: Any, **fields: Any) -> None:
            for key in watch.keys(*event, **fields):
                if after_s > 0:
                    queue.add_after(key, after_s)
                else:
                    queue.add(key, lane=lane)

        watch.source(notify)

    @property
    def name(self) -> str:
        return self.controller.name

    async def serve(self) -> None:
        """The one run loop of a controller: once `prepare()` returns, every key (when leading), then the
        queue's workers plus the level-triggered safety net: every key again every `resync_s` (handed to the
        queue's RESYNC lane over half that period: behind every event-driven key, never starved, every key
        reconciled within the period while its keys' reconciles take less than half of it), and at once
        when this replica gains leadership and when `tick()` (called once a second) asks. Runs until
        cancelled or one of the two fails; both are stopped then, and the writes still running beside a
        reconcile cancelled."""
        try:
            await self.controller.prepare()
            self._led = self.leading()
            added = await self.resync() if self._led else 0
            log.info("controller started", controller=self.name, keys=added)
            tasks = [
                asyncio.create_task(self.queue.run(), name=f"{self.name}-queue"),
                asyncio.create_task(self._resync(), name=f"{self.name}-resync"),
            ]
            try:
                await asyncio.gather(*tasks)
            finally:
                await cancel_and_wait(tasks)
        finally:
            self.queue.stop()
            await cancel_and_wait([t for running in self._beside.values() for t in running])

    async def resync(self) -> int:
        """Every key of the controller queued now, ahead of a periodic resync's (at the start, on gaining
        leadership, when `tick()` asks); how many."""
        self._spread.clear()  # these are every key: the periodic resync's rest is among them
        added = 0
        for key in await self.controller.keys():
            self.queue.add(key)
            added += 1
        return added

    @property
    def resync_pending(self) -> int:
        """Keys of the periodic resync not handed to the queue yet."""
        return self._spread.left

    async def _leads(self) -> bool:
        """Whether this replica leads now. On becoming the leader: `elected()`, then every key again."""
        leading = self.leading()
        if leading and not self._led:
            self._led = True
            log.info("leading: every key again", controller=self.name)
            self.controller.elected()
            await self.resync()
        elif not leading:
            self._led = False
        return leading

    async def _resync(self) -> None:
        next_resync = time.monotonic() + self.resync_s
        while True:
            await asyncio.sleep(1.0)  # the housekeeping's tick, not a synchronisation
            asked = self.controller.tick()
            if not await self._leads():
                self._spread.clear()  # a follower resyncs nothing
                continue
            if asked:
                await self.resync()
                next_resync = time.monotonic() + self.resync_s
            elif time.monotonic() >= next_resync:
                self._hand_over()  # the last periodic resync's rest (all of it by now)
                self._spread.start(await self.controller.keys(), time.monotonic())
                next_resync = time.monotonic() + self.resync_s
            self._hand_over()

    def _hand_over(self) -> None:
        """The periodic resync's keys whose turn has come, to the queue's RESYNC lane (a key waiting in a
        faster lane stays there; one waiting in RESYNC keeps its place in line)."""
        for key in self._spread.due(time.monotonic()):
            self.queue.add(key, lane=Lane.RESYNC)

    # -- one key ----------------------------------------------------------------------------------
    async def _handle(self, key: str) -> None:
        if not await self._leads():
            return  # a follower reconciles nothing: the key is looked at again when it leads
        started = time.perf_counter()
        outcome = "error"
        with structlog.contextvars.bound_contextvars(
            controller=self.name, key=key, reconcile_id=next(_reconcile_ids)
        ):
            try:
                result = await self.controller.reconcile(key)
            except Exception as exc:
                outcome = self.failed(key, exc)
            else:
                if key not in self._beside:  # a write still running beside decides for itself
                    self._attempts.pop(key, None)
                if result.requeue_after is not None:
                    outcome = "requeue"
                    self.queue.add_after(key, result.requeue_after)
                else:
                    outcome = "ok"
            finally:
                if self.metrics is not None:
                    self.metrics.seconds.labels(self.name).observe(time.perf_counter() - started)
        if self.metrics is not None:
            self.metrics.total.labels(self.name, outcome).inc()

    def failed(self, key: str, exc: Exception) -> str:
        """A reconcile of `key` (or a write beside it) failed: what the error vocabulary says happens next
        (retried after the backoff's delay or the error's own, not retried, or dropped), logged once with
        its traceback the first time in a row. Returns the outcome's metric label."""
        if isinstance(exc, NotLeader):
            log.info("leadership lost mid-reconcile: remaining writes dropped", key=key)
            return "not_leader"
        if isinstance(exc, Terminal):
            self._attempts.pop(key, None)
            log.error("reconcile failed: not retried", key=key, why=str(exc))
            return "terminal"
        attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
        delay = exc.delay_s if isinstance(exc, RetryAfter) else self.backoff.delay(attempt)
        log.warning(
            "reconcile failed, retrying",
            key=key,
            attempt=attempt,
            error=f"{type(exc).__name__}: {exc}",
            retry_in_s=round(delay, 3),
            exc_info=exc if attempt == 1 and not isinstance(exc, RetryAfter) else None,
        )
        self.retries_total += 1
        self.queue.add_after(key, delay)
        return "error"

    def beside(self, key: str, write: Coroutine[Any, Any, None], *, name: str) -> None:
        """Runs a write of `key` beside its reconcile (writes of many keys then meet in one group commit):
        its failure is handled as the reconcile's would be (same backoff, same log, its reconcile ID), and
        the key's failure count is reset only by its success."""
        running = self._beside.setdefault(key, set())
        task = asyncio.create_task(self._write_beside(key, write), name=name)  # copies the log context
        running.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            running.discard(finished)
            if not running and self._beside.get(key) is running:
                del self._beside[key]

        task.add_done_callback(done)

    async def _write_beside(self, key: str, write: Coroutine[Any, Any, None]) -> None:
        try:
            await write
        except Exception as exc:
            outcome = self.failed(key, exc)
            if self.metrics is not None:
                self.metrics.total.labels(self.name, outcome).inc()
        else:
            self._attempts.pop(key, None)

    @property
    def writing(self) -> int:
        """Writes running beside their reconciles."""
        return sum(len(running) for running in self._beside.values())
