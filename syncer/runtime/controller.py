"""The Controller contract and the one handler every controller runs under.

A controller implements `reconcile(key) -> Result`: it looks at the current state of one key and
makes it right, level-triggered. It returns `Result(requeue_after=s)` to be looked at again later
(something it waits for has no event of its own), `Result()` when done, or raises: the handler then
retries the key with the runtime's backoff. The handler also counts and times every reconcile, per
controller, into the registry it is given (each controller's own metrics).

    runner = ControllerRunner(engine, workers=8, registry=registry)
    manager.add("sync-engine", runner.run)
    runner.queue.add("node001")
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

from syncer.runtime.backoff import Backoff
from syncer.runtime.queue import WorkQueue
from syncer.runtime.tasks import cancel_and_wait

RECONCILE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None  # seconds; None: nothing to look at again unless something changes


DONE = Result()


class Controller(Protocol):
    name: str  # the `controller` label of its metrics

    async def reconcile(self, key: str) -> Result: ...


class ReconcileMetrics:
    """Reconciles per controller and outcome, and how long they took; one set per registry."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.total = Counter(
            "slurm_syncer_reconcile",
            "Reconciles by controller and result (ok, requeue, error).",
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
    """Runs a controller's keys through a work queue: errors back off, results requeue, all counted."""

    def __init__(
        self,
        controller: Controller,
        *,
        workers: int,
        first_workers: int = 0,
        metrics: ReconcileMetrics | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.controller = controller
        self.backoff = backoff or Backoff()
        self.metrics = metrics
        self.queue = WorkQueue(
            self._handle,
            workers=workers,
            first_workers=first_workers,
            base_backoff_s=self.backoff.base_s,
            max_backoff_s=self.backoff.max_s,
        )
        if metrics is not None:
            for result in ("ok", "requeue", "error"):
                metrics.total.labels(controller.name, result)  # present from the start
            metrics.seconds.labels(controller.name)

    async def run(self) -> None:
        """Until the queue is stopped; returns at once on a stopped queue."""
        await self.queue.run()

    def stop(self) -> None:
        self.queue.stop()

    async def serve(
        self,
        *,
        enqueue_all: Callable[[], object],
        resync_s: float,
        leading: Callable[[], bool],
        every_second: Callable[[], bool] | None = None,
        name: str = "",
    ) -> None:
        """The queue's workers plus the level-triggered safety net: every key again every `resync_s`, when
        this replica gains leadership, and when `every_second` (the controller's own housekeeping, called
        once a second) asks for it. Runs until cancelled or one of the two fails; both are stopped then."""
        name = name or self.controller.name
        tasks = [
            asyncio.create_task(self.queue.run(), name=f"{name}-queue"),
            asyncio.create_task(
                self._resync(enqueue_all, resync_s, leading, every_second), name=f"{name}-resync"
            ),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            self.queue.stop()
            await cancel_and_wait(tasks)

    @staticmethod
    async def _resync(
        enqueue_all: Callable[[], object],
        resync_s: float,
        leading: Callable[[], bool],
        every_second: Callable[[], bool] | None,
    ) -> None:
        next_resync = time.monotonic() + resync_s
        was_leading = leading()
        while True:
            await asyncio.sleep(1.0)  # the housekeeping's tick, not a synchronisation
            is_leading = leading()
            asked = every_second() if every_second is not None else False
            if asked or (is_leading and not was_leading) or time.monotonic() >= next_resync:
                enqueue_all()
                next_resync = time.monotonic() + resync_s
            was_leading = is_leading

    async def _handle(self, key: str) -> None:
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await self.controller.reconcile(key)
            if result.requeue_after is not None:
                outcome = "requeue"
                self.queue.add_after(key, result.requeue_after)
            else:
                outcome = "ok"
        finally:
            if self.metrics is not None:
                name = self.controller.name
                self.metrics.total.labels(name, outcome).inc()
                self.metrics.seconds.labels(name).observe(time.perf_counter() - started)
