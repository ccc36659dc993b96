"""Stopping the asyncio child processes tests and benchmarks start (a syncer, an emulator, kubectl)."""

from __future__ import annotations

import asyncio
import contextlib


async def stop_process(process: asyncio.subprocess.Process, timeout_s: float = 20.0) -> None:
    """SIGTERM, so it can shut down cleanly; SIGKILL if it has not exited within `timeout_s`."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        async with asyncio.timeout(timeout_s):
            await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
