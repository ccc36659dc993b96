"""Jobs as the scheduler reads them (syncer/model/jobs.py) and as they go over the wire
(syncer/slurm/jobs.py): decoding recorded answers of 26.05.5 and 24.11.5, the submit and update bodies, the
job gauges' fingerprint and the cache's per-job diff (the model's own rules: test_model_jobs.py)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from syncer.model.jobs import JobSubmission, NodeAllocation, SlurmJob
from syncer.slurm.errors import SlurmDecodeError
from syncer.slurm.job_cache import diff_one
from syncer.slurm.jobs import (
    MARKER_FIELD,
    PLACEHOLDER_SCRIPT,
    JobDetailsResponse,
    allocate_body,
    decode_job,
    decode_jobs,
    submit_body,
    update_body,
)
from syncer.slurm.metrics_hint import SlurmMetricsDecodeError
from syncer.slurm.metrics_jobs import job_fingerprint

DATA = Path(__file__).parent / "data"
MARKER = "slurm-syncer.dev/pods=ns/web-0,ns/web-1"


def recorded(release: str) -> list[SlurmJob]:
    """Two 2-node jobs with one GPU per node (external on 26.05, placeholder batch jobs on 24.11)."""
    body = (DATA / f"slurmrestd-{release}-jobs-gpu-pair.json").read_bytes()
    return decode_jobs(msgspec.json.decode(body, type=JobDetailsResponse).jobs, None)


@pytest.mark.parametrize("release", ["26.05.5", "24.11.5"])
def test_recorded_jobs_decode_with_their_allocation_per_node(release: str) -> None:
    first, second = recorded(release)
    assert first.marker == MARKER and first.name == "pod-web" and first.state == frozenset({"RUNNING"})
    assert first.external is (release == "26.05.5") and not first.requeue and first.running
    assert first.nodes == ("gpu1", "gpu2") and first.reason == "" and first.user == "slurm"
    assert first.allocation == (
        NodeAllocation("gpu1", 2, 1000, "gpu:1(IDX:0)"), NodeAllocation("gpu2", 2, 1000, "gpu:1(IDX:0)"),
    )  # fmt: skip
    assert [a.gpu_indices for a in second.allocation] == [(1,), (1,)]
    assert first.time_limit_min is None and first.start_time > first.submit_time - 60 > 0
    assert first.end_time > first.start_time and first.preempt_time == 0 and not first.preempting


def test_only_the_jobs_whose_marker_is_kept_are_decoded() -> None:
    body = (DATA / "slurmrestd-26.05.5-jobs-gpu-pair.json").read_bytes()
    raw = msgspec.json.decode(body, type=JobDetailsResponse).jobs
    assert decode_jobs(raw, lambda text: text == "other") == []
    assert [job.job_id for job in decode_jobs(raw, lambda text: text == MARKER)] == [1, 2]
    with pytest.raises(SlurmDecodeError):
        decode_job(msgspec.Raw(b'{"job_id": "not a number"}'))
    with pytest.raises(SlurmDecodeError):
        decode_jobs([msgspec.Raw(b"[1, 2]")], lambda text: True)


def submission(**fields: object) -> JobSubmission:
    return JobSubmission(name="pod-web-0", marker=MARKER, **fields)  # type: ignore[arg-type]


def test_an_external_submission_asks_for_exactly_what_is_given() -> None:
    body = submit_body(
        submission(
            cpus_per_task=2, nodes=2, tasks_per_node=1, memory_per_node_mb=1024, tres_per_node="gres/gpu:1",
            partition="gpu", account="ml", qos="high", reservation="r1", constraints="a100&ib",
            time_limit_min=60, priority=5, nice=10, required_nodes=("n1", "n2"), excluded_nodes=("n3",),
        ),
        "external",
    )  # fmt: skip
    assert body == {
        "job": {
            "name": "pod-web-0", MARKER_FIELD: MARKER, "cpus_per_task": 2, "flags": ["EXTERNAL_JOB"],
            "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"], "requeue": False,
            "nodes": "2", "tasks_per_node": 1,
            "memory_per_node": {"set": True, "infinite": False, "number": 1024},
            "tres_per_node": "gres/gpu:1", "partition": "gpu", "account": "ml", "qos": "high",
            "reservation": "r1", "constraints": "a100&ib",
            "time_limit": {"set": True, "infinite": False, "number": 60},
            "priority": {"set": True, "infinite": False, "number": 5}, "nice": 10,
            "required_nodes": ["n1", "n2"], "excluded_nodes": ["n3"],
        }
    }  # fmt: skip


def test_a_placeholder_submission_is_a_batch_job_that_holds_its_allocation() -> None:
    body = submit_body(
        submission(tasks=3, memory_per_cpu_mb=300, tres_per_task="gres/gpu:1", hold=True, requeue=True),
        "placeholder",
    )
    assert body["script"] == PLACEHOLDER_SCRIPT and "trap '' TERM" in PLACEHOLDER_SCRIPT
    job_fields = body["job"]
    assert (
        "flags" not in job_fields
        and job_fields["standard_output"] == job_fields["standard_error"] == "/dev/null"
    )
    assert (
        job_fields["tasks"] == 3
        and job_fields["tres_per_task"] == "gres/gpu:1"
        and job_fields["hold"] is True
    )
    assert job_fields["memory_per_cpu"] == {"set": True, "infinite": False, "number": 300}
    assert job_fields["requeue"] is True and "nodes" not in job_fields and "memory_per_node" not in job_fields
    assert "hold" not in submit_body(submission(), "external")["job"]


def test_an_update_body_carries_only_what_is_given() -> None:
    assert update_body(hold=False, priority=None, nice=None, time_limit_min=None) == {"hold": False}
    assert update_body(hold=None, priority=0, nice=-5, time_limit_min=30) == {
        "priority": {"set": True, "infinite": False, "number": 0}, "nice": -5,
        "time_limit": {"set": True, "infinite": False, "number": 30},
    }  # fmt: skip
    with pytest.raises(ValueError, match="at least one field"):
        update_body(hold=None, priority=None, nice=None, time_limit_min=None)


def test_the_job_gauges_fingerprint_moves_with_any_gauge() -> None:
    text = (DATA / "slurmctld-26.05.5-metrics-jobs.txt").read_text()
    fingerprint = job_fingerprint(text)
    assert ("slurm_jobs_running", "", 2.0) in fingerprint and job_fingerprint(text) == fingerprint
    moved = text.replace("slurm_jobs_running 2", "slurm_jobs_running 1")
    assert moved != text and job_fingerprint(moved) != fingerprint
    with pytest.raises(SlurmMetricsDecodeError):
        job_fingerprint("# nothing here\nslurm_nodes_idle 3\n")


def job(*state: str, **fields: object) -> SlurmJob:
    return SlurmJob(job_id=1, state=frozenset(state), **fields)  # type: ignore[arg-type]


def test_the_cache_tells_what_changed_in_a_job() -> None:
    before, after = job("PENDING", reason="Priority"), job("RUNNING", nodes=("n1",))
    assert diff_one(1, None, None) is None and diff_one(1, before, before) is None
    assert diff_one(1, None, after) == type(diff_one(1, None, after))(1, "added", None, after)  # type: ignore[misc]
    removed = diff_one(1, before, None)
    assert removed is not None and removed.kind == "removed" and removed.before == before
    changed = diff_one(1, before, after)
    assert (
        changed is not None and changed.kind == "changed" and changed.fields == ("state", "reason", "nodes")
    )


# The decoder's and the bodies' rules one at a time (syncer/slurm/jobs.py).
def _job(**fields: object) -> SlurmJob:
    return decode_job(msgspec.json.encode({"job_id": 7, **fields}))


def _number_of(value: int, *, set_: bool = True, infinite: bool = False) -> dict[str, object]:
    return {"set": set_, "infinite": infinite, "number": value}


def test_every_field_a_job_answer_gives_is_read_into_the_job() -> None:
    job = _job(
        name="pod-web-0", job_state=["running", "COMPLETING"], state_reason="Resources",
        state_description="waiting", admin_comment=MARKER, partition="gpu", account="ml", qos="high",
        user_name="alice", nodes="n[1-2]", flags=["EXTERNAL_JOB"], priority=_number_of(9), hold=True,
        nice=3, requeue=True, restart_cnt=2, submit_time=_number_of(100), start_time=_number_of(200),
        end_time=_number_of(300), preempt_time=_number_of(250), time_limit=_number_of(60),
        job_resources={"nodes": {"allocation": [
            {"name": "n1", "cpus": {"count": 4}, "memory": {"allocated": 1024}},
            {"name": "n2", "cpus": {"count": 2}, "memory": {"allocated": 512}},
        ]}},
        gres_detail=["gpu:1(IDX:0)", "gpu:1(IDX:1)"],
    )  # fmt: skip
    assert job == SlurmJob(
        job_id=7, name="pod-web-0", state=frozenset({"RUNNING", "COMPLETING"}), reason="Resources",
        reason_detail="waiting", marker=MARKER, partition="gpu", account="ml", qos="high", user="alice",
        nodes=("n1", "n2"),
        allocation=(
            NodeAllocation("n1", 4, 1024, "gpu:1(IDX:0)"), NodeAllocation("n2", 2, 512, "gpu:1(IDX:1)")
        ),
        external=True, priority=9, hold=True, nice=3, requeue=True, restart_count=2, submit_time=100,
        start_time=200, end_time=300, preempt_time=250, time_limit_min=60,
    )  # fmt: skip


def test_a_job_that_says_only_its_id_reads_as_empty_fields_and_no_time_limit() -> None:
    assert _job() == SlurmJob(job_id=7, time_limit_min=None)
    assert _job(nice=None).nice == 0  # Slurm's null nice is no nice


def test_a_job_state_given_as_one_word_is_one_state_in_upper_case() -> None:
    assert _job(job_state="pending").state == frozenset({"PENDING"})


def test_the_reason_none_is_no_reason_and_any_other_is_kept() -> None:
    assert _job(state_reason="None").reason == ""
    assert _job(state_reason="Priority").reason == "Priority"


@pytest.mark.parametrize(
    ("limit", "minutes"),
    [(None, None), (30, 30), (_number_of(45), 45), (_number_of(45, set_=False), None),
     (_number_of(45, infinite=True), None), (_number_of(0), 0)],
)  # fmt: skip
def test_a_time_limit_is_minutes_when_set_and_finite_else_no_limit(
    limit: object, minutes: int | None
) -> None:
    assert _job(time_limit=limit).time_limit_min == minutes


def test_no_job_resources_or_no_nodes_in_them_is_no_allocation() -> None:
    assert _job(job_resources=None).allocation == ()
    assert _job(job_resources={}).allocation == ()


def test_gres_is_given_per_node_only_when_slurm_lists_one_per_allocated_node() -> None:
    resources = {"nodes": {"allocation": [{"name": "n1"}, {"name": "n2"}]}}
    uneven = _job(job_resources=resources, gres_detail=["gpu:1(IDX:0)"])
    assert uneven.allocation == (NodeAllocation("n1", 0, 0, ""), NodeAllocation("n2", 0, 0, ""))
    assert _job(job_resources=resources).allocation == (
        NodeAllocation("n1", 0, 0),
        NodeAllocation("n2", 0, 0),
    )


def test_a_job_answer_that_is_no_job_is_a_decode_error_of_the_job_endpoint() -> None:
    with pytest.raises(SlurmDecodeError) as info:
        decode_job(b'{"job_id": "7"}')
    assert (info.value.endpoint, str(info.value)) == (
        "job",
        "job: a job that is not a job (Expected `int`, got `str` - at `$.job_id`)",
    )


def test_a_decode_error_says_at_most_200_characters_of_what_was_wrong() -> None:
    """A hostlist Slurm should never send is quoted whole by the reader: the error keeps 200 characters."""
    with pytest.raises(SlurmDecodeError) as info:
        _job(nodes="n[" + "x" * 300)
    assert str(info.value).startswith("job: a job that is not a job (not a hostlist: 'n[xxx")
    assert len(str(info.value)) == len("job: ") + 200


def test_a_listed_job_whose_marker_cannot_be_read_is_a_decode_error_of_the_list() -> None:
    with pytest.raises(SlurmDecodeError) as info:
        decode_jobs([msgspec.Raw(b'{"admin_comment": 1}')], lambda marker: True)
    assert (info.value.endpoint, str(info.value)) == (
        "jobs_detail",
        "jobs_detail: a job that is not a job (Expected `str`, got `int` - at `$.admin_comment`)",
    )


def test_an_allocation_request_is_the_external_submission_answered_at_once() -> None:
    given = submission(cpus_per_task=2, time_limit_min=5)
    body = allocate_body(given)
    assert body == {"job": {**submit_body(given, "external")["job"], "immediate": True}}


def test_a_submission_without_time_limit_or_priority_asks_for_neither() -> None:
    job = submit_body(submission(), "external")["job"]
    assert "time_limit" not in job and "priority" not in job


def test_an_empty_job_update_is_refused_saying_why() -> None:
    with pytest.raises(ValueError, match=r"^a job update needs at least one field$"):
        update_body(hold=None, priority=None, nice=None, time_limit_min=None)
