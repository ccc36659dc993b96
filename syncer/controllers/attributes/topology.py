"""Topology labels -> a Slurm node's topology (`topology_str`, Slurm 25.05+), pure.

Slurm names a node's place as `<topology>:<unit>` per topology of topology.yaml, joined by `,`: a block
topology's unit is the block, a tree topology's the switch path from the top to the leaf switch
(`tree:spine1:leaf3`). Measured on 26.05.5: a block must be declared in topology.yaml, and so must a
path's first switch; the switches below it are created as needed."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

UNIT = re.compile(r"[A-Za-z0-9._-]+")  # a unit name in topology_str (`:` and `,` separate there)
TOPOGRAPH = "network.topology.nvidia.com"
# NVIDIA topograph's default labels (its "node labels and annotations" reference): the accelerated
# interconnect domain (NVLink: a block) and the switch tiers, top to leaf (core only in three-tier fabrics).
DEFAULT_BLOCK_LABEL = f"{TOPOGRAPH}/accelerator"
DEFAULT_TREE_LABELS = (f"{TOPOGRAPH}/core", f"{TOPOGRAPH}/spine", f"{TOPOGRAPH}/leaf")


@dataclass(frozen=True)
class TopologySpec:
    """Which labels name a node's units, and the topology.yaml names they belong to ("" = not used)."""

    block_name: str = ""
    block_label: str = DEFAULT_BLOCK_LABEL
    tree_name: str = ""
    tree_labels: tuple[str, ...] = DEFAULT_TREE_LABELS
    kueue_topology: str = ""  # a Kueue Topology whose levels name the tree labels instead

    @property
    def enabled(self) -> bool:
        return bool(self.block_name or self.tree_name)


HOSTNAME_LABEL = "kubernetes.io/hostname"


def kueue_levels(topology: Mapping[str, object]) -> tuple[str, ...]:
    """The tree labels a Kueue `Topology` (kueue.x-k8s.io) names: its `spec.levels[].nodeLabel`, highest
    first, without the node level (`kubernetes.io/hostname`: in Slurm the node itself sits under the leaf)."""
    spec = topology.get("spec")
    levels = spec.get("levels") if isinstance(spec, Mapping) else None
    labels = [level.get("nodeLabel") for level in levels or () if isinstance(level, Mapping)]
    return tuple(label for label in labels if isinstance(label, str) and label and label != HOSTNAME_LABEL)


@dataclass(frozen=True)
class WantedTopology:
    topology: str | None  # None: the labels name no unit, the node's topology is left as it is
    refused: tuple[tuple[str, str], ...] = ()  # (label, value) Slurm cannot take as a unit name


def wanted(labels: Mapping[str, str], spec: TopologySpec) -> WantedTopology:
    parts: list[str] = []
    refused: list[tuple[str, str]] = []

    def units(keys: Sequence[str]) -> list[str] | None:
        values = [labels.get(key, "") for key in keys]
        while values and not values[0]:  # upper tiers a smaller fabric lacks: the path starts below
            keys, values = keys[1:], values[1:]
        if not values or not all(values):
            return None  # no leaf, or a gap between tiers: no path
        bad = [(key, value) for key, value in zip(keys, values, strict=True) if not UNIT.fullmatch(value)]
        refused.extend(bad)
        return None if bad else values

    if spec.block_name and (block := units((spec.block_label,))):
        parts.append(f"{spec.block_name}:{block[0]}")
    if spec.tree_name and spec.tree_labels and (path := units(spec.tree_labels)):
        parts.append(":".join((spec.tree_name, *path)))
    return WantedTopology(",".join(parts) or None, tuple(refused))


def merged(current: str, topology: str | None, spec: TopologySpec) -> str | None:
    """The node's whole `topology_str` with the units of the topologies the syncer manages set from the
    labels, or None when nothing changes. An update replaces every topology of the node, so units of
    topologies the syncer does not manage are sent back as Slurm shows them."""
    if topology is None:
        return None
    managed = {spec.block_name, spec.tree_name} - {""}
    entries = [e for e in current.split(",") if e]
    kept = [e for e in entries if e.split(":", 1)[0] not in managed]
    new = [*kept, *topology.split(",")]
    return None if set(new) == set(entries) else ",".join(new)
