"""The node cache tells `subscribe_fresh` once each time its data turns fresh after being stale (the first
answer, or the first after a gap past `stale_after_s`), never at every list, and not while still stale.
The cache is real; its polls are driven one at a time on a clock the test moves (no slurmrestd: a poll
applies a listing, as a full list's answer is applied, or fails as slurmrestd away does)."""

from __future__ import annotations

from syncer.model.slurm import SlurmNode
from syncer.slurm.auth import StaticToken
from syncer.slurm.cache import NodeCache
from syncer.slurm.client import NodeListing, SlurmClient
from syncer.slurm.errors import SlurmConnectionError

STALE_AFTER_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def listing(*names: str) -> NodeListing:
    nodes = tuple(SlurmNode(name=n, state=frozenset({"IDLE"})) for n in names)
    return NodeListing(nodes=nodes, last_update=1, body_bytes=0, seconds=0.0)


async def test_told_once_per_turn_to_fresh_and_never_while_fresh_or_still_stale() -> None:
    clock = Clock()
    client = SlurmClient("http://127.0.0.1:9", StaticToken("unused"))  # never started: no request is sent
    cache = NodeCache(client, stale_after_s=STALE_AFTER_S, clock=clock)
    told: list[float] = []
    cache.subscribe_fresh(lambda: told.append(clock.now))

    async def answers() -> None:
        cache._apply(listing("n1"), None)  # the same nodes every time: no change to tell subscribers

    async def away() -> None:
        raise SlurmConnectionError("cannot reach slurmrestd", endpoint="nodes")

    assert cache.stale
    await cache._guarded(answers)
    assert told == [1000.0], "the first answer turns the data fresh"
    for _ in range(5):  # answers a poll apart: fresh all along
        clock.now += 1.0
        await cache._guarded(answers)
    assert told == [1000.0], "not at every list"

    for _ in range(4):  # away for 12 s: stale from 10 s on
        clock.now += 3.0
        await cache._guarded(away)
    assert cache.stale and told == [1000.0], "never while stale"
    clock.now += 1.0
    await cache._guarded(answers)
    assert not cache.stale and told == [1000.0, 1018.0], "once when fresh again"
    clock.now += 1.0
    await cache._guarded(answers)
    assert told == [1000.0, 1018.0]

    clock.now += 9.0  # a gap within the bound: never stale, nothing to tell
    await cache._guarded(answers)
    assert told == [1000.0, 1018.0]

    clock.now += 11.0  # past the bound with no failed poll (one hung until slurmctld was back)
    await cache._guarded(answers)
    assert told == [1000.0, 1018.0, 1039.0]


async def test_a_failing_subscriber_stops_no_other() -> None:
    clock = Clock()
    client = SlurmClient("http://127.0.0.1:9", StaticToken("unused"))
    cache = NodeCache(client, stale_after_s=STALE_AFTER_S, clock=clock)
    told: list[str] = []

    def broken() -> None:
        raise RuntimeError("a subscriber's bug")

    cache.subscribe_fresh(broken)
    cache.subscribe_fresh(lambda: told.append("fresh"))

    async def answers() -> None:
        cache._apply(listing("n1", "n2"), None)

    assert await cache._guarded(answers)
    clock.now += STALE_AFTER_S + 1
    assert cache.stale
    assert await cache._guarded(answers)
    assert told == ["fresh", "fresh"]
