"""Topology labels -> a Slurm node's topology_str (syncer/controllers/attributes/topology.py) and the update
value: pure."""

from __future__ import annotations

import pytest

from syncer.controllers.attributes.topology import (
    DEFAULT_BLOCK_LABEL,
    DEFAULT_TREE_LABELS,
    TopologySpec,
    WantedTopology,
    kueue_levels,
    merged,
    wanted,
)
from syncer.model.slurm import SlurmNode
from syncer.slurm.updates import NodeUpdate

SPEC = TopologySpec(block_name="block", tree_name="tree")
TOPOGRAPH = {
    DEFAULT_BLOCK_LABEL: "nvl72-1",
    DEFAULT_TREE_LABELS[0]: "core1",
    DEFAULT_TREE_LABELS[1]: "spine3",
    DEFAULT_TREE_LABELS[2]: "leaf17",
}


def test_topograph_labels_give_a_block_and_a_switch_path_top_first() -> None:
    assert wanted(TOPOGRAPH, SPEC).topology == "block:nvl72-1,tree:core1:spine3:leaf17"
    assert wanted(TOPOGRAPH, TopologySpec(block_name="default")).topology == "default:nvl72-1"


def test_nothing_is_asked_without_the_labels_or_the_topology_names() -> None:
    assert not TopologySpec().enabled and wanted(TOPOGRAPH, TopologySpec()).topology is None
    gap = {k: v for k, v in TOPOGRAPH.items() if k != DEFAULT_TREE_LABELS[1]}
    assert wanted(gap, SPEC).topology == "block:nvl72-1"  # a gap between tiers: no path
    no_leaf = {k: v for k, v in TOPOGRAPH.items() if k != DEFAULT_TREE_LABELS[2]}
    assert wanted(no_leaf, SPEC).topology == "block:nvl72-1"
    two_tier = {k: v for k, v in TOPOGRAPH.items() if k != DEFAULT_TREE_LABELS[0]}
    assert wanted(two_tier, SPEC).topology == "block:nvl72-1,tree:spine3:leaf17"  # no core: starts below
    assert wanted({}, SPEC).topology is None


def test_sunk_and_soperator_schemes_by_configuration() -> None:
    ib = ("ib.coreweave.cloud/fabric", "ib.coreweave.cloud/superpod", "ib.coreweave.cloud/leafgroup")
    sunk = TopologySpec(
        block_name="nvl", block_label="ds.coreweave.com/nvlink.domain", tree_name="ib", tree_labels=ib
    )
    labels = {
        "ds.coreweave.com/nvlink.domain": "d7",
        "ib.coreweave.cloud/fabric": "f1",
        "ib.coreweave.cloud/superpod": "sp2",
        "ib.coreweave.cloud/leafgroup": "lg4",
    }
    assert wanted(labels, sunk).topology == "nvl:d7,ib:f1:sp2:lg4"
    nebius = TopologySpec(
        tree_name="default", tree_labels=tuple(f"topology.nebius.com/tier-{n}" for n in (3, 2, 1))
    )
    labels = {
        "topology.nebius.com/tier-1": "t1a",
        "topology.nebius.com/tier-2": "t2a",
        "topology.nebius.com/tier-3": "t3",
    }
    assert wanted(labels, nebius).topology == "default:t3:t2a:t1a"


@pytest.mark.parametrize("value", ["a:b", "a,b", "a b", "a=b"])
def test_a_unit_slurm_would_misread_is_refused(value: str) -> None:
    result = wanted({**TOPOGRAPH, DEFAULT_BLOCK_LABEL: value}, SPEC)
    assert result.topology == "tree:core1:spine3:leaf17"
    assert result.refused == ((DEFAULT_BLOCK_LABEL, value),)


def test_merge_keeps_topologies_the_syncer_does_not_manage_and_is_idempotent() -> None:
    spec = TopologySpec(block_name="block")
    assert merged("block:b0,tree:sw1", "block:b1", spec) == "tree:sw1,block:b1"
    assert merged("tree:sw1,block:b1", "block:b1", spec) is None
    assert merged("block:b0", None, spec) is None  # no labels: left as it is
    assert merged("", "block:b1", spec) == "block:b1"


def test_node_update_bodies_and_read_back() -> None:
    update = NodeUpdate(features=("a", "k8s.x"), features_act=("k8s.x",))
    assert update.body() == {"features": ["a", "k8s.x"], "features_act": ["k8s.x"]}
    assert NodeUpdate(topology="block:b1").body() == {"topology_str": "block:b1"}
    node = SlurmNode(name="n", state=frozenset({"IDLE"}), features=("k8s.x", "a"), active_features=("k8s.x",))
    assert update.applied_to(node) and not NodeUpdate(topology="block:b1").applied_to(node)
    with pytest.raises(ValueError):
        NodeUpdate().body()


def test_a_kueue_topology_names_the_tree_labels_without_the_node_level() -> None:
    topology = {
        "spec": {
            "levels": [
                {"nodeLabel": "cloud.example.com/topology-block"},
                {"nodeLabel": "cloud.example.com/topology-rack"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]
        }
    }
    assert kueue_levels(topology) == ("cloud.example.com/topology-block", "cloud.example.com/topology-rack")
    assert kueue_levels({}) == () and kueue_levels({"spec": {"levels": [{}]}}) == ()


def test_a_path_with_deeper_switches_is_replaced_whole_and_nothing_changes_when_all_agree() -> None:
    spec = TopologySpec(block_name="blk", tree_name="tree", tree_labels=("spine", "leaf"))
    # the managed tree's old path (three levels) goes, whatever its depth; a foreign topology stays
    assert merged("other:x,tree:s1:l1", "tree:s2:l2", spec) == "other:x,tree:s2:l2"
    # every managed topology as Slurm has it already: no write (both entries of the wanted string counted)
    assert merged("blk:b1,tree:s1:l1", "blk:b1,tree:s1:l1", spec) is None


def test_a_gap_between_tiers_gives_no_path_and_refuses_nothing() -> None:
    spec = TopologySpec(tree_name="tree", tree_labels=("core", "spine", "leaf"))
    assert wanted({"core": "c1", "leaf": "l1"}, spec) == WantedTopology(None, ())
