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
    assert wrong == ["drained b after its uncordon (stale)", "drained c, not cordoned"]
    # and a drain shown in Kubernetes after a bulk drain write is one Slurm had
    assert judge_shown([(1.5, "a", "IDLE+DRAIN")], [bulk(1.0, ["a"], ["DRAIN"])], Truth()) == []
    assert judge_shown([(0.9, "a", "IDLE+DRAIN")], [bulk(1.0, ["a"], ["DRAIN"])], Truth()) != []


def test_an_unreadable_write_is_wrong() -> None:
    _, wrong = judge_writes([(1.0, "POST", "/slurm/v0.0.45/nodes/", b"{not json")], Truth())
    assert wrong and "unreadable" in wrong[0]
