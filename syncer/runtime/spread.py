"""A periodic resync's keys handed to the work queue over part of its period, not all at once.

    spread = Spread(over_s=30.0)
    spread.start(keys, now)        # a resync starts: its keys, in order
    for key in spread.due(now):    # every tick: the keys whose turn has come
        queue.add(key, lane=Lane.RESYNC)

Its share is by time, not by tick: by `start + over_s - tick_s` (the last tick before `over_s`) every key
has been handed over however late the ticks came, so a resync started every period P >= over_s has handed
over all its keys before the next one starts. Each tick hands over about `len(keys) x tick_s / over_s`
keys (334 a second for 10,000 keys over 30 s) instead of all of them in one step.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable


class Spread:
    def __init__(self, over_s: float, *, tick_s: float = 1.0) -> None:
        self.over_s = over_s
        self.tick_s = tick_s  # how often `due` is asked: a tick hands over the share of the tick to come
        self._keys: deque[str] = deque()
        self._total = 0
        self._started = 0.0

    @property
    def left(self) -> int:
        """Keys not handed over yet."""
        return len(self._keys)

    def start(self, keys: Iterable[str], now: float) -> None:
        """A resync's keys, handed over from `now` on; what the last one had left is dropped (these are
        every key now, so they hold it)."""
        self._keys = deque(keys)
        self._total = len(self._keys)
        self._started = now

    def clear(self) -> None:
        """Nothing left to hand over (every key was queued at once, or this replica stopped leading)."""
        self._keys.clear()

    def due(self, now: float) -> list[str]:
        """The keys whose turn has come by the next tick after `now`, in order, each once."""
        if not self._keys:
            return []
        elapsed = now - self._started + self.tick_s
        share = 1.0 if self.over_s <= 0 else min(1.0, elapsed / self.over_s)
        handed = self._total - len(self._keys)
        count = min(len(self._keys), max(0, math.ceil(self._total * share) - handed))
        return [self._keys.popleft() for _ in range(count)]
