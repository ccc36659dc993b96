"""The keyed work queue: dedup, one run per key at a time, bounded concurrency, retries, timers, stop."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from syncer.runtime.queue import Lane, WorkQueue, taken_from
from tests.helpers import wait_for


@asynccontextmanager
async def running(queue: WorkQueue) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(queue.run())
    try:
        yield task
    finally:
        queue.stop()
        await asyncio.wait_for(task, 5)


def counting() -> tuple[Counter[str], Callable[[str], Awaitable[None]]]:
    seen: Counter[str] = Counter()

    async def handler(key: str) -> None:
        seen[key] += 1

    return seen, handler


async def test_adds_of_a_queued_key_are_deduplicated():
    seen, handler = counting()
    queue = WorkQueue(handler, workers=2)
    for _ in range(5):
        queue.add("a")
    queue.add("b")
    queue.add("a")
    assert queue.depth == 2 and queue.in_flight == 0
    async with running(queue):
        await queue.wait_idle()
        assert seen == {"a": 1, "b": 1}
        assert queue.processed_total == 2


async def test_a_key_never_runs_twice_at_once_and_reruns_once_after():
    running_now: set[str] = set()
    overlaps = 0
    runs = 0
    started = asyncio.Event()
    release = asyncio.Event()

    async def handler(key: str) -> None:
        nonlocal overlaps, runs
        if key in running_now:
            overlaps += 1
        running_now.add(key)
        runs += 1
        if runs == 1:
            started.set()
            await release.wait()
        running_now.discard(key)

    queue = WorkQueue(handler, workers=4)
    async with running(queue):
        queue.add("k")
        await asyncio.wait_for(started.wait(), 5)
        for _ in range(3):
            queue.add("k")  # while it runs: one more run afterwards, not three, and not in parallel
        assert queue.depth == 0 and queue.in_flight == 1
        release.set()
        await wait_for(lambda: runs == 2, what="the re-run")
        await queue.wait_idle()
    assert overlaps == 0 and runs == 2


async def test_no_overlap_and_no_lost_add_under_churn():
    """Random adds while handlers run: never two runs of a key at once, and every add is followed by
    a run that started after it (an add is never swallowed by the run in progress)."""
    rng = random.Random(7)
    keys = [f"n{i}" for i in range(20)]
    active: set[str] = set()
    overlaps = 0
    clock = itertools.count()
    last_add: dict[str, int] = {}
    last_start: dict[str, int] = {}
    queue: WorkQueue

    async def handler(key: str) -> None:
        nonlocal overlaps
        if key in active:
            overlaps += 1
        active.add(key)
        last_start[key] = next(clock)
        for _ in range(rng.randint(0, 3)):
            await asyncio.sleep(0)  # yield so other workers and adds interleave (not synchronisation)
            if rng.random() < 0.3:
                other = rng.choice(keys)
                last_add[other] = next(clock)
                queue.add(other)
        active.discard(key)

    queue = WorkQueue(handler, workers=5)
    async with running(queue):
        for _ in range(300):
            key = rng.choice(keys)
            last_add[key] = next(clock)
            queue.add(key)
            if rng.random() < 0.5:
                await asyncio.sleep(0)
        await queue.wait_idle()
    assert overlaps == 0
    assert all(last_start[key] > added for key, added in last_add.items())


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
    async with running(queue):
        await wait_for(lambda: active == 3, what="three handlers running")
        assert queue.in_flight == 3 and queue.depth == 7
        gate.set()
        await queue.wait_idle()
    assert peak == 3 and queue.processed_total == 10


async def test_the_queue_has_no_retry_policy_a_handler_error_ends_run():
    """Retries are the runner's alone (its one backoff, syncer/runtime/controller.py): the queue neither
    retries nor swallows; an error that escapes the handler ends `run()` with it, so the Manager stops the
    process rather than a worker dying quietly."""
    calls = 0

    async def handler(_key: str) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("a bug in the handler")

    queue = WorkQueue(handler, workers=1)
    queue.add("k")
    with pytest.raises(RuntimeError, match="a bug in the handler"):
        await asyncio.wait_for(queue.run(), 5)
    assert calls == 1 and queue.delayed == 0


async def test_add_after_orders_by_due_time_and_earliest_wins():
    order: list[str] = []

    async def handler(key: str) -> None:
        order.append(key)

    queue = WorkQueue(handler, workers=1)
    async with running(queue):
        queue.add_after("late", 0.3)
        queue.add_after("early", 0.05)
        queue.add_after("late", 0.1)  # an earlier time for the same key replaces the later one
        queue.add_after("early", 5.0)  # a later time does not postpone it
        assert queue.delayed == 2 and queue.depth == 0
        await wait_for(lambda: len(order) == 2, deadline_s=3, what="both timers")
        assert queue.delayed == 0
        queue.add_after("now", 0)  # no delay: queued at once
        assert queue.depth == 1
        await wait_for(lambda: len(order) == 3, what="the immediate add")
    assert order == ["early", "late", "now"]


async def test_wait_idle_waits_for_queued_and_in_flight_keys():
    release = asyncio.Event()

    async def handler(_key: str) -> None:
        await release.wait()

    queue = WorkQueue(handler, workers=1)
    await asyncio.wait_for(queue.wait_idle(), 1)  # a new queue is idle
    queue.add("a")
    queue.add("b")
    idle = asyncio.create_task(queue.wait_idle())
    async with running(queue):
        await wait_for(lambda: queue.in_flight == 1, what="a running")
        assert not idle.done()
        release.set()
        await asyncio.wait_for(idle, 5)
        assert queue.depth == 0 and queue.in_flight == 0 and queue.processed_total == 2


async def test_stop_lets_the_running_handler_finish_and_drops_the_rest():
    started = asyncio.Event()
    release = asyncio.Event()
    finished: list[str] = []

    async def handler(key: str) -> None:
        started.set()
        await release.wait()
        finished.append(key)

    queue = WorkQueue(handler, workers=1)
    task = asyncio.create_task(queue.run())
    queue.add("running")
    await asyncio.wait_for(started.wait(), 5)
    queue.add("queued")
    queue.add("running")  # would re-run after the current run, but the queue stops first
    queue.add_after("timer", 60)
    queue.stop()
    assert queue.stopped and queue.depth == 0 and queue.delayed == 0
    assert not task.done()  # the worker is still in its handler
    release.set()
    await asyncio.wait_for(task, 5)
    assert finished == ["running"] and queue.in_flight == 0
    await asyncio.wait_for(queue.wait_idle(), 1)


async def test_a_stopped_queue_stays_stopped():
    seen, handler = counting()
    queue = WorkQueue(handler, workers=3)
    queue.stop()
    queue.add("k")
    queue.add_after("k", 0.01)
    assert queue.depth == 0 and queue.delayed == 0
    await asyncio.wait_for(queue.run(), 5)  # returns at once
    assert not seen


async def test_cancelling_run_cleans_up_in_flight_keys():
    started = asyncio.Event()

    async def handler(_key: str) -> None:
        started.set()
        await asyncio.Event().wait()  # until cancelled

    queue = WorkQueue(handler, workers=2)
    task = asyncio.create_task(queue.run())
    queue.add("k")
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert queue.in_flight == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "workers must be >= 1"),
        ({"first_workers": -1}, "first_workers must be >= 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, float], message: str):
    with pytest.raises(ValueError, match=message):
        WorkQueue(counting()[1], **kwargs)  # type: ignore[arg-type]


async def test_urgent_keys_go_ahead_of_a_resync_backlog():
    order: list[str] = []

    async def handler(key: str) -> None:
        order.append(key)

    queue = WorkQueue(handler, workers=1)
    for index in range(100):
        queue.add(f"resync-{index}")
    queue.add("resync-50", lane=Lane.URGENT)  # already queued: promoted, handled once
    queue.add("changed", lane=Lane.URGENT)
    async with running(queue):
        await wait_for(lambda: len(order) == 101, what="all keys handled")
    assert order[:2] == ["resync-50", "changed"]
    assert order.count("resync-50") == 1
    assert order[2:] == [f"resync-{i}" for i in range(100) if i != 50]


async def test_lanes_are_served_first_urgent_normal_and_a_key_moves_up_once():
    order: list[tuple[str, Lane]] = []

    async def handler(key: str) -> None:
        order.append((key, taken_from()))

    queue = WorkQueue(handler, workers=1)
    for index in range(5):
        queue.add(f"resync-{index}")
    queue.add("slurm-change", lane=Lane.URGENT)
    queue.add("kube-change", lane=Lane.FIRST)
    queue.add("resync-3", lane=Lane.FIRST)  # moves up from NORMAL, handled once
    queue.add("kube-change", lane=Lane.NORMAL)  # already in a faster lane: stays there
    async with running(queue):
        await wait_for(lambda: len(order) == 7, what="all keys handled")
    assert order[:3] == [("kube-change", Lane.FIRST), ("resync-3", Lane.FIRST), ("slurm-change", Lane.URGENT)]
    assert order[3:] == [(f"resync-{i}", Lane.NORMAL) for i in (0, 1, 2, 4)]


async def test_a_key_added_while_in_flight_runs_again_in_the_fastest_lane_asked():
    seen: list[tuple[str, Lane]] = []
    release = asyncio.Event()

    async def handler(key: str) -> None:
        seen.append((key, taken_from()))
        if len(seen) == 1:
            await release.wait()

    queue = WorkQueue(handler, workers=1)
    queue.add("a")
    async with running(queue):
        await wait_for(lambda: len(seen) == 1, what="a in flight")
        queue.add("b", lane=Lane.URGENT)
        queue.add("a")  # in flight: once more afterwards...
        queue.add("a", lane=Lane.FIRST)  # ...in the fastest lane asked meanwhile
        release.set()
        await wait_for(lambda: len(seen) == 3, what="a again and b")
    assert seen == [("a", Lane.NORMAL), ("a", Lane.FIRST), ("b", Lane.URGENT)]


async def test_first_only_workers_serve_first_keys_while_the_others_are_busy():
    release = asyncio.Event()
    done: list[str] = []

    async def handler(key: str) -> None:
        if key.startswith("slow"):
            await release.wait()  # a reconcile waiting for Kubernetes' rate limit
        done.append(key)

    queue = WorkQueue(handler, workers=1, first_workers=1)
    queue.add("slow-urgent", lane=Lane.URGENT)
    async with running(queue):
        await wait_for(lambda: queue.in_flight == 1, what="the general worker busy")
        queue.add("another-urgent", lane=Lane.URGENT)
        queue.add("cordon", lane=Lane.FIRST)
        await wait_for(lambda: done == ["cordon"], what="the FIRST key by the FIRST-only worker")
        assert queue.depth == 1  # the URGENT key waits for the general worker, never taken by the other
        release.set()
        await wait_for(lambda: len(done) == 3, what="the rest")
    assert done == ["cordon", "slow-urgent", "another-urgent"]


async def test_resync_keys_wait_for_their_own_worker_behind_every_event_key():
    """A periodic resync's keys (RESYNC) are taken by the resync worker alone: the general worker takes
    event keys only, and a NORMAL key is not queued behind them; a RESYNC key an event asks for moves up and
    is taken by the general worker while the resync worker is busy; each key once, never twice at once."""
    release = asyncio.Event()
    seen: list[tuple[str, Lane]] = []
    active: set[str] = set()
    overlaps = 0

    async def handler(key: str) -> None:
        nonlocal overlaps
        overlaps += key in active
        active.add(key)
        seen.append((key, taken_from()))
        if key in ("resync-0", "event-slow"):
            await release.wait()  # the resync worker (then the general one) held in a reconcile
        active.discard(key)

    queue = WorkQueue(handler, workers=1)
    for index in range(100):
        queue.add(f"resync-{index}", lane=Lane.RESYNC)
    async with running(queue):
        await wait_for(lambda: seen == [("resync-0", Lane.RESYNC)], what="the resync worker busy")
        queue.add("event")  # NORMAL: not behind the 99 RESYNC keys
        queue.add("resync-7", lane=Lane.URGENT)  # an event for a key of the resync: moves up
        queue.add("resync-0", lane=Lane.FIRST)  # in flight on the resync worker: once more after, FIRST
        await wait_for(lambda: len(seen) == 3, what="the event keys by the general worker")
        assert seen[1:] == [("resync-7", Lane.URGENT), ("event", Lane.NORMAL)]
        queue.add("event-slow")
        await wait_for(lambda: len(seen) == 4, what="the general worker busy")
        assert queue.depth == 98, "the general worker never takes a RESYNC key, the resync worker is held"
        release.set()
        await queue.wait_idle()
    assert overlaps == 0
    assert [key for key, _ in seen].count("resync-0") == 2 and ("resync-0", Lane.FIRST) in seen
    rest = [key for key, lane in seen[4:] if lane == Lane.RESYNC]
    assert rest == [f"resync-{i}" for i in range(1, 100) if i != 7], "the rest in order, each once"


async def test_a_worker_lets_the_loop_run_between_two_keys():
    """Handlers that never suspend (keys in agreement): another task still runs between two of them, so a
    backlog of thousands cannot hold the event loop (a cordon's watch event, its reads and writes)."""
    handled = 0

    async def handler(_key: str) -> None:
        nonlocal handled
        handled += 1

    queue = WorkQueue(handler, workers=2)
    for index in range(20_000):
        queue.add(f"n{index}")
    seen_by_another_task: list[int] = []

    async def another_task() -> None:
        while handled < 20_000:
            await asyncio.sleep(0)
            seen_by_another_task.append(handled)

    async with running(queue):
        await asyncio.wait_for(another_task(), 30)
    steps = [b - a for a, b in itertools.pairwise([0, *seen_by_another_task])]  # keys handled per turn
    assert max(steps) <= 3, f"at most one key per worker between two turns of another task, got {max(steps)}"
