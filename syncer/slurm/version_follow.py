"""When the Slurm client chooses its REST API version again: whenever slurmrestd may have been replaced (an
upgrade serves other versions: the old one gone, or newer ones with capabilities the syncer can use).

    follow = VersionFollow()
    follow.owe("slurmctld started anew", sent_at=now)   # an event: choose again before the next request
    follow.answered_by("26.05.5", sent_at)               # an answer's meta.slurm.release
    if follow.due(): follow.begin(); ...; follow.end("chosen", release)

The events (each owes one negotiation):
- a request that could not reach slurmrestd (refused, reset, cut mid-answer; not a timeout, not an HTTP
  error answer): the negotiation that follows it is tried until slurmrestd answers again;
- an answer that says the path is not served (`unserved`: slurmrestd's plain-text 404 for a URL it has no
  handler for, not the JSON 404 of a job it does not know);
- an answer from another Slurm release than the one the version was chosen under (`meta.slurm.release`,
  and the OpenAPI document's);
- slurmctld started anew (the node cache's ReloadWatch: an upgrade restarts it too).

An event counts only for a request sent after the last negotiation ended: calls in flight while the
version was chosen again (their connections cut by the old slurmrestd's exit, their old path answered as
not served) owe nothing more, so one replacement costs one negotiation, at once. The OpenAPI document is
large (887 KB on 26.05.5 serving four versions, 663 KB on 24.11.5, measured), so negotiations that reach
slurmrestd are also rate-limited: `burst` at once (an upgrade: slurmctld restarted, then slurmrestd), then
one every `refill_s`, whatever keeps owing (two slurmrestd of different releases behind one Service would
otherwise take turns forever). A try that did not reach slurmrestd costs it nothing and is not counted:
tried again `retry_s` later.

The first and last events only say slurmrestd *may* have been replaced (a reconfigure restarts slurmctld
too): `changed` stays False and the client first checks the version in use with a few small requests (its
ping naming the release, the newer versions' pings answered as not served), reading the OpenAPI document
only when that check fails; a check counts as a negotiation for the rate limit. A path not served or another
release answering is a known change: `changed`."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Literal

Outcome = Literal["chosen", "refused", "unreachable"]
BURST = 3
REFILL_S = 60.0
RETRY_S = 1.0
# slurmrestd's answer to a URL it has no handler for (text/plain): 26.05.5 "Unable to find requested URL
# endpoint. ...", 24.11.5 "Unable find requested URL. ..." (measured on both, an unserved /slurm/vX/ path)
_UNSERVED = re.compile(rb"Unable (to )?find requested URL")


def unserved(status: int, payload: bytes) -> bool:
    """The answer says slurmrestd has no such path (its version not served, or not by this slurmrestd)."""
    return status == 404 and _UNSERVED.match(payload[:64].lstrip()) is not None


class VersionFollow:
    """What owes a new negotiation, and when one may run."""

    def __init__(
        self,
        *,
        burst: int = BURST,
        refill_s: float = REFILL_S,
        retry_s: float = RETRY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.refill_s = refill_s
        self.retry_s = retry_s
        self._clock = clock
        self.why = ""  # the event that owes a negotiation; "" none
        self.changed = False  # ... one that says slurmrestd changed (else a check may settle it)
        self.began = -math.inf  # clock() the last negotiation began
        self.ended = -math.inf  # ... and ended: events count from it
        self._reached = True  # ... and it reached slurmrestd (else tried again after retry_s)
        self._tokens = float(burst)  # negotiations that may reach slurmrestd now
        self._counted_at = clock()
        self.release = ""  # the Slurm release the version in use was chosen under ("" not known yet)
        self.negotiations = 0  # begun, checks included

    def owe(self, why: str, sent_at: float, *, changed: bool = False) -> None:
        """An event seen by a request sent at `sent_at` (clock()); ignored when sent before the last
        negotiation ended (it tells of the slurmrestd that negotiation already met). `changed`: it tells
        that the version in use may no longer stand (a path not served, another release), not just that
        slurmrestd may have been replaced: the OpenAPI document is read without a check first."""
        if sent_at < self.ended:
            return
        if not self.why:
            self.why = why
        self.changed = self.changed or changed

    def answered_by(self, release: str, sent_at: float) -> None:
        """An answer naming Slurm's `release`: another release than the version was chosen under owes."""
        if not release or sent_at < self.ended:
            return
        if not self.release:
            self.release = release
        elif release != self.release:
            self.owe(f"slurmrestd's release changed from {self.release} to {release}", sent_at, changed=True)

    def _refill(self) -> float:
        now = self._clock()
        if self.refill_s > 0:
            self._tokens = min(float(self.burst), self._tokens + (now - self._counted_at) / self.refill_s)
        else:
            self._tokens = float(self.burst)
        self._counted_at = now
        return now

    def due(self) -> bool:
        if not self.why:
            return False
        now = self._refill()
        if not self._reached and now < self.began + self.retry_s:
            return False
        return self._tokens >= 1.0

    def wait_s(self) -> float:
        """Seconds until a negotiation owed may run (0: now, or none owed)."""
        if not self.why or self.due():
            return 0.0
        now = self._clock()
        retry = self.began + self.retry_s - now if not self._reached else 0.0
        return max(retry, (1.0 - self._tokens) * self.refill_s, 0.0)

    def begin(self) -> None:
        self.began = self._clock()
        self.negotiations += 1

    def end(self, outcome: Outcome, release: str = "") -> None:
        """`chosen` (or the version in use checked and kept): the event is settled; `refused` (slurmrestd
        answered, no version could be chosen) and `unreachable` keep it owed. Both that reached slurmrestd
        spend one of the burst."""
        self._refill()
        self._reached = outcome != "unreachable"
        if self._reached:
            self._tokens -= 1.0
        self.ended = self._clock()
        if outcome == "chosen":
            self.why, self.changed, self.release = "", False, release
