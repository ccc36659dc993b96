"""Waiting on conditions with deadlines: the only way tests synchronise."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import structlog
from structlog.testing import LogCapture


async def wait_for(
    check: Callable[[], bool | Awaitable[bool]],
    deadline_s: float = 10.0,
    what: str = "condition",
    *,
    interval_s: float = 0.02,
) -> None:
    deadline = time.monotonic() + deadline_s
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {deadline_s} s waiting for {what}")
        await asyncio.sleep(interval_s)  # poll interval of the condition, not a synchronisation sleep


@contextmanager
def captured_logs() -> Iterator[LogCapture]:
    """Log entries as the service writes them: with the bound context variables (controller, key,
    reconcile_id) merged in."""
    capture = LogCapture()
    old = structlog.get_config()
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, capture])
    try:
        yield capture
    finally:
        structlog.configure(**old)
