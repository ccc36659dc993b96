"""The client's token bucket keeps the rate it promises when the event loop is busy."""

from __future__ import annotations

import asyncio
import time

from syncer.kube.ratelimit import TokenBucket


async def test_tokens_earned_while_the_loop_was_late_are_kept() -> None:
    bucket = TokenBucket(qps=100, burst=20)
    for _ in range(20):  # the burst
        await bucket.acquire()

    async def busy_loop() -> None:
        await asyncio.sleep(0)
        time.sleep(0.1)  # noqa: ASYNC251 - the point: the loop is blocked while the acquirer sleeps

    hog = asyncio.create_task(busy_loop())
    await bucket.acquire()  # asked to wait 10 ms, woken ~100 ms later: ~10 tokens accrued, one used
    await hog
    waited = bucket.waited_s
    for _ in range(8):
        await bucket.acquire()
    assert bucket.waited_s == waited  # no throttling for tokens already earned


async def test_a_burst_then_the_rate() -> None:
    bucket = TokenBucket(qps=200, burst=5)
    for _ in range(5):
        await bucket.acquire()
    assert bucket.waited_s == 0
    await bucket.acquire()
    assert 0 < bucket.waited_s <= 1 / 200 + 1e-9


async def test_would_wait_when_the_burst_is_spent_or_others_wait_already() -> None:
    bucket = TokenBucket(qps=1, burst=2)
    assert not bucket.would_wait()
    await bucket.acquire()
    await bucket.acquire()
    assert bucket.would_wait()  # no token left: the next one is a second away
    waiting = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)  # let it take the lock and sleep for its token
    bucket._tokens = 5.0  # tokens appear, but the waiter is served first (FIFO)
    assert bucket.would_wait()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert not bucket.would_wait()
