"""The periodic resync: its keys handed to the queue's RESYNC lane over half its period (Spread), behind every
event-driven key, served by a worker of their own, so an event key waits for a few reconciles, never for the
resync's backlog, and the resync still reaches every key while events never stop (issue 47: a cordon waited
up to 1.1 s behind 10,000 keys queued at once every minute)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from syncer.runtime.controller import DONE, Controller, ControllerRunner, Result
from syncer.runtime.queue import Lane, taken_from
from syncer.runtime.spread import Spread
from syncer.runtime.tasks import cancel_and_wait
from syncer.runtime.watch import Watch, Watches
from tests.helpers import wait_for


class Source:
    """A watch source (a cache's subscribe): `emit(name)` tells every handler."""

    def __init__(self) -> None:
        self.handlers: list[Callable[[str], None]] = []

    def subscribe(self, handler: Callable[[str], None]) -> None:
        self.handlers.append(handler)

    def emit(self, name: str) -> None:
        for handler in self.handlers:
            handler(name)


class Backlog(Controller):
    """`size` keys in agreement (reconciles that never suspend) brought by the first periodic resync only
    (none at the start, none after); event keys come through a watch in its default lane (NORMAL)."""

    name = "backlog"

    def __init__(self, size: int, source: Source, resync_s: float) -> None:
        self.size = size
        self.source = source
        self.seen: list[tuple[str, Lane]] = []
        self.calls = 0
        self.resync_at = 0.0  # monotonic time of the periodic resync's keys()
        self.resync_started = asyncio.Event()  # its first key reconciled
        self.runner = ControllerRunner(self, workers=1, resync_s=resync_s)

    def watches(self) -> Watches:
        return (Watch(self.source.subscribe, lambda name: [name]),)

    async def keys(self) -> list[str]:
        self.calls += 1
        if self.calls != 2:
            return []
        self.resync_at = time.monotonic()
        return [resync_key(i) for i in range(self.size)]

    async def reconcile(self, key: str) -> Result:
        self.seen.append((key, taken_from()))
        if key.startswith("n"):
            self.resync_started.set()
        return DONE

    def resync_keys(self) -> list[str]:
        return [key for key, _ in self.seen if key.startswith("n")]


def resync_key(index: int) -> str:
    return f"n{index:05d}"


async def test_an_event_key_during_a_10000_key_resync_waits_for_a_few_reconciles_not_the_backlog() -> None:
    """10,000 keys of a periodic resync (all handed over at once: its spread, half of 1 s, is within one
    tick), one worker: an event arriving once the resync has started is reconciled after at most a few of
    its keys (one per worker and a turn of the loop), and every resync key is still reconciled, once each.
    Queued at once in the event workers' lanes, with workers that took the next key without letting the
    loop run, the event came after all 10,000."""
    source = Source()
    controller = Backlog(10_000, source, resync_s=1.0)

    async def event_arrives() -> None:
        await controller.resync_started.wait()
        source.emit("event")  # what a cordon's watch event does, from its own task

    tasks = [asyncio.create_task(controller.runner.serve()), asyncio.create_task(event_arrives())]
    try:
        await wait_for(lambda: len(controller.seen) == 10_001, 60, "the resync's keys and the event")
    finally:
        await cancel_and_wait(tasks)
    keys = [key for key, _ in controller.seen]
    started = next(i for i, key in enumerate(keys) if key.startswith("n"))
    assert keys.index("event") - started <= 3, f"the event after {keys.index('event') - started} resync keys"
    assert controller.resync_keys() == [resync_key(i) for i in range(10_000)], "every key once, in order"
    assert {lane for key, lane in controller.seen if key != "event"} == {Lane.RESYNC}


async def test_a_resync_reaches_every_key_while_event_keys_never_stop() -> None:
    """The general worker never idle (each event's reconcile brings the next event): the resync's keys are
    still all reconciled, by their own worker, while events go on being served beside them."""
    source = Source()
    controller = Backlog(1_000, source, resync_s=1.0)
    events = 0
    reconcile = controller.reconcile

    async def busy(key: str) -> Result:
        nonlocal events
        if key.startswith("event"):
            events += 1
            await asyncio.sleep(0)  # an event's reconcile reads or writes (suspends)
            if len(controller.resync_keys()) < 1_000:
                source.emit(f"event-{events}")  # the next event: the general worker is never idle
        return await reconcile(key)

    controller.reconcile = busy  # type: ignore[method-assign]
    serving = asyncio.create_task(controller.runner.serve())
    try:
        await wait_for(lambda: controller.calls >= 1, 10, "started")
        source.emit("event-0")
        await wait_for(lambda: len(controller.resync_keys()) == 1_000, 30, "every resync key")
        during = events
        await controller.runner.queue.wait_idle()
    finally:
        await cancel_and_wait([serving])
    assert controller.resync_keys() == [resync_key(i) for i in range(1_000)]
    first = next(i for i, (key, _) in enumerate(controller.seen) if key.startswith("n"))
    last = max(i for i, (key, _) in enumerate(controller.seen) if key.startswith("n"))
    served_meanwhile = sum(key.startswith("event") for key, _ in controller.seen[first:last])
    assert served_meanwhile >= 100 and during >= served_meanwhile, "events were served beside the resync"


async def test_a_periodic_resync_is_handed_over_half_its_period_and_reconciled_within_it() -> None:
    """resync_s 3: the keys are handed over in 1.5 s (two ticks: two thirds, then the rest), not at once,
    and every one is reconciled within the period."""
    source = Source()
    controller = Backlog(1_000, source, resync_s=3.0)
    pending_at_first: list[int] = []  # keys not handed to the queue yet when the first was reconciled
    reconcile = controller.reconcile

    async def noting(key: str) -> Result:
        if not pending_at_first and key.startswith("n"):
            pending_at_first.append(controller.runner.resync_pending)
        return await reconcile(key)

    controller.reconcile = noting  # type: ignore[method-assign]
    serving = asyncio.create_task(controller.runner.serve())
    try:
        await wait_for(lambda: len(controller.resync_keys()) == 1_000, 30, "every resync key")
        done_at = time.monotonic()
    finally:
        await cancel_and_wait([serving])
    assert 0 < pending_at_first[0] < 1_000, "the first key reconciled before the rest was handed over"
    assert done_at - controller.resync_at < 3.0, "every key within the period"
    assert controller.resync_keys() == [resync_key(i) for i in range(1_000)]


def test_spread_hands_a_share_per_tick_and_everything_by_its_end() -> None:
    spread = Spread(over_s=30.0)
    spread.start([resync_key(i) for i in range(10_000)], now=100.0)
    first = spread.due(100.0)
    assert first == [resync_key(i) for i in range(334)], "a tick's share: 10,000 x 1 / 30, rounded up"
    assert spread.due(100.0) == [], "nothing more before its time"
    assert len(spread.due(101.0)) == 333 and spread.left == 10_000 - 667
    assert len(spread.due(103.5)) == 833, "a late tick: the time's share (1,500 by then), not a tick's"
    assert len(spread.due(128.9)) == 8_467 and spread.left == 33
    assert len(spread.due(129.0)) == 33 and spread.left == 0, "all by the last tick before 30 s"
    assert spread.due(200.0) == []


def test_a_spread_under_a_second_with_shorter_ticks_is_still_handed_over_by_its_share() -> None:
    spread = Spread(over_s=0.5, tick_s=0.1)
    spread.start([resync_key(i) for i in range(10)], now=0.0)
    assert spread.due(0.0) == [resync_key(0), resync_key(1)], "the first tick's share: 10 x 0.1 / 0.5"
    assert len(spread.due(0.4)) == 8 and spread.left == 0, "all by the last tick before 0.5 s"


@given(
    size=st.integers(0, 3_000),
    over_s=st.floats(0.0, 120.0),
    gaps=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=200),
)
def test_spread_hands_every_key_once_in_order_and_all_by_over_s(
    size: int, over_s: float, gaps: list[float]
) -> None:
    """However irregular the ticks: each key once, in order, never more than the time's share (plus one
    tick's), and all of them at the first tick at or after `over_s` minus a tick."""
    spread = Spread(over_s=over_s)
    keys = [resync_key(i) for i in range(size)]
    spread.start(keys, now=0.0)
    handed: list[str] = []
    now = 0.0
    for gap in gaps:
        now += gap
        handed += spread.due(now)
        if over_s > 0:
            share = min(1.0, (now + 1.0) / over_s)
            assert len(handed) <= math.ceil(size * share)
        if now >= over_s - 1.0:
            assert len(handed) == size
    assert handed == keys[: len(handed)]
    assert len(set(handed)) == len(handed)


def test_a_new_resync_or_a_clear_replaces_what_was_left() -> None:
    spread = Spread(over_s=10.0)
    spread.start(["a", "b", "c", "d"], now=0.0)
    assert spread.due(0.0) == ["a"]
    spread.start(["x", "y"], now=1.0)
    assert spread.due(1.0) == ["x"] and spread.left == 1
    spread.clear()
    assert spread.left == 0 and spread.due(50.0) == []
