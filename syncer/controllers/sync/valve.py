"""Safety valve: stop new automatic Kubernetes-side drains when too many nodes would drain at once (a storm).

Only drains whose causes are all automatic (Ready past the grace, listed problem conditions) are asked
here; explicit intents (cordon, drain annotation, terminating pod, scale-in) bypass the valve entirely
(`causes.is_automatic`, carried by the Decision, checked by the admission in admit.py)."""

from __future__ import annotations

import math
from collections import OrderedDict


class DrainValve:
    """Counts new drains of distinct keys in a sliding window; time is passed in (pure, no clock).

    At most `threshold(bound_nodes)` = max(min_nodes - 1, floor(max_fraction * bound_nodes)) distinct keys
    are admitted per window: the valve never trips below `min_nodes` drains a window, however small the
    cluster (default 3: two sick nodes of five drain, a third waits). The
    first key beyond that is refused and opens the valve: while open, every new drain is refused and
    remembered as pending. The valve closes by itself once it has been open a full window and
    the last window holds fewer attempted drains (admitted or refused, distinct keys) than the threshold,
    i.e. the storm subsided. `reset()` is the operator saying "go ahead": it closes the valve and lets the
    pending keys through without counting them.
    """

    def __init__(self, max_fraction: float = 0.10, window_s: float = 60.0, min_nodes: int = 3) -> None:
        if not 0.0 < max_fraction <= 1.0:
            raise ValueError("max_fraction must be in (0, 1]")
        if not window_s > 0.0:
            raise ValueError("window_s must be positive")
        if min_nodes < 2:
            raise ValueError("min_nodes must be at least 2 (one automatic drain a window always passes)")
        self.max_fraction = max_fraction
        self.min_nodes = min_nodes
        self.window_s = window_s
        self._admitted: OrderedDict[str, float] = OrderedDict()  # key -> admit time, oldest first
        self._attempted: OrderedDict[str, float] = OrderedDict()  # key -> last attempt time, oldest first
        self._pending: set[str] = set()  # refused while open
        self._granted: dict[str, float | None] = {}  # operator-approved key -> first use (None: unused)
        self._bound_nodes = 0
        self._open = False
        self._opened_at: float | None = None
        self._refused = 0
        self._refused_total = 0

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def opened_at(self) -> float | None:
        """When the valve last opened; None while closed."""
        return self._opened_at

    @property
    def refused(self) -> int:
        """Drains refused since the valve last opened."""
        return self._refused

    @property
    def refused_total(self) -> int:
        """Drains refused over the valve's life (for a counter metric)."""
        return self._refused_total

    @property
    def pending(self) -> frozenset[str]:
        """Keys refused while open that `reset()` would let through."""
        return frozenset(self._pending)

    def holds(self, key: str) -> bool:
        """Was `key` already refused since the valve opened (and not released)?"""
        return key in self._pending

    def threshold(self, bound_nodes: int) -> int:
        return max(self.min_nodes - 1, math.floor(self.max_fraction * max(0, bound_nodes)))

    def admit(self, key: str, now: float, bound_nodes: int) -> bool:
        """May the new drain of `key` go ahead? Call once per intended new drain (retries are free)."""
        self._bound_nodes = bound_nodes
        self._prune(now)
        self._attempted[key] = now
        self._attempted.move_to_end(key)
        if key in self._granted:
            if self._granted[key] is None:
                self._granted[key] = now
            return True
        self._maybe_close(now)
        if not self._open:
            if key in self._admitted:
                return True  # counted already: a retry of the same drain
            if len(self._admitted) + 1 <= self.threshold(bound_nodes):
                self._admitted[key] = now
                return True
            self._open = True
            self._opened_at = now
            self._refused = 0
        self._refused += 1
        self._refused_total += 1
        self._pending.add(key)
        return False

    def forget(self, key: str) -> None:
        """`key` drained for an explicit cause meanwhile: it is no longer held back by the valve."""
        self._pending.discard(key)

    def tick(self, now: float, bound_nodes: int | None = None) -> bool:
        """Let the valve close by itself while nobody asks to drain; returns `is_open`."""
        if bound_nodes is not None:
            self._bound_nodes = bound_nodes
        self._prune(now)
        self._maybe_close(now)
        return self._open

    def reset(self) -> None:
        """Operator override: close now, start a fresh window, let the pending keys through uncounted."""
        for key in self._pending:
            self._granted.setdefault(key, None)
        self._pending.clear()
        self._admitted.clear()
        self._attempted.clear()
        self._open = False
        self._opened_at = None

    def _prune(self, now: float) -> None:
        horizon = now - self.window_s
        for entries in (self._admitted, self._attempted):
            while entries and next(iter(entries.values())) <= horizon:
                entries.popitem(last=False)
        expired = [key for key, used in self._granted.items() if used is not None and used <= horizon]
        for key in expired:
            del self._granted[key]

    def _maybe_close(self, now: float) -> None:
        if not self._open or self._opened_at is None:
            return
        if now - self._opened_at >= self.window_s and len(self._attempted) < self.threshold(
            self._bound_nodes
        ):
            self._open = False
            self._opened_at = None
            self._pending.clear()
