"""Waiting on conditions with deadlines: the only way tests synchronise."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def wait_for(
    check: Callable[[], bool | Awaitable[bool]], deadline_s: float = 10.0, what: str = "condition"
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
        await asyncio.sleep(0.02)  # poll interval of the condition, not a synchronisation sleep
