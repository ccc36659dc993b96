"""The rules of syncer/model/jobs.py, each stated by a test (the module is mutation-tested against these):
which states are live, ended and released, when a job is being preempted, and GRES device indices."""

from __future__ import annotations

import pytest

from syncer.model.jobs import NodeAllocation, SlurmJob, base_state_of, gres_indices, job_ended


@pytest.mark.parametrize(
    ("detail", "name", "indices"),
    [
        ("gpu:2(IDX:0-1)", "gpu", (0, 1)),
        ("gpu:a100:1(IDX:3)", "gpu", (3,)),
        ("gpu:3(IDX:0,2-3)", "gpu", (0, 2, 3)),
        ("gpu:3(IDX:0-1,3),fpga:1(IDX:0)", "fpga", (0,)),
        ("gpu:3(IDX:0-1,3),fpga:1(IDX:0)", "gpu", (0, 1, 3)),
        ("fpga:1(IDX:0)", "gpu", ()),
        ("gpu:1", "gpu", ()),
        ("", "gpu", ()),
        ("gpu:1(IDX:a-b)", "gpu", ()),
        ("gpu:1(IDX:2-x)", "gpu", ()),
        ("gpus:1(IDX:4)", "gpu", ()),
        (" gpu:1(IDX:5) ", "gpu", (5,)),
        ("gpu:1(IDX:)", "gpu", ()),
        ("gpu:3(IDX:0-1-2)", "gpu", ()),
        ("gpu:2(IDX:4-5),gpu:1(IDX:7)", "gpu", (4, 5, 7)),
        ("gpu(IDX:6)", "gpu", (6,)),
    ],
)
def test_gres_indices(detail: str, name: str, indices: tuple[int, ...]) -> None:
    assert gres_indices(detail, name) == indices


def job(*state: str, **fields: object) -> SlurmJob:
    return SlurmJob(job_id=1, state=frozenset(state), **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "base", "ended", "released"),
    [
        (("PENDING",), "PENDING", False, False),
        (("RUNNING", "CONFIGURING"), "RUNNING", False, False),
        (("SUSPENDED",), "SUSPENDED", False, False),
        (("CANCELLED", "COMPLETING"), "CANCELLED", True, False),
        (("CANCELLED",), "CANCELLED", True, True),
        (("PREEMPTED",), "PREEMPTED", True, True),
        (("NODE_FAIL",), "NODE_FAIL", True, True),
        (("TIMEOUT",), "TIMEOUT", True, True),
        (("PENDING", "REQUEUED"), "PENDING", False, False),
        (("SOMETHING_NEW",), "", False, False),
        ((), "", False, False),
    ],
)
def test_states(state: tuple[str, ...], base: str, ended: bool, released: bool) -> None:
    assert base_state_of(frozenset(state)) == base
    assert job_ended(frozenset(state)) is ended
    assert job(*state).ended is ended and job(*state).released is released


def test_a_job_is_preempting_from_its_preempt_time_until_it_ends() -> None:
    assert job("RUNNING", preempt_time=100).preempting
    assert not job("RUNNING").preempting
    assert not job("PREEMPTED", preempt_time=100).preempting
    assert job("PENDING").pending and not job("PENDING").running and job("RUNNING").running


def test_a_nodes_gpu_indices_come_from_its_gres_detail() -> None:
    assert NodeAllocation("n1", 2, 100, "gpu:2(IDX:1-2),fpga:1(IDX:0)").gpu_indices == (1, 2)
    assert NodeAllocation("n1", 2, 100).gpu_indices == ()
