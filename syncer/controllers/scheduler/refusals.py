"""Slurm's refusals of a gang's job: each belongs to the pods it was made for (docs/scheduler.md, "The
controller").

A submit Slurm refused is said on the pods and tried again after `retry_after_s`. A gang's key outlives its
pods: a pod deleted and made again with the same name, or one pod of a group replaced, keys the same gang,
and the new pod may have been fixed. So a refusal keeps the UIDs of the pods it was made for, and holds back
only a request for exactly those pods: a request for other pods is submitted at once (as a new gang's would
be) and never shown the old refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Refused:
    retry_at: float  # the controller's clock: submitted again from then on
    why: str  # said on the pods meanwhile
    uids: frozenset[str]  # the pods the refused request was made for


def standing(refused: Refused | None, uids: Iterable[str], now: float) -> Refused | None:
    """The refusal that still holds back a request for the pods `uids` at `now`: made for exactly these pods
    and not yet due. None: submit."""
    if refused is None or now >= refused.retry_at or frozenset(uids) != refused.uids:
        return None
    return refused
