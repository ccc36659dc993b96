"""Stopping background tasks: every long-lived loop in the syncer ends the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancels every task, then waits for each to finish. Nothing is re-raised: neither their
    cancellations nor a failure (whoever ran them has reported it, e.g. the runtime's Manager)."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    for task in pending:
        if not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" at garbage collection
