"""The fault harness's oracle reads every Slurm write at the wire: single-node and bulk (issue 18), so a
wrong drain sent in a bulk request is judged like any other."""

from __future__ import annotations

import json

from benchmarks.faults import Look, Truth, judge_shown, judge_writes, node_writes, wrong_writes


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


def race_truth() -> Truth:
    """Node a cordoned at 1.0 (rv 10) and uncordoned at 2.0 (rv 20)."""
    return Truth(cordoned_at={"a": 1.0}, uncordoned_at={"a": 2.0}, cordon_rv={"a": 10}, uncordon_rv={"a": 20})


def test_a_drain_decided_before_the_cache_had_the_uncordon_and_undone_in_time_raced_it() -> None:
    """The syncer's last look (its "still wanted?" check) ran on a Node cache at rv 10, older than the
    uncordon's rv 20, and its undrain came 0.5 s after the stale drain (within RACE_UNDONE_S, 8 s): raced,
    reported apart, not wrong."""
    looks = [
        Look(1.90, "a", "DRAIN", True, 10),  # handed to the bulk writer
        Look(2.05, "a", "DRAIN", True, 10),  # still wanted: the watch had not delivered the uncordon yet
    ]
    writes = [single(2.10, "a", ["DRAIN"]), single(2.60, "a", ["UNDRAIN"])]
    judged = wrong_writes(writes, race_truth(), looks)
    assert (judged.actions, judged.wrong, judged.unproven) == (2, [], 0)
    assert judged.raced == [
        (2.10, "a", "drained a after its uncordon (stale): 0.10 s after it, 1.10 s after the cordon; raced: "
                    "decided +0.05 s from the change on rv 10 < 20, undone 0.50 s later"),
    ]  # fmt: skip
    assert judge_writes(writes, race_truth(), looks) == (2, [])


def test_a_drain_decided_after_the_cache_had_the_uncordon_is_wrong() -> None:
    """A look that can have sent the drain ran on a cache holding the uncordon (rv 20, or newer): the
    syncer decided on the uncordon and drained anyway. Wrong, undone or not."""
    writes = [single(2.30, "a", ["DRAIN"]), single(2.60, "a", ["UNDRAIN"])]
    for rv in (20, 21):
        looks = [Look(1.90, "a", "DRAIN", True, 10), Look(2.20, "a", "DRAIN", True, rv)]
        judged = wrong_writes(writes, race_truth(), looks)
        assert judged.raced == []
        assert [text for _at, _node, text in judged.wrong] == [
            "drained a after its uncordon (stale): 0.30 s after it, 1.30 s after the cordon; not raced: "
            f"decided +0.20 s from the change on a cache that had it (rv {rv} >= 20)",
        ]
    # a look that dropped the write (still wanted False) sent nothing: the one before it decides
    looks = [Look(2.05, "a", "DRAIN", True, 10), Look(2.40, "a", "DRAIN", False, 20)]
    assert len(wrong_writes(writes, race_truth(), looks).raced) == 1


def test_a_raced_drain_never_undone_or_undone_late_is_wrong() -> None:
    looks = [Look(2.05, "a", "DRAIN", True, 10)]
    never = wrong_writes([single(2.10, "a", ["DRAIN"])], race_truth(), looks)
    late = wrong_writes([single(2.10, "a", ["DRAIN"]), single(10.20, "a", ["UNDRAIN"])], race_truth(), looks)
    # an undrain that arrived before the stale drain does not undo it
    before = wrong_writes([single(2.08, "a", ["UNDRAIN"]), single(2.10, "a", ["DRAIN"])], race_truth(), looks)
    for judged, after in ((never, "never"), (late, "8.10 s later"), (before, "never")):
        assert judged.raced == []
        assert [text for _at, _node, text in judged.wrong] == [
            "drained a after its uncordon (stale): 0.10 s after it, 1.10 s after the cordon; raced (decided "
            f"+0.05 s from the change on rv 10 < 20) but undone {after}, not within 8 s",
        ]


def test_a_stale_drain_whose_order_the_evidence_cannot_prove_is_wrong() -> None:
    """No look recorded (a syncer in another process), a look with no Node in the cache, or no version of
    the uncordon: the order is not proven, so the drain stays wrong and is counted as unproven."""
    writes = [single(2.10, "a", ["DRAIN"]), single(2.60, "a", ["UNDRAIN"])]
    no_version = race_truth()
    no_version.uncordon_rv.clear()
    cases = [
        (race_truth(), []),
        (race_truth(), [Look(2.05, "a", "DRAIN", True, None)]),
        (race_truth(), [Look(1.90, "a", "UNDRAIN", True, 10), Look(2.05, "b", "DRAIN", True, 10)]),
        (race_truth(), [Look(2.20, "a", "DRAIN", True, 10)]),  # after the write arrived: not its look
        (no_version, [Look(2.05, "a", "DRAIN", True, 10)]),
    ]
    for truth, looks in cases:
        judged = wrong_writes(writes, truth, looks)
        assert (judged.raced, judged.unproven, len(judged.wrong)) == ([], 1, 1), looks
        assert "order not proven" in judged.wrong[0][2]


def test_an_undrain_that_raced_the_cordon_and_was_undone_is_raced_but_other_wrongs_never_are() -> None:
    """The same rule the other way: an undrain decided on a cache older than the cordon, followed by the
    drain. A drain of a node never cordoned, or before its cordon, and an undrain of someone else's drain
    raced nothing in the Node cache: wrong whatever the looks."""
    truth = race_truth()
    truth.slurm_drained_at["admin"] = 0.5
    looks = [
        Look(0.95, "a", "UNDRAIN", True, 9),
        Look(1.50, "b", "DRAIN", True, 10),
        Look(0.95, "admin", "UNDRAIN", True, 10),
    ]
    writes = [
        single(1.05, "a", ["UNDRAIN"]), single(1.40, "a", ["DRAIN"]),
        single(1.60, "b", ["DRAIN"]), single(1.70, "b", ["UNDRAIN"]),
        single(1.00, "admin", ["UNDRAIN"]), single(1.10, "admin", ["DRAIN"]),
    ]  # fmt: skip
    judged = wrong_writes(writes, truth, looks)
    assert [text for _at, _node, text in judged.raced] == [
        "undrained a while cordoned (0.05 s after its cordon); raced: decided -0.05 s from the change on "
        "rv 9 < 10, undone 0.35 s later",
    ]
    assert [text for _at, _node, text in judged.wrong] == [
        "drained b, not cordoned (never cordoned)",
        "undrained admin while drained in Slurm by someone else (scontrol)",
        "drained admin, not cordoned (never cordoned)",
    ]
