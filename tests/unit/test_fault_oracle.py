"""The fault harness's oracle reads every Slurm write at the wire: single-node and bulk (issue 18), so a
wrong drain sent in a bulk request is judged like any other."""

from __future__ import annotations

import json

from benchmarks.faults import Truth, judge_shown, judge_writes, node_writes


def bulk(
    at: float, names: list[str], state: list[str], reason: str = "k8s: cordon"
) -> tuple[float, str, str, bytes]:
    body = {"name": ",".join(names), "state": state, **({"reason": reason} if "DRAIN" in state else {})}
    return (at, "POST", "/slurm/v0.0.45/nodes/", json.dumps(body).encode())


def single(at: float, name: str, state: list[str]) -> tuple[float, str, str, bytes]:
    return (at, "POST", f"/slurm/v0.0.45/node/{name}", json.dumps({"state": state}).encode())


def test_a_bulk_write_names_each_node_with_its_state() -> None:
    writes = [
        bulk(1.0, ["a", "b"], ["DRAIN"]),
        single(2.0, "c", ["UNDRAIN"]),
        (3.0, "GET", "/slurm/v0.0.45/nodes/", b""),
    ]
    assert [(at, node, state) for at, node, state, _ in node_writes(writes)] == [
        (1.0, "a", ["DRAIN"]), (1.0, "b", ["DRAIN"]), (2.0, "c", ["UNDRAIN"]),
    ]  # fmt: skip


def test_a_wrong_drain_in_a_bulk_write_is_judged() -> None:
    truth = Truth(cordoned_at={"a": 0.5, "b": 0.5}, uncordoned_at={"b": 0.8})
    actions, wrong = judge_writes([bulk(1.0, ["a", "b", "c"], ["DRAIN"])], truth)
    assert actions == 3
    assert wrong == [
        "drained b after its uncordon (stale): 0.20 s after it, 0.50 s after the cordon",
        "drained c, not cordoned (never cordoned)",
    ]
    # and a drain shown in Kubernetes after a bulk drain write is one Slurm had
    assert judge_shown([(1.5, "a", "IDLE+DRAIN")], [bulk(1.0, ["a"], ["DRAIN"])], Truth()) == []
    assert judge_shown([(0.9, "a", "IDLE+DRAIN")], [bulk(1.0, ["a"], ["DRAIN"])], Truth()) != []


def test_an_unreadable_write_is_wrong() -> None:
    _, wrong = judge_writes([(1.0, "POST", "/slurm/v0.0.45/nodes/", b"{not json")], Truth())
    assert wrong and "unreadable" in wrong[0]


def test_an_undrain_is_wrong_only_while_a_cordon_or_someone_elses_drain_holds() -> None:
    """Wrong: an undrain while the node's cordon holds, or while the harness's Slurm-side drain does. Right:
    after the uncordon, and on a node never cordoned in the scenario, whose drain under the syncer's reason
    was left by an earlier one (a baseline on 24.11 judged that undrain 'while cordoned (before its cordon)',
    the node never cordoned)."""
    truth = Truth(
        cordoned_at={"held": 1.0, "lifted": 1.0}, uncordoned_at={"lifted": 2.0},
        slurm_drained_at={"admin": 1.0, "resumed": 1.0}, slurm_resumed_at={"resumed": 2.0},
    )  # fmt: skip
    writes = [single(3.0, name, ["UNDRAIN"]) for name in ("held", "lifted", "leftover", "admin", "resumed")]
    writes.append(single(0.5, "held", ["UNDRAIN"]))  # before its cordon: nothing held it yet
    _, wrong = judge_writes(writes, truth)
    assert wrong == [
        "undrained held while cordoned (2.00 s after its cordon)",
        "undrained admin while drained in Slurm by someone else (scontrol)",
    ]
