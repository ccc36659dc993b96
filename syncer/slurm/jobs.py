"""Slurm jobs on the wire (issue 44): the msgspec shapes of `GET /job/{id}`, `GET /jobs/` and
`GET /jobs/state/` holding only the fields the scheduler reads, and the bodies of `POST /job/submit` (for a
`JobSubmission`) and `POST /job/{id}`.

Measured on 26.05.5 and 24.11.5 (docs/slurm-releases.md, "Jobs for pods"): the `EXTERNAL_JOB` flag parses on
REST v0.0.43+ (not on v0.0.42, even on 26.05); a job's pods are named in `admin_comment`, which only Slurm
administrators can set or change; memory must always be asked for (a job without it gets each node's whole
memory); `gres_detail` has one entry per allocated node, in the order of `job_resources`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from syncer.model.jobs import JobSubmission, NodeAllocation, SlurmJob
from syncer.slurm.errors import SlurmDecodeError
from syncer.slurm.hostlist import expand
from syncer.slurm.models import Envelope, MaybeNumber, RawJob, unwrap

# the field that names a job's pods: REST returns it in every job read; only administrators (SlurmUser, root,
# AdminLevel) can set or change it, so a job's owner cannot take it over with `scontrol update` (measured)
MARKER_FIELD = "admin_comment"
Kind = Literal["external", "placeholder"]
# When a placeholder batch job is submitted instead of an external job: never; where the API has no external
# jobs (24.11); always (its hold on a cancel, below, is wanted on 25.05+ too).
Placeholder = Literal["never", "fallback", "always"]
# What a placeholder batch job runs (docs/slurm-releases.md, "Jobs for pods"): it holds the allocation,
# ignores SIGTERM (a cancel or a preemption: Slurm then keeps the CPUs for KillWait, while the pod is deleted,
# before its SIGKILL) and ends at once on SIGUSR1 (`SlurmClient.end_job`, once the pod is gone). Measured on
# 26.05.5 and 24.11.5: cancelled, COMPLETING for KillWait; SIGUSR1, COMPLETED in 0.1 s.
PLACEHOLDER_SCRIPT = """#!/bin/sh
# slurm-syncer: holds this allocation for Kubernetes pods (see the job's AdminComment)
trap 'exit 0' USR1
trap '' TERM
while :; do sleep 3600 & wait $!; done
"""


class RawCpus(msgspec.Struct, gc=False):
    count: int = 0


class RawMemory(msgspec.Struct, gc=False):
    allocated: int = 0


class RawAllocation(msgspec.Struct, gc=False):
    name: str = ""
    cpus: RawCpus = msgspec.field(default_factory=RawCpus)
    memory: RawMemory = msgspec.field(default_factory=RawMemory)


class RawResourceNodes(msgspec.Struct, gc=False):
    allocation: list[RawAllocation] = []


class RawResources(msgspec.Struct, gc=False):
    nodes: RawResourceNodes | None = None


class RawJobDetail(RawJob, gc=False):
    """One job of `GET /job/{id}` or `GET /jobs/` (v0.0.40 .. v0.0.45 alike for these fields): the fields the
    job counts read (RawJob: id, name, state, partition, nodes, user, end time) and the scheduler's."""

    state_reason: str = ""
    state_description: str = ""
    admin_comment: str = ""
    account: str = ""
    qos: str = ""
    job_resources: RawResources | None = None
    gres_detail: list[str] = []
    flags: list[str] = []
    batch_flag: bool = False
    priority: MaybeNumber = None
    hold: bool = False
    nice: int | None = None
    requeue: bool = False
    restart_cnt: int = 0
    submit_time: MaybeNumber = None
    start_time: MaybeNumber = None
    preempt_time: MaybeNumber = None
    time_limit: MaybeNumber = None

    def to_job(self) -> SlurmJob:
        states = [self.job_state] if isinstance(self.job_state, str) else self.job_state
        return SlurmJob(
            job_id=self.job_id, name=self.name, state=frozenset(s.upper() for s in states),
            reason="" if self.state_reason == "None" else self.state_reason,
            reason_detail=self.state_description, marker=self.admin_comment, partition=self.partition,
            account=self.account, qos=self.qos, user=self.user_name,
            nodes=tuple(expand(self.nodes)) if self.nodes else (), allocation=self._allocation(),
            external="EXTERNAL_JOB" in self.flags, priority=unwrap(self.priority), hold=self.hold,
            nice=self.nice or 0, requeue=self.requeue, restart_count=self.restart_cnt,
            submit_time=unwrap(self.submit_time), start_time=unwrap(self.start_time),
            end_time=unwrap(self.end_time), preempt_time=unwrap(self.preempt_time),
            time_limit_min=_limit(self.time_limit),
        )  # fmt: skip

    def _allocation(self) -> tuple[NodeAllocation, ...]:
        nodes = self.job_resources.nodes if self.job_resources is not None else None
        if nodes is None:
            return ()
        gres = self.gres_detail if len(self.gres_detail) == len(nodes.allocation) else []
        return tuple(
            NodeAllocation(a.name, a.cpus.count, a.memory.allocated, gres[i] if gres else "")
            for i, a in enumerate(nodes.allocation)
        )


