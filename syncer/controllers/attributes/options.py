"""The attribute controller's options and their rows of the option table (section "Node attributes")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from syncer.controllers.attributes import features
from syncer.controllers.attributes.features import DEFAULT_PREFIX, FEATURE, FeatureLabel
from syncer.controllers.attributes.topology import DEFAULT_BLOCK_LABEL, DEFAULT_TREE_LABELS, TopologySpec
from syncer.runtime.options import Option


@dataclass(frozen=True)
class AttributeOptions:
    feature_labels: tuple[FeatureLabel, ...] = ()
    feature_prefix: str = features.DEFAULT_PREFIX
    topology: TopologySpec = field(default_factory=TopologySpec)

    def __post_init__(self) -> None:
        # an empty prefix would make every admin's feature look like ours
        if not self.feature_prefix or not features.FEATURE.fullmatch(self.feature_prefix):
            raise ValueError(f"feature prefix {self.feature_prefix!r}: letters, digits, '.', '_', '-', ':'")

    @property
    def enabled(self) -> bool:
        return bool(self.feature_labels) or self.topology.enabled


def feature_prefix(text: str) -> str:
    if not FEATURE.fullmatch(text):
        raise ValueError("a non-empty prefix of letters, digits, '.', '_', '-', ':' (e.g. k8s.)")
    return text


SECTION = "Node attributes"
OPTIONS = (
    Option(
        "feature-label",
        FeatureLabel.parse,
        (),
        "Node label KEY[=NAME] carried to the bound Slurm nodes as the feature <prefix><NAME>:<value> "
        "(value true: <prefix><NAME>; false or absent: none); NAME defaults to KEY after its last / "
        "(repeatable)",
        SECTION,
        "list",
    ),
    Option(
        "feature-prefix",
        feature_prefix,
        DEFAULT_PREFIX,
        "Slurm features starting with this are the syncer's; all others are never touched",
        SECTION,
    ),
    Option(
        "topology-block-name",
        str,
        "",
        "block topology of topology.yaml that topology-block-label places nodes in (Slurm 25.05+); "
        "empty: off",
        SECTION,
    ),
    Option(
        "topology-block-label",
        str,
        DEFAULT_BLOCK_LABEL,
        "Node label naming a node's block (a block topology.yaml declares)",
        SECTION,
    ),
    Option(
        "topology-tree-name",
        str,
        "",
        "tree topology of topology.yaml that topology-tree-label places nodes in (Slurm 25.05+); empty: off",
        SECTION,
    ),
    Option(
        "topology-kueue",
        str,
        "",
        "name of a Kueue Topology (kueue.x-k8s.io) whose levels name the tree labels instead of "
        "topology-tree-label (read at start and every minute); empty: not used",
        SECTION,
    ),
    Option(
        "topology-tree-label",
        str,
        DEFAULT_TREE_LABELS,
        "Node labels naming a node's switches, top tier first, leaf switch last (repeatable; the path "
        "starts at the highest tier a node has, a switch topology.yaml must declare)",
        SECTION,
        "list",
        shown_default=",".join(DEFAULT_TREE_LABELS),
    ),
)


def options_from(values: Mapping[str, Any]) -> AttributeOptions:
    return AttributeOptions(
        feature_labels=values["feature_label"],
        feature_prefix=values["feature_prefix"],
        topology=TopologySpec(
            block_name=values["topology_block_name"],
            block_label=values["topology_block_label"],
            tree_name=values["topology_tree_name"],
            tree_labels=values["topology_tree_label"],
            kueue_topology=values["topology_kueue"],
        ),
    )
