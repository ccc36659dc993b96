"""The scheduler's plain values: what "ended", "holds resources" and "bound for job N" mean."""

from __future__ import annotations

from dataclasses import replace

from syncer.controllers.scheduler.values import (
    Job,
    Marker,
    Pod,
    bound_job_id,
    job_ended,
    pod_ended,
    pod_holds,
)
from syncer.model.keys import Keys


def test_a_pod_ends_when_deleted_or_done() -> None:
    assert not pod_ended(False, "Pending")
    assert not pod_ended(False, "Running")
    assert not pod_ended(False, "Unknown")
    assert pod_ended(True, "Running")
    assert pod_ended(False, "Succeeded")
    assert pod_ended(False, "Failed")
    assert Pod(namespace="n", name="p", uid="u", deleting=True).ended


def test_a_pod_holds_resources_while_bound_and_not_done() -> None:
    assert pod_holds("k1", "Running")
    assert pod_holds("k1", "Pending")
    assert pod_holds("k1", "Unknown")
    assert not pod_holds("", "Running")
    assert not pod_holds("k1", "Succeeded")
    assert not pod_holds("k1", "Failed")
    assert Pod(
        namespace="n", name="p", uid="u", node_name="k1", deleting=True
    ).holds  # terminating: still runs


def test_the_job_a_pod_was_bound_for() -> None:
    assert bound_job_id({Keys.SCHEDULER_JOB_ID: "42"}, "k1") == 42
    for text in ("", "x", "-1", "4.2", "\uff14"):
        assert bound_job_id({Keys.SCHEDULER_JOB_ID: text}, "k1") is None, text
    assert bound_job_id({}, "k1") is None
    # the annotation comes with the binding: on a pod not bound it is a copy's, not ours
    assert bound_job_id({Keys.SCHEDULER_JOB_ID: "42"}, "") is None
    annotated = Pod(namespace="n", name="p", uid="u", annotations={Keys.SCHEDULER_JOB_ID: "7"})
    assert annotated.job_id is None
    assert replace(annotated, node_name="k1").job_id == 7


def test_a_job_ends_in_a_final_state_or_while_completing() -> None:
    final = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE")
    for state in (*final, "OUT_OF_MEMORY"):
        assert job_ended(state, frozenset()), state
    for state in ("PENDING", "RUNNING", "SUSPENDED"):
        assert not job_ended(state, frozenset()), state
    assert job_ended("RUNNING", frozenset({"COMPLETING"}))
    assert not job_ended("RUNNING", frozenset({"CONFIGURING"}))
    marker = Marker(release="r", key="k", pods=(("a", "1"), ("b", "2")))
    assert marker.uids == frozenset({"1", "2"})
    assert Job(job_id=1, state="CANCELLED", marker=marker).ended
    assert Job(job_id=1, state="RUNNING", marker=marker).known
    assert not Job(job_id=1, state="RESIZING", marker=marker).known
