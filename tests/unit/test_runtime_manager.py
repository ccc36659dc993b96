"""The runtime: the Manager stops everything on the first unexpected exit, releases resources in
reverse order; the controller handler requeues, retries with backoff and counts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from syncer.runtime.backoff import Backoff
from syncer.runtime.controller import DONE, Controller, ControllerRunner, ReconcileMetrics, Result
from syncer.runtime.manager import Manager, TaskExited
from syncer.runtime.tasks import cancel_and_wait
from tests.helpers import wait_for


async def forever() -> None:
    await asyncio.Event().wait()


async def test_first_failure_cancels_every_other_loop_and_is_reported() -> None:
    manager = Manager()
    trigger = asyncio.Event()
    cancelled: list[str] = []
    halted: list[str] = []

    async def survivor() -> None:
        try:
            await forever()
        finally:
            cancelled.append("survivor")

    async def faulty() -> None:
        await trigger.wait()
        raise ValueError("bad body")

    manager.add("survivor", survivor)
    manager.add("faulty", faulty)
    # runs synchronously as the failure is seen: before any other loop gets another turn
    manager.on_failure(lambda failure: halted.append(f"{failure.name} {cancelled}"))
    await manager.start()
    trigger.set()
    failure = await asyncio.wait_for(manager.wait(), 1.0)
    assert isinstance(failure, TaskExited)
    assert failure.name == "faulty" and isinstance(failure.error, ValueError)
    assert "bad body" in str(failure)
    assert halted == ["faulty []"]
    assert cancelled == ["survivor"]
    await manager.close()


async def test_a_loop_that_returns_is_a_failure_too() -> None:
    manager = Manager()

    async def quits() -> None:
        return None

    manager.add("forever", forever)
    manager.add("quits", quits)
    await manager.start()
    failure = await asyncio.wait_for(manager.wait(), 1.0)
    assert failure is not None and failure.name == "quits" and failure.error is None
    await manager.close()


async def test_close_stops_the_loops_then_releases_resources_in_reverse_order() -> None:
    manager = Manager()
    order: list[str] = []

    @contextlib.asynccontextmanager
    async def resource(name: str) -> AsyncIterator[str]:
        order.append(f"open {name}")
        try:
            yield name
        finally:
            order.append(f"close {name}")

    async def loop() -> None:
        try:
            await forever()
        finally:
            order.append("loop stopped")

    assert await manager.enter(resource("client")) == "client"

    async def cleanup() -> None:
        order.append("cleanup server")

    manager.on_close(cleanup)
    manager.add("loop", loop)
    await manager.start()
    await manager.close()
    assert order == ["open client", "loop stopped", "cleanup server", "close client"]
    assert await manager.wait() is None  # stopped, not failed
    await manager.close()  # twice is fine


async def test_registration_mistakes_are_refused_with_the_name() -> None:
    manager = Manager()
    manager.add("a", forever)
    with pytest.raises(ValueError, match="'a' is registered already"):
        manager.add("a", forever)
    await manager.start()
    with pytest.raises(RuntimeError, match="cannot add 'b'"):
        manager.add("b", forever)
    await manager.close()


class Flaky(Controller):
    name = "flaky"

    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls: list[str] = []
        self.runner = ControllerRunner(
            self, workers=2, metrics=ReconcileMetrics(registry), backoff=Backoff(0.001, 0.01)
        )

    async def keys(self) -> list[str]:
        return []

    async def reconcile(self, key: str) -> Result:
        self.calls.append(key)
        if key == "fails" and self.calls.count(key) < 3:
            raise RuntimeError("transient")
        if key == "waits" and self.calls.count(key) < 2:
            return Result(requeue_after=0.01)
        return DONE


async def test_controller_runner_retries_requeues_and_counts() -> None:
    registry = CollectorRegistry()
    controller = Flaky(registry)
    runner = controller.runner
    task = asyncio.create_task(runner.serve())
    try:
        runner.queue.add("fails")
        runner.queue.add("waits")
        runner.queue.add("fine")
        await wait_for(
            lambda: controller.calls.count("fails") == 3 and controller.calls.count("waits") == 2,
            what="retries and requeue",
        )
        await runner.queue.wait_idle()
    finally:
        await cancel_and_wait([task])

    def count(result: str) -> float:
        value = registry.get_sample_value(
            "slurm_syncer_reconcile_total", {"controller": "flaky", "result": result}
        )
        return value or 0.0

    assert (count("error"), count("requeue"), count("ok")) == (2, 1, 3)
    assert (
        registry.get_sample_value("slurm_syncer_reconcile_duration_seconds_count", {"controller": "flaky"})
        == 6
    )


async def test_a_loop_that_swallows_its_cancellation_is_named_and_cancelled_again() -> None:
    manager = Manager(stop_grace_s=0.1)
    rounds: list[int] = []

    async def stubborn() -> None:
        while True:
            try:
                await forever()
            except asyncio.CancelledError:
                rounds.append(1)
                if len(rounds) > 1:
                    raise  # gives in the second time

    manager.add("stubborn", stubborn)
    await manager.start()
    with capture_logs() as logs:
        await asyncio.wait_for(manager.close(), 5)
    assert len(rounds) == 2
    assert any(e["event"] == "tasks did not stop when cancelled" and e["tasks"] == ["stubborn"] for e in logs)
