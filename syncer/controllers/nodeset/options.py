"""The NodeSet controller's options and its row of the option table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from syncer.runtime.options import Option, parse_bool


@dataclass(frozen=True)
class NodeSetOptions:
    enabled: bool = True
    requeue_s: float = 2.0  # re-check of a NodeSet that is still converging
    # most members forced down per pass for a lost Node: the safety valve's floor (--safety-valve-min-nodes
    # - 1), so a cluster-wide Node blip does not requeue every job at once
    node_loss_limit: int = 2
    # power-managed members declared with Port=<base + ordinal> (0: Slurm's SlurmdPort). A test seam: several
    # slurmd on one host (the sandbox) need a port each, and slurmctld keeps a declared record's port.
    power_port_base: int = 0
    # the same seam by member name (wins over the base): NodeSets run side by side, their ordinals overlap
    power_ports: Callable[[str], int] | None = None


OPTIONS = (Option("nodeset-enabled", parse_bool, True, "run the NodeSet reconciler", "Sync", "flag"),)


def options_from(values: Mapping[str, Any]) -> NodeSetOptions:
    return NodeSetOptions(
        enabled=values["nodeset_enabled"], node_loss_limit=values["safety_valve_min_nodes"] - 1
    )
