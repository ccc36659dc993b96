"""A NodeSet's status, from what one pass sees and plans: the pod counts, the members' Slurm states and one
condition per question (is the spec valid, is Slurm's data fresh, is a drain overdue, is the NodeSet still
converging, and for power saving what Slurm's power states do and what failed). A condition keeps its
lastTransitionTime while its status stays the same."""

from __future__ import annotations

from typing import Any

import msgspec

from syncer.controllers.nodeset.plan import SCALE_IN, Member, Plan
from syncer.controllers.nodeset.power import PowerDecision, declare_failed_message, name_collision_message
from syncer.controllers.nodeset.status import compute_status, invalid_status, slurm_counts
from syncer.model.keys import Keys
from syncer.model.slurm import SlurmNode
from tests.unit.test_nodeset_plan import NS, make_spec, pod
from tests.unit.test_nodeset_power_plan import power

NOW = "2026-12-02T12:00:00Z"
THEN = "2026-12-01T08:00:00Z"
SELECTOR = f"{Keys.NODESET_LABEL}=gpu"


def node(name: str, *flags: str) -> SlurmNode:
    return SlurmNode(name=name, state=frozenset(flags))


def cond(
    type_: str, status: str, reason: str, message: str = "", since: str = NOW, gen: int = 0
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": gen,
    }


def status_of(result: Plan, spec: Any = None, *, nodeset: Any = NS, **kw: Any) -> dict[str, Any]:
    kw.setdefault("slurm_fresh", True)
    kw.setdefault("slurm_error", "")
    return compute_status(
        nodeset, spec or make_spec(2), result, kw.pop("pods", []), kw.pop("nodes", {}), now=NOW, **kw
    )


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_each_member_counts_once_down_before_drained_before_its_base_state() -> None:
    nodes = [
        node("a", "DOWN"), node("b", "IDLE", "NOT_RESPONDING"), node("c", "ALLOCATED", "DRAIN", "FAIL"),
        node("d", "IDLE", "DRAIN"), node("e", "ALLOCATED", "DRAIN"),
        node("f", "ALLOCATED"), node("g", "ALLOCATED"), node("h", "MIXED"), node("i", "MIXED"),
        node("j", "IDLE"), node("k", "IDLE"), node("l", "IDLE", "POWERING_UP", "NOT_RESPONDING"),
        node("m", "FUTURE"), node("n", "COMPLETING"),
    ]  # fmt: skip
    # l powers up: not a fault; m and n are in none of the five
    assert slurm_counts(nodes) == {"idle": 3, "allocated": 2, "mixed": 2, "drained": 2, "down": 3}


def test_a_steady_nodeset_counts_its_live_pods_and_their_members_slurm_states() -> None:
    spec = make_spec(4)
    pods = [
        pod("gpu-0", spec),
        pod("gpu-1", spec, hash_="old"),  # not updated yet
        pod("gpu-2", spec, ready=False),
        pod("gpu-3", spec, removal=SCALE_IN),  # ready, but being removed: not available
        pod("gpu-4", spec, terminating=True),  # gone already: not counted, nor its Slurm node
    ]
    nodes = {
        "gpu-0": node("gpu-0", "ALLOCATED"), "gpu-1": node("gpu-1", "IDLE"),
        "gpu-3": node("gpu-3", "IDLE", "DRAIN"), "gpu-4": node("gpu-4", "DOWN"),
        "other": node("other", "MIXED"),
    }  # fmt: skip
    nodeset = msgspec.structs.replace(NS, generation=7)
    status = status_of(Plan(), spec, nodeset=nodeset, pods=pods, nodes=nodes)
    assert status == {
        "observedGeneration": 7,
        "replicas": 4,
        "readyReplicas": 3,
        "updatedReplicas": 3,
        "availableReplicas": 2,
        "selector": SELECTOR,
        "templateHash": spec.template_hash(),
        "slurm": {"idle": 1, "allocated": 1, "mixed": 0, "drained": 1, "down": 0},
        "conditions": [
            cond("Valid", "True", "SpecAccepted", gen=7),
            cond("SlurmAvailable", "True", "Fresh", gen=7),
            cond("DrainTimeout", "False", "NoneOverdue", gen=7),
            cond("Progressing", "False", "Steady", gen=7),
        ],
    }


