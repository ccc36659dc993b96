"""ControllerRunner.serve: the run/resync scaffolding every controller shares (the sync engine, the NodeSet
reconciler, the planners): keys again on a resync, on gaining leadership and when housekeeping asks; a
failing housekeeping ends it instead of leaving the queue running alone."""

from __future__ import annotations

import asyncio

import pytest

from syncer.runtime.controller import DONE, ControllerRunner, Result
from syncer.runtime.tasks import cancel_and_wait
from tests.helpers import wait_for


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def reconcile(self, key: str) -> Result:
        self.seen.append(key)
        return DONE


async def test_every_key_again_on_resync_on_gaining_leadership_and_when_asked() -> None:
    controller = Recorder()
    runner = ControllerRunner(controller, workers=1)
    enqueued: list[str] = []
    leading = False
    asked = False

    def enqueue_all() -> None:
        enqueued.append("all")
        runner.queue.add("key")

    def housekeeping() -> bool:
        return asked

    serving = asyncio.create_task(
        runner.serve(
            enqueue_all=enqueue_all, resync_s=3.5, leading=lambda: leading, every_second=housekeeping
        )
    )
    try:
        leading = True  # gained at the next tick
        await wait_for(
            lambda: enqueued == ["all"] and controller.seen == ["key"], 5, "keys on gaining leadership"
        )
        asked = True
        await wait_for(lambda: len(enqueued) == 2, 5, "keys when housekeeping asks")
        asked = False
        await wait_for(lambda: len(enqueued) == 3, 6, "keys on the periodic resync")
        # each time the one key was reconciled once more (the worker may run it just after the enqueue)
        await wait_for(lambda: controller.seen == ["key"] * 3, 5, "the third reconcile")
    finally:
        await cancel_and_wait([serving])
    assert runner.queue.stopped


async def test_a_failing_housekeeping_ends_serve_with_its_error() -> None:
    runner = ControllerRunner(Recorder(), workers=1)

    def broken() -> bool:
        raise ValueError("bad tick")

    with pytest.raises(ValueError, match="bad tick"):
        await asyncio.wait_for(
            runner.serve(enqueue_all=lambda: None, resync_s=60, leading=lambda: True, every_second=broken), 5
        )
    assert runner.queue.stopped  # no worker left running behind it
