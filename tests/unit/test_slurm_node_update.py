"""A node update as slurmrestd takes it and how a node read back shows it (a refused bulk update is sorted
into the nodes it changed and those it did not with `applied_to`): one rule a test."""

from __future__ import annotations

import pytest

from syncer.model.slurm import SlurmNode
from syncer.slurm.updates import NodeUpdate

DRAIN = NodeUpdate(state=("DRAIN",), reason="k8s: pod gone")


def node(
    *state: str, reason: str = "", features: tuple[str, ...] = (), active: tuple[str, ...] = ()
) -> SlurmNode:
    return SlurmNode(
        name="n", state=frozenset(state), reason=reason, features=features, active_features=active
    )


def test_state_reason_and_comment_go_to_their_own_keys():
    update = NodeUpdate(state=("DRAIN",), reason="r", comment="c")
    assert update.body() == {"state": ["DRAIN"], "reason": "r", "comment": "c"}


def test_an_update_with_nothing_to_send_is_refused_before_slurmrestd():
    with pytest.raises(ValueError, match=r"^a node update needs at least one field$"):
        NodeUpdate().body()


def test_a_drain_shows_once_the_node_is_drained_with_this_reason():
    assert DRAIN.applied_to(node("IDLE", "DRAIN", reason="k8s: pod gone"))
    assert not DRAIN.applied_to(node("IDLE", "DRAIN", reason="someone else's"))
    assert not DRAIN.applied_to(node("IDLE", reason="k8s: pod gone"))


def test_a_drain_without_a_reason_shows_with_any_reason():
    assert NodeUpdate(state=("DRAIN",)).applied_to(node("IDLE", "DRAIN", reason="any"))


def test_an_undrain_shows_once_the_drain_flag_is_gone():
    undrain = NodeUpdate(state=("UNDRAIN",))
    assert undrain.applied_to(node("IDLE"))
    assert not undrain.applied_to(node("IDLE", "DRAIN"))


def test_another_state_is_not_read_back():
    assert NodeUpdate(state=("RESUME",)).applied_to(node("IDLE", "DRAIN"))


def test_features_show_as_sets_and_each_list_on_its_own():
    update = NodeUpdate(features=("a", "b"), features_act=("b",))
    assert update.applied_to(node("IDLE", features=("b", "a"), active=("b",)))
    assert not update.applied_to(node("IDLE", features=("a",), active=("b",)))
    assert not update.applied_to(node("IDLE", features=("a", "b"), active=()))
