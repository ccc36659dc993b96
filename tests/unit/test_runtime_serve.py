"""ControllerRunner: the one run loop of every controller (prepare, every key, the queue, the resync) and
the one error vocabulary: backoff with jitter for a failure (a reconcile's or a write's beside it),
RetryAfter's own delay, Terminal not retried, NotLeader dropped; every failure logged once with the
controller, the key and a reconcile ID."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry

from syncer.runtime.backoff import Backoff
from syncer.runtime.controller import DONE, Controller, ControllerRunner, ReconcileMetrics, Result
from syncer.runtime.errors import NotLeader, RetryAfter, Terminal
from syncer.runtime.queue import Lane, taken_from
from syncer.runtime.tasks import cancel_and_wait
from syncer.runtime.watch import Watch, Watches, every
from tests.helpers import captured_logs, wait_for


class Recorder(Controller):
    name = "recorder"

    def __init__(self, keys: tuple[str, ...] = ("key",)) -> None:
        self.seen: list[str] = []
        self.asked = False
        self.prepared = asyncio.Event()
        self._keys = keys
        self.resyncs = 0
        self.elections = 0
        self.runner = ControllerRunner(self, workers=1)

    async def prepare(self) -> None:
        await self.prepared.wait()

    async def keys(self) -> tuple[str, ...]:
        self.resyncs += 1
        return self._keys

    def tick(self) -> bool:
        return self.asked

    def elected(self) -> None:
        self.elections += 1

    async def reconcile(self, key: str) -> Result:
        self.seen.append(key)
        return DONE


async def test_a_follower_reconciles_nothing_and_on_leading_looks_at_every_key_again() -> None:
    """The runner owns leadership (controller-runtime runs no reconciler on a follower): while this replica
    does not lead, no key is reconciled, however it arrives; once it leads, `elected()` and every key."""
    controller = Recorder()
    leading = False
    controller.runner = ControllerRunner(controller, workers=1, resync_s=3.5, leading=lambda: leading)
    serving = asyncio.create_task(controller.runner.serve())
    try:
        await asyncio.sleep(0)
        assert controller.resyncs == 0, "no key before the controller is prepared"
        controller.prepared.set()
        await wait_for(
            lambda: controller.runner.queue.processed_total == 0 and controller.resyncs == 0, 5, ""
        )
        controller.runner.queue.add("changed")  # what a watch adds on a follower
        await controller.runner.queue.wait_idle()
        assert controller.seen == [] and controller.elections == 0, "a follower reconciles nothing"
        leading = True  # gained: noticed at the next key or tick
        await wait_for(lambda: controller.seen == ["key"], 5, "every key on gaining leadership")
        assert controller.elections == 1
        controller.asked = True
        await wait_for(lambda: controller.resyncs == 2, 5, "keys when the housekeeping asks")
        controller.asked = False
        await wait_for(lambda: controller.resyncs == 3, 6, "keys on the periodic resync")
        await wait_for(lambda: controller.seen == ["key"] * 3, 5, "the third reconcile")
        leading = False
        controller.runner.queue.add("key")
        await controller.runner.queue.wait_idle()
        assert controller.seen == ["key"] * 3, "leadership lost: nothing reconciled"
        leading = True
        controller.runner.queue.add("changed")  # the first key a new term sees: elected() comes first
        await wait_for(lambda: controller.elections == 2 and "changed" in controller.seen, 5, "re-elected")
    finally:
        await cancel_and_wait([serving])
    assert controller.runner.queue.stopped


class Source:
    """A watch source: `subscribe(handler)`, then `emit(...)` tells every handler."""

    def __init__(self) -> None:
        self.handlers: list[Callable[..., None]] = []

    def subscribe(self, handler: Callable[[str, int], None]) -> None:
        self.handlers.append(handler)

    def emit(self, name: str, count: int) -> None:
        for handler in self.handlers:
            handler(name, count)


class Watching(Controller):
    """Declares three watches of one source: FIRST, NORMAL and after a delay."""

    name = "watching"

    def __init__(self, source: Source) -> None:
        self.source = source
        self.seen: list[tuple[str, Lane, float]] = []

    def watches(self) -> Watches:
        return (
            Watch(self.source.subscribe, lambda name, count: [f"{name}-{i}" for i in range(count)]),
            Watch(self.source.subscribe, lambda name, _count: [f"first-{name}"], lane=Lane.FIRST),
            Watch(self.source.subscribe, every("cluster"), after_s=0.2),
        )

    async def keys(self) -> list[str]:
        return []

    async def reconcile(self, key: str) -> Result:
        self.seen.append((key, taken_from(), asyncio.get_running_loop().time()))
        return DONE


async def test_declared_watches_feed_the_queue_in_their_lane_and_after_their_delay() -> None:
    source = Source()
    controller = Watching(source)
    runner = ControllerRunner(controller, workers=1)
    assert controller.runner is runner and len(source.handlers) == 3, "subscribed once, by the runner"
    task = await serving(controller)
    try:
        emitted = asyncio.get_running_loop().time()
        source.emit("n", 2)
        await wait_for(lambda: len(controller.seen) == 4, 5, "four keys")
    finally:
        await cancel_and_wait([task])
    keys = [(key, lane) for key, lane, _ in controller.seen]
    assert keys[0] == ("first-n", Lane.FIRST), "the FIRST lane ahead of the others"
    assert sorted(keys[1:3]) == [("n-0", Lane.NORMAL), ("n-1", Lane.NORMAL)]
    assert keys[3] == ("cluster", Lane.NORMAL)
    assert controller.seen[3][2] - emitted >= 0.19, "looked at after its delay"


async def test_a_failing_housekeeping_ends_serve_with_its_error() -> None:
    class Broken(Recorder):
        def tick(self) -> bool:
            raise ValueError("bad tick")

    controller = Broken()
    controller.prepared.set()
    with pytest.raises(ValueError, match="bad tick"):
        await asyncio.wait_for(controller.runner.serve(), 5)
    assert controller.runner.queue.stopped  # no worker left running behind it


class Failing(Controller):
    """Raises what `errors` says for each key, in turn; then succeeds."""

    name = "failing"

    def __init__(self, errors: dict[str, list[Exception]], backoff: Backoff) -> None:
        self.errors = errors
        self.calls: dict[str, list[float]] = {}
        self.contexts: list[dict[str, Any]] = []
        self.runner = ControllerRunner(
            self, workers=2, backoff=backoff, metrics=ReconcileMetrics(registry := CollectorRegistry())
        )
        self.registry = registry

    async def keys(self) -> list[str]:
        return list(self.errors)

    async def reconcile(self, key: str) -> Result:
        self.calls.setdefault(key, []).append(asyncio.get_running_loop().time())
        self.contexts.append(structlog.contextvars.get_contextvars())
        if self.errors[key]:
            raise self.errors[key].pop(0)
        return DONE

    def count(self, result: str) -> float:
        labels = {"controller": self.name, "result": result}
        return self.registry.get_sample_value("slurm_syncer_reconcile_total", labels) or 0.0


async def serving(controller: Controller) -> asyncio.Task[None]:
    task = asyncio.create_task(controller.runner.serve())
    await asyncio.sleep(0)
    return task


async def test_the_error_vocabulary_terminal_retry_after_not_leader_and_backoff() -> None:
    controller = Failing(
        {
            "bad-input": [Terminal("label x=y names no unit: fix the label")],
            "server-says": [RetryAfter(0.3, "busy, come back in 0.3 s")],
            "lost-lead": [NotLeader("not the leader")],
            "flaky": [RuntimeError("slurmrestd away")] * 3,
        },
        Backoff(0.02, 0.08),
    )
    with captured_logs() as logs:
        task = await serving(controller)
        try:
            await wait_for(lambda: len(controller.calls.get("flaky", [])) == 4, 5, "three retries of flaky")
            await wait_for(lambda: len(controller.calls.get("server-says", [])) == 2, 5, "the retry after")
            await controller.runner.queue.wait_idle()
        finally:
            await cancel_and_wait([task])
    assert len(controller.calls["bad-input"]) == 1, "a terminal error is not retried"
    assert len(controller.calls["lost-lead"]) == 1, "NotLeader drops the key (the new leader resyncs)"
    waited = controller.calls["server-says"][1] - controller.calls["server-says"][0]
    assert waited >= 0.29, "RetryAfter's own delay, not the backoff's"
    counts = [controller.count(result) for result in ("terminal", "not_leader", "error")]
    assert counts == [1, 1, 4]
    failures = [e for e in logs.entries if e["event"] == "reconcile failed, retrying"]
    assert {e["key"] for e in failures} == {"flaky", "server-says"}
    assert all(e["controller"] == "failing" and isinstance(e["reconcile_id"], int) for e in failures)
    assert len({e["reconcile_id"] for e in failures}) == len(failures), "one ID per reconcile"
    flaky = [e for e in failures if e["key"] == "flaky"]
    assert [e["attempt"] for e in flaky] == [1, 2, 3]
    assert [e.get("exc_info") is not None for e in flaky] == [True, False, False], "traceback once"
    (terminal,) = [e for e in logs.entries if e["event"] == "reconcile failed: not retried"]
    assert terminal["why"] == "label x=y names no unit: fix the label" and terminal["key"] == "bad-input"
    assert all(c["controller"] == "failing" and "reconcile_id" in c for c in controller.contexts)


class Writes(Controller):
    """A controller whose write runs beside its reconcile (like the attribute controller's), failing
    `failures` times: its retries must back off as a failed reconcile's do."""

    name = "writes"

    def __init__(self, failures: int, backoff: Backoff) -> None:
        self.failures = failures
        self.writes: list[float] = []
        self.runner = ControllerRunner(self, workers=1, backoff=backoff)

    async def keys(self) -> list[str]:
        return ["node1"]

    async def reconcile(self, key: str) -> Result:
        self.runner.beside(key, self.write(), name=f"write-{key}")
        return DONE

    async def write(self) -> None:
        self.writes.append(asyncio.get_running_loop().time())
        if len(self.writes) <= self.failures:
            raise RuntimeError("slurmrestd away")


async def test_a_failing_write_beside_the_reconcile_backs_off_with_growth_and_jitter() -> None:
    """The one retry policy: a failed write waits as a failed reconcile would (exponential, jittered), not
    a fixed interval. Equal jitter: retry n waits within [d/2, d], d = base * 2^(n-1)."""
    base = 0.04
    controller = Writes(failures=4, backoff=Backoff(base, 10.0))
    with captured_logs() as logs:
        task = await serving(controller)
        try:
            await wait_for(lambda: len(controller.writes) == 5, 10, "four retries, then success")
        finally:
            await cancel_and_wait([task])
    retries = [e for e in logs.entries if e["event"] == "reconcile failed, retrying"]
    assert [(e["controller"], e["key"], e["attempt"]) for e in retries] == [
        ("writes", "node1", n) for n in (1, 2, 3, 4)
    ]
    delays = [e["retry_in_s"] for e in retries]
    for attempt, delay in enumerate(delays, start=1):
        ceiling = base * 2 ** (attempt - 1)
        assert ceiling / 2 - 0.001 <= delay <= ceiling + 0.001, (attempt, delays)
    # each retry waited at least its delay (the loop may be late on a busy machine, never early)
    gaps = [b - a for a, b in zip(controller.writes, controller.writes[1:], strict=False)]
    assert all(gap >= delay - 0.005 for gap, delay in zip(gaps, delays, strict=True)), (gaps, delays)