def test_a_condition_keeps_its_transition_time_while_its_status_stays_and_takes_now_when_it_flips() -> None:
    previous = [
        "junk",
        {"type": "Valid", "status": "True", "lastTransitionTime": THEN},
        {"type": "SlurmAvailable", "status": "True", "lastTransitionTime": THEN},  # flips to False below
        {"type": "DrainTimeout", "status": "False"},  # no time recorded: now
        {"type": "Progressing", "status": "False", "lastTransitionTime": ""},
    ]
    nodeset = msgspec.structs.replace(NS, status={"conditions": previous})
    found = conditions(status_of(Plan(), nodeset=nodeset, slurm_fresh=False))
    assert found["Valid"]["lastTransitionTime"] == THEN
    assert found["SlurmAvailable"]["lastTransitionTime"] == NOW
    assert found["DrainTimeout"]["lastTransitionTime"] == NOW
    assert found["Progressing"]["lastTransitionTime"] == NOW


def test_stale_slurm_data_says_why_and_that_removals_wait() -> None:
    found = conditions(status_of(Plan(), slurm_fresh=False))
    assert found["SlurmAvailable"] == cond(
        "SlurmAvailable", "False", "Stale", "Slurm data is stale or missing (no answer yet): removals wait"
    )
    found = conditions(status_of(Plan(), slurm_fresh=False, slurm_error="HTTP 503"))
    assert found["SlurmAvailable"]["message"] == "Slurm data is stale or missing (HTTP 503): removals wait"


def test_overdue_drains_name_the_first_ten_nodes_and_the_timeout() -> None:
    overdue = [f"gpu-{n:02d}" for n in range(11, -1, -1)]
    found = conditions(status_of(Plan(timed_out=overdue, draining=overdue)))
    assert found["DrainTimeout"] == cond(
        "DrainTimeout",
        "True",
        "JobsStillRunning",
        "12 node(s) still running jobs after drainTimeout 3600 s: "
        + ", ".join(f"gpu-{n:02d}" for n in range(10))
        + "; they are not forced: finish or cancel their jobs",
    )


def test_progressing_says_what_this_round_does_and_what_blocks_it() -> None:
    draining = [f"gpu-{n:02d}" for n in range(11, -1, -1)]
    result = Plan(
        create=[Member("gpu-20", 20), Member("gpu-21", 21)],
        draining=draining,
        delete_pods=["gpu-30"],
        delete_slurm_nodes=["gpu-31", "gpu-32"],
        blocked="removals wait for fresh Slurm data",
    )
    assert conditions(status_of(result))["Progressing"] == cond(
        "Progressing",
        "True",
        "Reconciling",
        "creating 2; draining 12: " + ", ".join(f"gpu-{n:02d}" for n in range(10))
        + "; removing 1 pod(s); deleting 2 Slurm node(s); removals wait for fresh Slurm data",
    )  # fmt: skip
    # busy with what the message does not list (a scale-in cancelled): still converging
    assert conditions(status_of(Plan(unmark=["gpu-0"])))["Progressing"]["message"] == "converging"


def test_a_member_whose_pod_ended_is_not_steady_and_the_message_names_it() -> None:
    """review5 #3: a NodeSet one pod short (evicted, slurmd exited) said Steady. The ended pods are named
    apart from the removals' deletes."""
    ended = Plan(delete_pods=["gpu-0", "gpu-1", "gpu-7"], ended={"gpu-1": True, "gpu-7": False})
    progressing = conditions(status_of(ended))["Progressing"]
    assert (progressing["status"], progressing["reason"]) == ("True", "Reconciling")
    assert progressing["message"] == "removing 1 pod(s); 2 pod(s) ended, deleted: gpu-1, gpu-7"
    only = Plan(delete_pods=["gpu-1"], ended={"gpu-1": True})
    assert conditions(status_of(only))["Progressing"]["message"] == "1 pod(s) ended, deleted: gpu-1"


