"""Slurm -> Kubernetes: the facts about a Slurm node that its pod or Node shows and that the Slurm node's
own fields do not spell out, derived once, before the decision compares what they should show with what
they show now (plan.py): its reason's time as Kubernetes writes times, its health faults; beside them its
reason as a condition's message says it, made safe once when the node was read (`reason_message`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from syncer.model import SlurmNode
from syncer.model.slurm import unhealthy_flags
from syncer.model.times import rfc3339


@dataclass(frozen=True)
class Shown:
    """One Slurm node's derived facts, as the bound object shows them."""

    reason_at: str | None  # when its reason was set, RFC 3339 (None: no reason, or no time Slurm gave)
    faults: frozenset[str]  # DOWN, FAIL, NOT_RESPONDING as `unhealthy_flags` counts them
    message: str  # what a condition's message says: the node's `reason_message` (sanitised, capped)


def shown(
    slurm: SlurmNode | None, node_slurm: Sequence[tuple[str, SlurmNode | None]] | None = None
) -> dict[str, Shown]:
    """The facts of `slurm` and of every other known Slurm node on its Kubernetes Node (`node_slurm`, as
    `decide_with` takes it), by Slurm node name; none for a node without Slurm data."""
    members = [] if node_slurm is None else [member for _name, member in node_slurm]
    facts: dict[str, Shown] = {}
    for node in (slurm, *members):
        if node is not None:
            facts[node.name] = shown_of(node)
    return facts


def shown_of(node: SlurmNode) -> Shown:
    """One Slurm node's facts."""
    reason_at = rfc3339(node.reason_changed_at) if node.reason and node.reason_changed_at > 0 else None
    return Shown(reason_at, unhealthy_flags(node.state), node.reason_message)
