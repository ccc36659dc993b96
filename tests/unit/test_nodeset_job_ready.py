"""When slurm-syncer's PrologSlurmctld may let a job start (issue 47): once every node of it that was
powering up has registered and its pods are Ready; at once for a job with no such node and for a node that
failed; never held for a node that was not seen powering up."""

from __future__ import annotations

from syncer.controllers.nodeset.job_ready import (
    JobVerdict,
    NodeReadiness,
    job_verdict,
    newly_watched,
    node_readiness,
    pod_ready,
)
from syncer.model.kube import Condition, KubePod
from syncer.model.slurm import SlurmNode

R = NodeReadiness


def node(*state: str) -> SlurmNode:
    return SlurmNode(name="m-0", state=frozenset(state))


def pod(ready: str | None = "True", deleting: bool = False) -> KubePod:
    conditions = () if ready is None else (Condition(type="Ready", status=ready),)
    return KubePod(
        namespace="ns", name="m-0", conditions=conditions, deletion_timestamp=1.0 if deleting else None
    )


def test_a_node_unknown_to_slurm_data_is_not_waited_for() -> None:
    assert node_readiness(None, [pod()]) is R.UNKNOWN


def test_powering_up_powered_down_and_power_up_asked_are_powering() -> None:
    for flags in (
        ("ALLOCATED", "CLOUD", "NOT_RESPONDING", "POWERING_UP"),
        ("ALLOCATED", "CLOUD", "POWERED_DOWN"),  # allocated, its power-up a moment away
        ("IDLE", "CLOUD", "POWERED_DOWN", "POWER_UP"),  # asked, Slurm's power-save pass not there yet
    ):
        assert node_readiness(node(*flags), [pod()]) is R.POWERING, flags


def test_a_power_up_flag_left_on_a_registered_node_is_ready() -> None:
    """Slurm clears POWER_UP only on a powered-down node: a slurmd that registered before Slurm's pass
    leaves it on a node that is up, whose job Slurm starts (its readiness ignores the flag)."""
    assert node_readiness(node("ALLOCATED", "CLOUD", "POWER_UP"), [pod()]) is R.READY


def test_down_or_being_powered_down_is_failed_even_while_powering_up() -> None:
    for flags in (
        ("DOWN", "CLOUD", "POWERED_DOWN"),
        ("IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP", "POWER_DOWN"),
        ("IDLE", "CLOUD", "POWERING_DOWN"),
        ("DOWN", "CLOUD", "POWER_DOWN_FORCE", "POWERING_UP"),
    ):
        assert node_readiness(node(*flags), []) is R.FAILED, flags


def test_not_responding_without_a_power_flag_is_silent() -> None:
    assert node_readiness(node("ALLOCATED", "NOT_RESPONDING"), [pod()]) is R.SILENT


def test_registered_is_ready_only_with_every_pod_ready() -> None:
    assert node_readiness(node("ALLOCATED", "CLOUD"), []) is R.READY
    assert node_readiness(node("MIXED"), [pod(), pod()]) is R.READY
    assert node_readiness(node("ALLOCATED"), [pod(), pod("False")]) is R.POD_NOT_READY
    assert node_readiness(node("ALLOCATED"), [pod(None)]) is R.POD_NOT_READY
    assert node_readiness(node("ALLOCATED"), [pod(deleting=True)]) is R.POD_NOT_READY


def test_pod_ready_needs_the_condition_true_and_no_deletion() -> None:
    assert pod_ready(pod())
    assert not pod_ready(pod("Unknown"))
    assert not pod_ready(pod(None))
    assert not pod_ready(pod(deleting=True))


def test_only_powering_nodes_are_watched() -> None:
    readiness = {"a": R.POWERING, "b": R.READY, "c": R.SILENT, "d": R.POD_NOT_READY, "e": R.UNKNOWN}
    assert newly_watched(readiness) == {"a"}


def test_a_job_with_nothing_watched_is_done_at_once_whatever_its_nodes_show() -> None:
    readiness = {"b": R.SILENT, "c": R.POD_NOT_READY, "d": R.FAILED}
    assert job_verdict(readiness, set()) == JobVerdict(True, (), ())


def test_a_watched_node_is_waited_for_until_registered_with_ready_pods() -> None:
    for state in (R.POWERING, R.SILENT, R.POD_NOT_READY):
        assert job_verdict({"a": state, "b": R.READY}, {"a"}) == JobVerdict(False, ("a",), ()), state
    assert job_verdict({"a": R.READY}, {"a"}) == JobVerdict(True, (), ())
    assert job_verdict({"a": R.UNKNOWN}, {"a"}) == JobVerdict(True, (), ())  # its record went: no wait


def test_every_watched_node_counts_sorted() -> None:
    verdict = job_verdict({"b": R.POWERING, "a": R.POD_NOT_READY, "c": R.READY}, {"a", "b", "c"})
    assert verdict == JobVerdict(False, ("a", "b"), ())


def test_a_failed_watched_node_ends_the_wait_at_once() -> None:
    verdict = job_verdict({"a": R.POWERING, "b": R.FAILED, "c": R.FAILED}, {"a", "c", "b"})
    assert verdict == JobVerdict(True, (), ("b", "c"))
