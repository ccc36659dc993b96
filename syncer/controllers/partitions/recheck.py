"""When a SlurmPartitions reconcile comes back by itself, and what failed `GET /conf` reads say in the log;
pure (the controller reads /conf, keeps the clock and logs). docs/partitions.md, "The precondition".

- A failed /conf read leaves KeepPartInfo unknown (each CR `KeepPartInfoMissing`, Slinky's partitions not
  compared) and nothing else may come to start the reconcile that reads it again: it comes back within
  UNREACHABLE_RETRY_S, as when slurmrestd does not answer.
- While a Slinky partition is told as kept unlike slurm.conf: within SLINKY_RECHECK_S (the `scontrol update`
  that fixes it changes no node and starts no reconcile).
- A delete Slurm refused (2075): within IN_USE_RETRY_S.
- Failed reads in a row are one warning when they start, then at most one a TELL_EVERY_S, and one info line
  once /conf answers (a read every 2 s would be a warning every 2 s).

One rule for every way a reconcile ends (done, requeued, a CR stopped, a delete refused): back within the
soonest of the waits that apply. A stop adds none of its own (`Terminal` where none applies); a refused
delete's is no floor: its retry drains the partition, it does not send the DELETE again.
"""

from __future__ import annotations

import math

UNREACHABLE_RETRY_S = 2.0  # slurmrestd did not answer, or /conf: the next reconcile decides from a fresh read
SLINKY_RECHECK_S = 10.0  # Slinky's partitions read again this often while one is kept unlike slurm.conf
TELL_EVERY_S = 60.0  # while /conf keeps failing, its warning at most this often
# Slurm's 2075 (a job came in between our read and the DELETE): the retry counts the job and drains
IN_USE_RETRY_S = 5.0


def recheck_after(after: float | None, *, conf_failed: bool, standing: bool) -> float | None:
    """When the reconcile comes back (None: only when something changes): within UNREACHABLE_RETRY_S after a
    failed /conf read, within SLINKY_RECHECK_S while a Slinky partition is told as kept unlike slurm.conf,
    sooner if the reconcile asked for it (`after`)."""
    within = UNREACHABLE_RETRY_S if conf_failed else SLINKY_RECHECK_S if standing else None
    if within is None:
        return after
    return within if after is None else min(after, within)


def stopped_recheck(*, in_use: bool, conf_failed: bool, standing: bool) -> float | None:
    """When a reconcile that stopped a CR's writes (Slurm refused a value, a claim failed) or whose delete
    Slurm refused (`in_use`) comes back: as any other, within the soonest of the waits that apply (a refused
    delete's IN_USE_RETRY_S among them); None: not retried (`Terminal`), only a change brings it back.
    Its retry sends nothing again but a failed claim: a refused value is remembered, a refused delete's
    partition is counted as holding a job (drained, not deleted again), and no claim is planned while
    KeepPartInfo is unknown. A failed claim is not remembered: while a Slinky difference stands it is sent
    again at most once a SLINKY_RECHECK_S (as any reconcile of then would), and with neither wait the
    controller retries it with the runtime's back-off (the API server's failure, not the CR's)."""
    return recheck_after(IN_USE_RETRY_S if in_use else None, conf_failed=conf_failed, standing=standing)


class ConfFailures:
    """Failed /conf reads in a row, for the log: the first is told, then at most one a TELL_EVERY_S."""

    started: float  # when the first of them failed (clock seconds)

    def __init__(self) -> None:
        self.count = 0  # failed reads since the last that answered
        self.told = -math.inf  # when one was told last (-inf: the next failure is told)

    def failed(self, now: float) -> bool:
        """One more failed read at `now`: True when it is to be told (the first in a row, or TELL_EVERY_S
        after the last told)."""
        if not self.count:
            self.started = now
        self.count += 1
        if now - self.told < TELL_EVERY_S:
            return False
        self.told = now
        return True

    def answered(self, now: float) -> tuple[int, float] | None:
        """/conf answered at `now`: (failed reads, seconds since the first) when it ends failures, else
        None. The next failure starts a new row, told at once."""
        if not self.count:
            return None
        ended = self.count, now - self.started
        self.count, self.told = 0, -math.inf
        return ended
