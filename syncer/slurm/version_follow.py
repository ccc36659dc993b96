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

An event counts only for a request sent after the last negotiation began: calls in flight while the
version is chosen again (their connections cut by the old slurmrestd's exit) owe nothing more, so one
replacement costs one negotiation. Negotiations are spaced: `min_interval_s` after one slurmrestd answered
(its OpenAPI document is 0.2-0.9 MB: 887 KB on 26.05.5 serving four versions, 663 KB on 24.11.5),
`retry_s` after one that did not reach it (that costs slurmrestd nothing)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Literal

Outcome = Literal["chosen", "refused", "unreachable"]
MIN_INTERVAL_S = 10.0
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
        min_interval_s: float = MIN_INTERVAL_S,
        retry_s: float = RETRY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_interval_s = min_interval_s
        self.retry_s = retry_s
        self._clock = clock
        self.why = ""  # the event that owes a negotiation; "" none
        self.began = -math.inf  # clock() the last negotiation began
        self._reached = False  # ... and it reached slurmrestd (spaced by min_interval_s, else retry_s)
        self.release = ""  # the Slurm release the version in use was chosen under ("" not known yet)
        self.negotiations = 0

    def owe(self, why: str, sent_at: float) -> None:
        """An event seen by a request sent at `sent_at` (clock()); ignored when sent before the last
        negotiation began (it tells of the slurmrestd that negotiation already met)."""
        if sent_at >= self.began and not self.why:
            self.why = why

    def answered_by(self, release: str, sent_at: float) -> None:
        """An answer naming Slurm's `release`: another release than the version was chosen under owes."""
        if not release or sent_at < self.began:
            return
        if not self.release:
            self.release = release
        elif release != self.release:
            self.owe(f"slurmrestd's release changed from {self.release} to {release}", sent_at)

    def due(self) -> bool:
        spacing = self.min_interval_s if self._reached else self.retry_s
        return bool(self.why) and self._clock() >= self.began + spacing

    def begin(self) -> None:
        self.began = self._clock()
        self.negotiations += 1

    def end(self, outcome: Outcome, release: str = "") -> None:
        """`chosen`: the event is settled; `refused` (slurmrestd answered, no version could be chosen) and
        `unreachable` keep it owed, tried again after `min_interval_s` or `retry_s`."""
        self._reached = outcome != "unreachable"
        if outcome == "chosen":
            self.why, self.release = "", release
