"""Stopping background tasks: every long-lived loop in the syncer ends the same way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancels every task, then waits for each to finish; their cancellations are not re-raised."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(asyncio.CancelledError):
            await task
