"""Slurm's power saving seen by the sync engine: a member powering up (NOT_RESPONDING until its slurmd
registers) or powered down is not a health fault mirrored to Kubernetes, and a pod a power-managed NodeSet
deletes for a power-down (annotated so) terminates without a drain (which would keep Slurm from powering
the node up again)."""

from __future__ import annotations

import pytest

from syncer.controllers.sync.plan import SlurmAction, desired_conditions
from syncer.controllers.sync.shown import shown_of
from syncer.model.keys import Keys
from syncer.model.slurm import unhealthy_flags
from tests.unit.test_sync_decide import NOW, knode, kpod, run, snode

POWERING_UP = ("ALLOCATED", "CLOUD", "DYNAMIC_NORM", "NOT_RESPONDING", "POWERING_UP")


@pytest.mark.parametrize(
    "flags",
    [
        POWERING_UP,
        ("IDLE", "CLOUD", "POWERED_DOWN"),
        ("IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_DOWN"),
    ],
)
def test_power_states_are_healthy(flags: tuple[str, ...]) -> None:
    _, healthy = desired_conditions(snode(*flags), shown_of(snode(*flags)))
    assert (healthy.type, healthy.status) == (Keys.CONDITION_HEALTHY, "True")
    assert not snode(*flags).unhealthy


def test_not_responding_outside_power_saving_is_still_a_fault() -> None:
    flaky = snode("IDLE", "NOT_RESPONDING")
    _, healthy = desired_conditions(flaky, shown_of(flaky))
    assert healthy.status == "False"
    assert unhealthy_flags(frozenset({"DOWN", "POWERED_DOWN"})) == {"DOWN"}  # a DOWN one stays DOWN


def test_powering_up_sends_no_unhealthy_event() -> None:
    pod = kpod(annotations={Keys.STATE: "IDLE+CLOUD+POWERED_DOWN"})
    decision = run(snode(*POWERING_UP), pod, knode())
    assert all(e.reason != "SlurmNodeUnhealthy" for e in decision.events)


def test_a_pod_deleted_for_a_power_down_is_not_drained() -> None:
    marked = kpod(deletion_timestamp=NOW, annotations={Keys.POWER_DOWN: "IDLE+CLOUD+POWERING_DOWN"})
    for flags in (("IDLE", "CLOUD", "POWERED_DOWN"), ("IDLE", "CLOUD", "POWERING_DOWN"), ("IDLE", "CLOUD")):
        decision = run(snode(*flags), marked, knode())
        assert decision.slurm_action is None and decision.causes == ()


def test_any_other_terminating_pod_is_still_drained_even_on_a_powered_down_node() -> None:
    for flags in (("IDLE", "CLOUD"), ("IDLE", "CLOUD", "POWERED_DOWN")):
        decision = run(snode(*flags), kpod(deletion_timestamp=NOW), knode())
        assert decision.slurm_action == SlurmAction("drain", "k8s: pod hpc/slurmd-0 terminating")


def test_a_pod_deleted_for_a_power_down_still_drains_for_its_other_causes() -> None:
    """Only the termination's own drain is left out: its Node cordoned still drains the Slurm node."""
    marked = kpod(deletion_timestamp=NOW, annotations={Keys.POWER_DOWN: "IDLE+CLOUD+POWERING_DOWN"})
    decision = run(snode("IDLE", "CLOUD"), marked, knode(unschedulable=True))
    assert [c.kind for c in decision.causes] == ["cordon"]
    assert decision.slurm_action == SlurmAction("drain", "k8s: Node cordoned")


def test_a_node_powering_up_for_a_job_is_drained_only_once_it_registered() -> None:
    """review5: Slurm requeues the jobs of a node drained while it powers up for them (a --no-requeue job
    ends NODE_FAIL, measured on 26.05.5): a cause (here the member's pod deleted) waits for the registration.
    A node powering up with no job yet, or up and running its job, is drained at once."""
    going = kpod(deletion_timestamp=NOW)
    drain = SlurmAction("drain", "k8s: pod hpc/slurmd-0 terminating")
    assert run(snode(*POWERING_UP), going, knode()).slurm_action is None
    assert run(snode("MIXED", "CLOUD", "POWERING_UP"), going, knode()).slurm_action is None
    assert run(snode("IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP"), going, knode()).slurm_action == drain
    assert run(snode("ALLOCATED", "CLOUD", "DYNAMIC_NORM"), going, knode()).slurm_action == drain
    # a drain already there (placed before the power-up) is kept, and lifted as ever once no cause holds
    drained = snode(*POWERING_UP, "DRAIN", reason="k8s: pod hpc/slurmd-0 terminating")
    assert run(drained, going, knode()).slurm_action is None