def _limit(value: MaybeNumber) -> int | None:
    """Minutes, None for no limit (infinite or unset)."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    return value.number if value.set and not value.infinite else None


class JobDetailsResponse(Envelope):
    """`GET /jobs/` and `GET /job/{id}`: each job kept raw and decoded only if it is one of ours."""

    jobs: list[msgspec.Raw] = []
    last_update: MaybeNumber = None


class RawJobState(msgspec.Struct, gc=False):
    job_id: int | str = 0
    state: list[str] | str = []


class JobStatesResponse(Envelope):
    jobs: list[RawJobState] = []


class RawSignalError(msgspec.Struct, gc=False):
    code: int = 0
    string: str = ""


class RawSignalStatus(msgspec.Struct, gc=False):
    error: RawSignalError = msgspec.field(default_factory=RawSignalError)


class CancelResponse(Envelope):
    """`DELETE /job/{id}` answers HTTP 200 even when nothing was done: each job's outcome is in `status`
    (26.05.5: 2017 "Invalid job id specified", 2021 "Job/step already completing or completed")."""

    status: list[RawSignalStatus] = []


class SubmitResponse(Envelope):
    """`POST /job/submit` and `POST /job/allocate` alike (`job_id`, `job_submit_user_msg`)."""

    job_id: int = 0
    job_submit_user_msg: str = ""


class RawMarker(msgspec.Struct, gc=False):
    """Only the marker of a listed job: a job that is not ours is decoded no further."""

    admin_comment: str = ""


JOB_DECODER = msgspec.json.Decoder(RawJobDetail)
MARKER_DECODER = msgspec.json.Decoder(RawMarker)
# ids per `GET /jobs/state/` (each `job_id=<id>&` is ~15 bytes of URL)
STATE_CHUNK = 100
# what slurmctld answers a cancel of a job it no longer runs: 2017 (no such job), 2021 (already ended)
JOB_GONE_CODES = frozenset({2017, 2021})
# jobs decoded between two turns of the event loop (as node lists are: client.DECODE_CHUNK)
DECODE_CHUNK = 500


@dataclass(frozen=True)
class JobListing:
    """A job list: the jobs kept (all, or those whose marker was accepted) and what the list cost."""

    jobs: tuple[SlurmJob, ...]
    total: int  # jobs in the answer, kept or not
    last_update: int  # pass back as `update_time` to ask "changed since?"
    body_bytes: int
    seconds: float
    started: float = 0.0  # time.monotonic() when the answering request was sent


def decode_job(raw: msgspec.Raw | bytes) -> SlurmJob:
    try:
        return JOB_DECODER.decode(raw).to_job()
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as exc:
        raise SlurmDecodeError(f"a job that is not a job ({exc})"[:200], endpoint="job") from exc


def decode_jobs(raw: Sequence[msgspec.Raw], keep: Callable[[str], bool] | None) -> list[SlurmJob]:
    """The jobs of a list whose marker `keep` accepts (all without `keep`)."""
    if keep is None:
        return [decode_job(item) for item in raw]
    try:
        wanted = [item for item in raw if keep(MARKER_DECODER.decode(item).admin_comment)]
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise SlurmDecodeError(f"a job that is not a job ({exc})"[:200], endpoint="jobs_detail") from exc
    return [decode_job(item) for item in wanted]


# pragma: no mutate start (the one coroutine here: scripts/mutation measures the pure functions of this file)
async def jobs_in_turns(
    raw: Sequence[msgspec.Raw], keep: Callable[[str], bool] | None
) -> tuple[SlurmJob, ...]:
    """`decode_jobs`, a chunk at a time, letting the event loop run in between (a 10,000-job list)."""
    jobs: list[SlurmJob] = []
    for start in range(0, len(raw), DECODE_CHUNK):
        if start:
            await asyncio.sleep(0)
        jobs.extend(decode_jobs(raw[start : start + DECODE_CHUNK], keep))
    return tuple(jobs)


# pragma: no mutate end
def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def allocate_body(submission: JobSubmission) -> dict[str, Any]:
    """The `POST /job/allocate` body: an external job, `immediate` (started now or refused at once; without
    it slurmrestd holds the request until the job starts, measured 60 s+ with no answer)."""
    body = submit_body(submission, "external")
    body["job"]["immediate"] = True
    return body


def submit_body(submission: JobSubmission, kind: Kind) -> dict[str, Any]:
    """The `POST /job/submit` body: an external job (no script) or a placeholder batch job."""
    s = submission
    job: dict[str, Any] = {
        "name": s.name, MARKER_FIELD: s.marker, "cpus_per_task": s.cpus_per_task,
        "current_working_directory": "/tmp", "environment": ["PATH=/usr/bin:/bin"], "requeue": s.requeue,
    }  # fmt: skip
    if kind == "external":
        job["flags"] = ["EXTERNAL_JOB"]
    else:
        job["standard_output"] = job["standard_error"] = "/dev/null"
    optional: dict[str, Any] = {
        "tasks": s.tasks, "tasks_per_node": s.tasks_per_node, "nice": s.nice,
        "nodes": str(s.nodes) if s.nodes is not None else None,
        "memory_per_node": _number(s.memory_per_node_mb) if s.memory_per_node_mb is not None else None,
        "memory_per_cpu": _number(s.memory_per_cpu_mb) if s.memory_per_cpu_mb is not None else None,
        "time_limit": _number(s.time_limit_min) if s.time_limit_min is not None else None,
        "priority": _number(s.priority) if s.priority is not None else None,
        "tres_per_node": s.tres_per_node or None, "tres_per_task": s.tres_per_task or None,
        "partition": s.partition or None, "account": s.account or None, "qos": s.qos or None,
        "reservation": s.reservation or None, "constraints": s.constraints or None,
        "required_nodes": list(s.required_nodes) or None, "excluded_nodes": list(s.excluded_nodes) or None,
        "hold": True if s.hold else None,
    }  # fmt: skip
    job.update((key, value) for key, value in optional.items() if value is not None)
    body: dict[str, Any] = {"job": job}
    if kind == "placeholder":
        body["script"] = PLACEHOLDER_SCRIPT
    return body


def update_body(
    *, hold: bool | None, priority: int | None, nice: int | None, time_limit_min: int | None
) -> dict[str, Any]:
    """The `POST /job/{id}` body (the fields at the top level, v0.0.40 .. v0.0.45)."""
    body: dict[str, Any] = {}
    if hold is not None:
        body["hold"] = hold
    if priority is not None:
        body["priority"] = _number(priority)
    if nice is not None:
        body["nice"] = nice
    if time_limit_min is not None:
        body["time_limit"] = _number(time_limit_min)
    if not body:
        raise ValueError("a job update needs at least one field")
    return body
