"""The scheduler's holds: Slurm nodes kept from new jobs while a pod whose Slurm job ended still terminates
there (docs/scheduler.md, "Never both at once"). The scheduler sets and clears them; the sync engine, told of
every change, turns a hold into a drain cause of its own (explicit: never held back by the safety valve) and
lifts the drain once no cause is left. Shared here so that neither controller reaches into the other's state.

Several gangs may hold one node (two pods ending on one Node): the node is held while any of them holds it.

After a restart the marks are empty until the scheduler has planned every gang once on fresh data
(`settled`); until then the sync engine keeps a drain of ours that reads as a hold (`HOLD_TAG`), so that a
restart never lifts a hold that is still needed. A scheduler that is off never marks anything and is settled
from the start: the engine then treats a left-over hold drain as any drain of ours without a cause (lifted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from syncer.model.reason import SEPARATOR  # between the causes of one drain reason
from syncer.model.slurm import SlurmNode

HOLD_TAG: Final = "scheduler hold: "  # the drain cause's text starts so (after the owner prefix)


def hold_text(reason: str) -> str:
    """The cause text the sync engine drains with."""
    return HOLD_TAG + reason


def held_in(reason: str, owner_prefix: str) -> str | None:
    """The hold cause inside a drain reason of ours (`k8s: cordon; scheduler hold: pod a/b ...`), if any."""
    if not reason.startswith(owner_prefix):
        return None
    rest = reason[len(owner_prefix) :]
    start = rest.find(HOLD_TAG)
    if start < 0 or (start > 0 and not rest[:start].endswith(SEPARATOR)):
        return None
    end = rest.find(SEPARATOR, start)
    return rest[start:] if end < 0 else rest[start:end]


class NodeHolds:
    def __init__(self, *, settled: bool = True) -> None:
        self._holds: dict[str, dict[str, str]] = {}  # Slurm node -> holder (gang key) -> why
        self._listeners: list[Callable[[str], None]] = []
        # False from a scheduler's start until it has planned every gang once: held drains are kept meanwhile
        self.settled = settled

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """`listener(slurm_node)` after every change of that node's holds (and for every held-looking node
        when the holds settle)."""
        self._listeners.append(listener)

    def _tell(self, slurm_node: str) -> None:
        for listener in self._listeners:
            listener(slurm_node)

    def get(self, slurm_node: str) -> str | None:
        """Why the node is held (the first holder's reason, by holder), or None."""
        holders = self._holds.get(slurm_node)
        if not holders:
            return None
        return holders[min(holders)]

    def cause_of(self, name: str, slurm_node: SlurmNode | None, owner_prefix: str) -> str | None:
        """The hold on Slurm node `name` as the sync engine's drain cause text. Until the scheduler has
        settled, a drain of ours that reads as a hold (in `slurm_node`, as Slurm shows it now) is kept as it
        is: a restart must not lift a hold still needed."""
        held = self.get(name)
        if held is not None:
            return hold_text(held)
        if self.settled or slurm_node is None:
            return None
        return held_in(slurm_node.reason, owner_prefix)

    def of(self, holder: str) -> frozenset[str]:
        """The nodes this holder holds."""
        return frozenset(node for node, holders in self._holds.items() if holder in holders)

    def holders(self) -> frozenset[str]:
        return frozenset(holder for holders in self._holds.values() for holder in holders)

    def hold(self, slurm_node: str, holder: str, reason: str) -> None:
        holders = self._holds.setdefault(slurm_node, {})
        if holders.get(holder) == reason:
            return
        holders[holder] = reason
        self._tell(slurm_node)

    def release(self, slurm_node: str, holder: str) -> None:
        holders = self._holds.get(slurm_node)
        if holders is None or holder not in holders:
            return
        del holders[holder]
        if not holders:
            del self._holds[slurm_node]
        self._tell(slurm_node)

    def settle(self, looked_at: Callable[[], list[str]]) -> None:
        """The scheduler has planned every gang: the marks are the whole truth from now on. `looked_at`:
        the nodes whose drains may read as holds, for the engine to look at again."""
        if self.settled:
            return
        self.settled = True
        for node in looked_at():
            self._tell(node)

    def __len__(self) -> int:
        return len(self._holds)