def test_an_invalid_spec_leaves_the_counts_and_says_why_alone() -> None:
    stored = {
        "replicas": 2,
        "slurm": {"idle": 2},
        "conditions": [
            {"type": "Valid", "status": "True", "lastTransitionTime": THEN},
            {"type": "Progressing"},
        ],
    }
    nodeset = msgspec.structs.replace(NS, generation=3, status=stored)
    assert invalid_status(nodeset, "spec.replicas -1 must be a whole number >= 0", NOW) == {
        "replicas": 2,
        "slurm": {"idle": 2},
        "observedGeneration": 3,
        "selector": SELECTOR,
        "conditions": [
            cond("Valid", "False", "InvalidSpec", "spec.replicas -1 must be a whole number >= 0", gen=3)
        ],
    }
    # still invalid at the next pass: the transition time stays
    again = msgspec.structs.replace(nodeset, status=invalid_status(nodeset, "bad", NOW))
    assert invalid_status(again, "bad", "2026-12-03T00:00:00Z")["conditions"][0]["lastTransitionTime"] == NOW


COUNTS = {"poweredUp": 1, "poweringUp": 2, "poweredDown": 3, "poweringDown": 4, "heldByAdmin": 5}


def test_power_saving_reports_the_members_by_power_state_and_what_it_is_declaring() -> None:
    spec = power(4)
    result = Plan(power=PowerDecision(counts=dict(COUNTS)))
    status = status_of(result, spec, declaring=["gpu-3"])
    assert status["power"] == {**COUNTS, "declaring": ["gpu-3"]}
    found = conditions(status)
    assert found["PowerSaving"] == cond(
        "PowerSaving", "True", "Active",
        "1 up, 2 powering up, 3 powered down, 4 powering down, 5 held (DOWN/DRAIN not ours)",
    )  # fmt: skip
    assert found["PowerUpFailed"] == cond("PowerUpFailed", "False", "NoFailures")
    assert found["DeclareFailed"] == cond("DeclareFailed", "False", "AllDeclared")
    assert status_of(result, spec)["power"]["declaring"] == [], "nothing declaring: the list is emptied"
    assert [c["type"] for c in status["conditions"]][-3:] == ["PowerSaving", "PowerUpFailed", "DeclareFailed"]


def test_power_failures_name_the_first_five_members_and_slurms_refusal() -> None:
    failed = {f"gpu-{n}": f"why {n}" for n in range(6, 0, -1)}
    refused = {"gpu-9": "MaxNodeCount reached"}
    result = Plan(power=PowerDecision(counts=dict(COUNTS), failed=failed))
    found = conditions(status_of(result, power(10), declare_failed=refused))
    assert found["PowerUpFailed"] == cond(
        "PowerUpFailed", "True", "PoweredDown", "; ".join(f"gpu-{n}: why {n}" for n in range(1, 6))
    )
    assert found["DeclareFailed"] == cond(
        "DeclareFailed", "True", "SlurmRefused", declare_failed_message(refused)
    )


def test_slurm_unable_to_create_nodes_shows_the_slurm_conf_line_to_write_instead() -> None:
    for ceiling, names in ((4, "gpu-[0-3]"), (2, "gpu-[0-1]"), (1, "gpu-0")):
        spec = power(ceiling)
        assert spec.power is not None
        result = Plan(power=PowerDecision(counts=dict(COUNTS)))
        found = conditions(status_of(result, spec, power_unsupported="Slurm 24.11 cannot create nodes"))
        line = spec.power.node.node_conf(names)
        assert found["PowerSaving"] == cond(
            "PowerSaving", "False", "SlurmCannotCreateNodes",
            f"Slurm 24.11 cannot create nodes; name the members in slurm.conf instead: {line}",
        )  # fmt: skip


def test_member_names_someone_else_holds_make_the_spec_a_name_collision() -> None:
    result = Plan(power=PowerDecision(counts=dict(COUNTS), foreign=["gpu-1", "gpu-0"]))
    found = conditions(status_of(result, power(2)))
    assert found["Valid"] == cond(
        "Valid", "False", "NameCollision", name_collision_message(["gpu-1", "gpu-0"])
    )


def test_a_power_spec_without_a_power_decision_writes_no_power_status() -> None:
    status = status_of(Plan(), power(2))
    assert "power" not in status
    assert [c["type"] for c in status["conditions"]] == [
        "Valid",
        "SlurmAvailable",
        "DrainTimeout",
        "Progressing",
    ]
