"""The one switch every write passes: open only while this process holds the lease (or runs alone),
closed at once when leadership is lost or in doubt, and never open in dry-run mode."""

from __future__ import annotations

import time
from collections.abc import Callable

from syncer.runtime.errors import NotLeader

__all__ = ["NotLeader", "WriteGate"]


class WriteGate:
    def __init__(
        self,
        *,
        dry_run: bool = False,
        always_leader: bool = False,
        clock: Callable[[], float] = time.monotonic,  # the clock of grant's `since`
    ) -> None:
        self.dry_run = dry_run
        self._always = always_leader
        self._clock = clock
        self._valid_until = 0.0  # clock() deadline of the current term
        self._halted = False
        self.refused = 0

    def grant(self, valid_for_s: float, since: float | None = None) -> None:
        """Leadership confirmed and safe for `valid_for_s` (less than the lease duration) from `since`
        (the monotonic time the confirming renewal was sent; now when not given)."""
        self._valid_until = (self._clock() if since is None else since) + valid_for_s

    def revoke(self) -> None:
        self._valid_until = 0.0

    def halt(self, *_why: object) -> None:
        """Closed for good: the process is stopping after a failure and must not write again."""
        self._halted = True
        self._valid_until = 0.0

    @property
    def halted(self) -> bool:
        return self._halted

    @property
    def leading(self) -> bool:
        if self._halted:
            return False
        return self._always or self._clock() < self._valid_until

    def check(self) -> bool:
        """True when a write may go out; False in dry-run (the caller logs what it would have done).
        Raises NotLeader when not leading, so a stale leader cannot write even one request."""
        if not self.leading:
            self.refused += 1
            raise NotLeader("not the leader: write refused")
        return not self.dry_run
