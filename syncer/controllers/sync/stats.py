"""What the sync engine counts: read by the exporter, `status`-like tools and the tests."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EngineStats:
    reconciles: int = 0
    actions: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (kind, direction, result)
    conflicts: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)  # bound, but Slurm reports no node of that name
    valve_refusals: int = 0
    drifted: set[str] = field(default_factory=set)
    bound: int = 0

    def count(self, kind: str, direction: str, result: str) -> None:
        key = (kind, direction, result)
        self.actions[key] = self.actions.get(key, 0) + 1
