"""Start-up against a slurmrestd that is not there yet (a Slurm upgrade, slurmrestd restarting, the
Secret created after the pod): the daemon keeps trying with backoff, says why in its log and in /readyz,
and starts its loops once slurmrestd answers, instead of exiting into CrashLoopBackOff."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from syncer.runtime.backoff import Backoff
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmAuthError, SlurmError
from syncer.slurm.versions import ApiVersion

log = structlog.get_logger("syncer.app")
# first retry after ~1 s, then up to 30 s between tries: a slurmrestd back within a minute is found quickly
START_BACKOFF = Backoff(1.0, 30.0)


async def connect_slurm(
    slurm: SlurmClient, *, backoff: Backoff = START_BACKOFF, waiting: Callable[[str], None] = lambda _: None
) -> ApiVersion:
    """slurm.start(), again and again until slurmrestd answers; `waiting(why)` after each failure
    ("" once connected)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            version = await slurm.start()
        except SlurmError as exc:
            delay = backoff.delay(attempt)
            why = (
                str(exc)
                if isinstance(exc, SlurmAuthError)
                else f"{exc} (check --slurm-url and that slurmrestd runs)"
            )
            waiting(why)
            log.warning(
                "waiting for slurmrestd",
                url=slurm.url,
                error=why,
                attempt=attempt,
                retry_in_s=round(delay, 1),
            )
            await asyncio.sleep(delay)
            continue
        waiting("")
        if attempt > 1:
            log.info("slurmrestd answers", url=slurm.url, attempts=attempt)
        return version
