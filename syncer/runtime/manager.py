"""The Manager: every long-running loop of the process, supervised together.

    manager = Manager()
    manager.add("slurm-cache", cache.run)          # a coroutine function that runs until cancelled
    manager.on_failure(gate.halt)                  # called at once, before anything else runs
    await manager.enter(resource)                  # an async context manager, exited on close()
    manager.on_close(client.close)                 # cleanups run in reverse order of registration
    await manager.start()
    failure = await manager.wait()                 # the first task that ended on its own, or None
    await manager.close()                          # cancels the tasks, then releases the resources

Loops run in one `asyncio.TaskGroup`. A loop is never supposed to end by itself: the first one that
returns or raises is a failure; the group cancels every other loop and the process should exit
non-zero so Kubernetes restarts it (a half-alive daemon whose probes stay green is worse than a
restart). The `on_failure` callbacks run synchronously the moment the failure is seen, so nothing
(a write gate closing, say) waits for the cancellations to be delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TypeVar

import structlog

log = structlog.get_logger("syncer.runtime")
T = TypeVar("T")


class TaskExited(Exception):
    """A supervised loop ended without being asked to: `error` is what it raised (None: it returned)."""

    def __init__(self, name: str, error: BaseException | None) -> None:
        self.name = name
        self.error = error
        how = f"failed: {type(error).__name__}: {error}" if error is not None else "returned"
        super().__init__(f"background task {name!r} {how}")


class Manager:
    def __init__(self, *, stop_grace_s: float = 5.0) -> None:
        self.stop_grace_s = stop_grace_s  # per round of cancellation in close()
        self._tasks: list[asyncio.Task[None]] = []
        self._runnables: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        self._failure_callbacks: list[Callable[[TaskExited], None]] = []
        self._stack = AsyncExitStack()
        self._supervisor: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        self._closing = False
        self.failure: TaskExited | None = None

    # -- registration ---------------------------------------------------------------------------
    def add(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        if self._supervisor is not None:
            raise RuntimeError(f"cannot add {name!r}: the manager has started")
        if any(name == existing for existing, _ in self._runnables):
            raise ValueError(f"a task named {name!r} is registered already")
        self._runnables.append((name, run))

    def on_failure(self, callback: Callable[[TaskExited], None]) -> None:
        self._failure_callbacks.append(callback)

    async def enter(self, resource: AbstractAsyncContextManager[T]) -> T:
        return await self._stack.enter_async_context(resource)

    def on_close(self, cleanup: Callable[[], Awaitable[object]]) -> None:
        self._stack.push_async_callback(cleanup)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._runnables]

    @property
    def running(self) -> bool:
        return self._supervisor is not None and not self._done.is_set()

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._supervisor is not None:
            raise RuntimeError("the manager has started already")
        self._supervisor = asyncio.create_task(self._supervise(), name="manager")
        await asyncio.sleep(0)  # let every task start before the caller goes on

    async def wait(self) -> TaskExited | None:
        """Until the loops have ended: the first failure, or None when they were stopped by close()."""
        await self._done.wait()
        return self.failure

    async def close(self) -> None:
        """Cancels the loops (a failure has cancelled them already), then releases the resources in
        reverse order. Safe to call more than once and from a failed state."""
        self._closing = True
        supervisor = self._supervisor
        if supervisor is not None and not supervisor.done():
            supervisor.cancel()
            for _ in range(3):  # bounded: a loop that swallows its cancellation is named and cancelled again
                await asyncio.wait({supervisor}, timeout=self.stop_grace_s)
                if supervisor.done():
                    break
                stuck = [t for t in self._tasks if not t.done()]
                log.warning("tasks did not stop when cancelled", tasks=sorted(t.get_name() for t in stuck))
                for task in stuck:
                    task.cancel()
            else:
                log.error("tasks still running after three cancellations: releasing resources anyway")
            if supervisor.done() and not supervisor.cancelled():
                with contextlib.suppress(Exception):
                    supervisor.result()
        self._done.set()
        await self._stack.aclose()

    async def _supervise(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for name, run in self._runnables:
                    self._tasks.append(group.create_task(self._guard(name, run), name=name))
        except* TaskExited:
            pass  # recorded by _guard as it happened
        finally:
            self._done.set()

    async def _guard(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise self._failed(TaskExited(name, exc)) from exc
        if not self._closing:
            raise self._failed(TaskExited(name, None))

    def _failed(self, failure: TaskExited) -> TaskExited:
        if self.failure is None and not self._closing:
            self.failure = failure
            log.error(
                "background task ended: stopping everything",
                task=failure.name,
                error=str(failure.error) if failure.error is not None else None,
                exc_info=failure.error,
            )
            for callback in self._failure_callbacks:
                try:
                    callback(failure)
                except Exception:  # one broken callback must not keep the others from running
                    log.exception("failure callback raised", task=failure.name)
        return failure
