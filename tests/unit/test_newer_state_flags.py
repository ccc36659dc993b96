"""The state flags Slurm 25.11/26.05 added (EXTERNAL, BLOCKED from v0.0.44; POWER_DOWN_ASAP,
POWER_DOWN_FORCE from v0.0.45) are decoded as known flags and never cause, prevent or change an action."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from syncer.controllers.sync.options import SyncOptions
from syncer.model import KubeNode, KubePod, SlurmNode
from syncer.model.slurm import INFORMATIONAL_FLAGS, KNOWN_FLAGS
from syncer.slurm.models import NodesResponse
from tests.unit.test_sync_decide import NODES, OPTIONS, PODS, run, slurm_nodes

NEWER = ("EXTERNAL", "BLOCKED", "POWER_DOWN_ASAP", "POWER_DOWN_FORCE")
NEWER_FLAGS = st.frozensets(st.sampled_from(NEWER), min_size=1)


def test_the_newer_flags_are_known_and_informational() -> None:
    assert set(NEWER) <= INFORMATIONAL_FLAGS <= KNOWN_FLAGS


@settings(max_examples=400)
@given(slurm_nodes(), NEWER_FLAGS, PODS, NODES, OPTIONS, st.booleans())
def test_newer_flags_change_no_decision(
    slurm: SlurmNode,
    newer: frozenset[str],
    pod: KubePod | None,
    node: KubeNode | None,
    opts: SyncOptions,
    fresh: bool,
) -> None:
    without = run(slurm, pod, node, fresh=fresh, opts=opts)
    flagged = msgspec.structs.replace(slurm, state=slurm.state | newer)
    decision = run(flagged, pod, node, fresh=fresh, opts=opts)
    assert decision.slurm_action == without.slurm_action
    assert decision.pod_conditions == without.pod_conditions
    assert decision.node_conditions == without.node_conditions
    assert (flagged.unhealthy, flagged.busy, flagged.drained, flagged.base_state) == (
        slurm.unhealthy,
        slurm.busy,
        slurm.drained,
        slurm.base_state,
    )


def test_a_v0_0_45_listing_decodes_the_new_flags_without_a_warning() -> None:
    body = {
        "nodes": [
            {"name": "ext1", "state": ["IDLE", "EXTERNAL", "DYNAMIC_NORM"]},
            {"name": "n2", "state": ["ALLOCATED", "DRAIN", "POWER_DOWN_ASAP", "BLOCKED"], "reason": "x"},
        ]
    }
    with capture_logs() as logs:
        nodes = [
            raw.to_node() for raw in msgspec.json.decode(msgspec.json.encode(body), type=NodesResponse).nodes
        ]
    assert "EXTERNAL" in nodes[0].state and {"POWER_DOWN_ASAP", "BLOCKED"} <= nodes[1].state
    assert not [entry for entry in logs if entry["event"] == "slurm_state_flag_unknown"]


def test_an_unknown_flag_is_said_once() -> None:
    lists = [["IDLE", "QUANTUM_ENTANGLED"], ["MIXED", "QUANTUM_ENTANGLED"], ["QUANTUM_ENTANGLED", "IDLE"]]
    body = {"nodes": [{"name": f"n{i}", "state": state} for i, state in enumerate(lists)]}
    with capture_logs() as logs:
        for _ in range(2):
            for raw in msgspec.json.decode(msgspec.json.encode(body), type=NodesResponse).nodes:
                assert "QUANTUM_ENTANGLED" in raw.to_node().state
    said = [entry for entry in logs if entry["event"] == "slurm_state_flag_unknown"]
    assert [entry["flag"] for entry in said] == ["QUANTUM_ENTANGLED"]
