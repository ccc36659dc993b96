"""What a partition write must not do to jobs, pure (issue 45; docs/partitions.md, "What the syncer never
undoes"). Measured on Slurm 26.05 with real jobs (docs/slurm-releases.md, "Partitions"):

- DRAIN refuses new submissions and lets queued jobs start; DOWN accepts submissions and starts none;
  INACTIVE does neither. So what a state stops is a set, and a write may not lift a stop someone set in
  Slurm (`lifts`): an admin's `scontrol update partition ... state=DOWN` is kept until the CR changes.
- A deleted CR's partition with jobs goes where it accepts no new job and starts no job it did not start
  before: UP -> DRAIN, DOWN -> INACTIVE; DRAIN and INACTIVE stay (`closing_state`).
- With `PreemptType=preempt/partition_prio`, a node added to a partition of a higher PriorityTier than a
  partition whose job it runs has that job preempted within seconds (a tier-1 job PREEMPTED 2 s after its
  node joined a tier-10 partition with a pending job): a busy node joins such a partition once idle
  (`preempting`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from syncer.slurm.partitions import PartitionState

# what each partition state stops: new submissions, queued jobs starting
STOPS: dict[str, frozenset[str]] = {
    "UP": frozenset(),
    "DRAIN": frozenset({"submit"}),
    "DOWN": frozenset({"start"}),
    "INACTIVE": frozenset({"submit", "start"}),
}
CLOSING = {"UP": "DRAIN", "DOWN": "INACTIVE"}  # a deleted CR's partition with jobs: where it goes
DEFAULT_TIER = 1  # Slurm's PriorityTier when a partition sets none


def lifts(have: str | None, want: str | None) -> bool:
    """Writing `want` over `have` would let submissions in or jobs start that `have` stops."""
    if have is None or want is None or have == want:
        return False
    return bool(STOPS.get(have, frozenset()) - STOPS.get(want, frozenset()))


def closing_state(have: str | None) -> str | None:
    """The state a deleted CR's partition with jobs is set to (None: it stays as it is)."""
    return CLOSING.get(have or "UP")


def preempting(
    adding: Iterable[str],
    tier: int,
    partition: str,
    present: Mapping[str, PartitionState],
    busy: frozenset[str],
) -> dict[str, tuple[str, int]]:
    """The busy nodes among `adding` that are in another partition of a lower tier than `tier` (their jobs
    there could be preempted by this partition's), each with that partition and its tier."""
    found: dict[str, tuple[str, int]] = {}
    for node in sorted(set(adding) & busy):
        lower = [
            (p.settings.priority_tier if p.settings.priority_tier is not None else DEFAULT_TIER, p.name)
            for p in present.values()
            if p.name != partition and node in p.nodes
        ]
        lowest = min(lower, default=None)
        if lowest is not None and lowest[0] < tier:
            found[node] = (lowest[1], lowest[0])
    return found
