"""The keyed work queue: dedup, one run per key at a time, bounded concurrency, retries, timers."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

import pytest

from syncer.sync.queue import WorkQueue
from tests.helpers import wait_for


async def run_until_idle(queue: WorkQueue) -> None:
    task = asyncio.create_task(queue.run())
    try:
        await wait_for(lambda: queue.depth == 0 and queue.in_flight == 0 and queue.processed_total > 0)
        await queue.wait_idle()
    finally:
        queue.stop()
        await asyncio.wait_for(task, 5)


async def test_adds_of_a_queued_key_are_deduplicated():
    seen: Counter[str] = Counter()

    async def handler(key: str) -> None:
        seen[key] += 1

    queue = WorkQueue(handler, workers=2)
    for _ in range(5):
        queue.add("a")
    queue.add("b")
    assert queue.depth == 2
    await run_until_idle(queue)
    assert seen == {"a": 1, "b": 1}


async def test_a_key_never_runs_twice_at_once_and_reruns_once_after():
    running: set[str] = set()
    overlaps = 0
    runs = 0
    release = asyncio.Event()

    async def handler(key: str) -> None:
        nonlocal overlaps, runs
        if key in running:
            overlaps += 1
        running.add(key)
        runs += 1
        if runs == 1:
            await release.wait()
        running.discard(key)

    queue = WorkQueue(handler, workers=4)
    task = asyncio.create_task(queue.run())
    queue.add("k")
    await wait_for(lambda: queue.in_flight == 1)
    for _ in range(3):
        queue.add("k")  # while it runs: one more run afterwards, not three, and not in parallel
    assert queue.depth == 0
    release.set()
    await wait_for(lambda: runs == 2 and queue.in_flight == 0)
    await queue.wait_idle()
    queue.stop()
    await asyncio.wait_for(task, 5)
    assert overlaps == 0 and runs == 2


async def test_concurrency_is_bounded_by_workers():
    active = 0
    peak = 0
    gate = asyncio.Event()

    async def handler(_key: str) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await gate.wait()
        active -= 1

    queue = WorkQueue(handler, workers=3)
    for index in range(10):
        queue.add(f"k{index}")
    task = asyncio.create_task(queue.run())
    await wait_for(lambda: active == 3)
    assert queue.in_flight == 3 and queue.depth == 7
    gate.set()
    await wait_for(lambda: queue.depth == 0 and queue.in_flight == 0)
    queue.stop()
    await asyncio.wait_for(task, 5)
    assert peak == 3


async def test_failures_retry_with_growing_backoff_then_succeed():
    attempts: list[float] = []
    loop = asyncio.get_running_loop()

    async def handler(_key: str) -> None:
        attempts.append(loop.time())
        if len(attempts) < 4:
            raise RuntimeError("slurmrestd unavailable")

    queue = WorkQueue(handler, workers=1, base_backoff_s=0.02, max_backoff_s=1.0)
    queue.add("k")
    task = asyncio.create_task(queue.run())
    await wait_for(lambda: len(attempts) == 4, deadline_s=5)
    queue.stop()
    await asyncio.wait_for(task, 5)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert queue.retries_total == 3
    assert gaps[0] >= 0.015 and gaps[2] >= 2 * 0.015  # exponential, with +-20 % jitter


async def test_add_after_orders_by_due_time_and_earliest_wins():
    order: list[str] = []

    async def handler(key: str) -> None:
        order.append(key)

    queue = WorkQueue(handler, workers=1)
    task = asyncio.create_task(queue.run())
    queue.add_after("late", 0.3)
    queue.add_after("early", 0.05)
    queue.add_after("late", 0.1)  # an earlier time for the same key replaces the later one
    queue.add_after("early", 5.0)  # a later time does not postpone it
    await wait_for(lambda: len(order) == 2, deadline_s=3)
    queue.stop()
    await asyncio.wait_for(task, 5)
    assert order == ["early", "late"]


async def test_stop_ends_the_workers():
    async def handler(_key: str) -> None:
        return None

    queue = WorkQueue(handler, workers=2)
    task = asyncio.create_task(queue.run())
    queue.add_after("never", 60)
    queue.stop()
    await asyncio.wait_for(task, 5)
    assert task.done()


def test_workers_must_be_positive():
    with pytest.raises(ValueError, match="workers must be >= 1"):
        WorkQueue(lambda _k: asyncio.sleep(0), workers=0)
