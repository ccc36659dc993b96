"""The one retry policy: exponential from `base_s`, capped at `max_s`, with "equal jitter"
(uniform in [d/2, d]) so keys or loops failing together do not retry in lock-step."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.05
    max_s: float = 30.0

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.max_s:
            raise ValueError(f"backoff needs 0 < base_s <= max_s, got {self.base_s}, {self.max_s}")

    def ceiling(self, attempt: int) -> float:
        """The longest delay before retry number `attempt` (1, 2, ...)."""
        return min(self.max_s, self.base_s * 2.0 ** min(max(attempt, 1) - 1, 64))

    def delay(self, attempt: int) -> float:
        """Delay before retry number `attempt` (1, 2, ...)."""
        ceiling = self.ceiling(attempt)
        return ceiling / 2 + random.uniform(0.0, ceiling / 2)
