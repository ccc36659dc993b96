"""The runtime's error vocabulary: how a reconcile (or a write beside it) says what should happen next.

- `Terminal`: retrying cannot help (bad input, a refusal that stands until someone changes something):
  not retried, counted as `terminal`, logged with why. The controller tells the user (an Event) first.
- `RetryAfter`: look again after `delay_s` (a server's Retry-After, a refusal worth trying at the resync),
  not after the backoff's delay.
- `NotLeader`: the write gate closed under the reconcile; its remaining writes are dropped, once, by the
  runner (the new leader reconciles every key).
- Any other exception: retried with the one backoff policy (exponential, capped, jittered).
"""

from __future__ import annotations


class NotLeader(Exception):
    """A write was refused because this process is not (or no longer surely) the leader."""


class Terminal(Exception):
    """Not worth retrying: `str(exc)` says why (and what would fix it)."""


class RetryAfter(Exception):
    """Look at the key again after `delay_s`, not after the backoff's delay."""

    def __init__(self, delay_s: float, why: str) -> None:
        super().__init__(why)
        self.delay_s = delay_s
