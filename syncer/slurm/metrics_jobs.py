"""Job counts by partition and state from slurmctld's `/metrics/partitions`: the body the node cache's hint
already reads every poll, so the exporter need not list every job from slurmrestd each
`--jobs-poll-interval` (its GET /jobs was 0.41 MB a minute at 1,000 nodes with a job every 2 s, which put
the idle cost 7 % above a 30 s node poller's). States are named as slurmrestd names them (`RUNNING`,
`NODE_FAIL`, ...) so `slurm_jobs{state}` keeps its labels whichever source counted; slurmctld's counters
without a slurmrestd state (`hold`, `started`, `finished`, node and resource gauges) are left out.

    counts = job_counts(text)   # {(partition, "RUNNING"): 3, ...}, or None: no job counts in the body
"""

from __future__ import annotations

from syncer.slurm.metrics_hint import PATH, SlurmMetricsDecodeError, count_of, partition_label, samples

PREFIX = "slurm_partition_jobs_"
# slurmctld's counter suffix -> the job state (or state flag) slurmrestd reports
STATES = {
    "bootfail": "BOOT_FAIL",
    "cancelled": "CANCELLED",
    "completed": "COMPLETED",
    "completing": "COMPLETING",
    "configuring": "CONFIGURING",
    "deadline": "DEADLINE",
    "expediting": "EXPEDITING",
    "failed": "FAILED",
    "fed_requeued": "REQUEUE_FED",
    "node_failed": "NODE_FAIL",
    "outofmemory": "OUT_OF_MEMORY",
    "pending": "PENDING",
    "powerup_node": "POWER_UP_NODE",
    "preempted": "PREEMPTED",
    "requeued": "REQUEUED",
    "resizing": "RESIZING",
    "revoked": "REVOKED",
    "running": "RUNNING",
    "signaling": "SIGNALING",
    "stageout": "STAGE_OUT",
    "suspended": "SUSPENDED",
    "timeout": "TIMEOUT",
}


def job_counts(text: str) -> dict[tuple[str, str], int] | None:
    """Non-zero job counts per (partition, state) in a `/metrics/partitions` body; None when it carries no
    job state counters (a slurmctld that does not export them); SlurmMetricsDecodeError when unreadable."""
    counts: dict[tuple[str, str], int] = {}
    seen = False
    for sample in samples(text, lambda line: line.startswith(PREFIX), what="job counts", endpoint=PATH):
        state = STATES.get(sample.name.removeprefix(PREFIX))
        if state is None:
            continue
        seen = True
        if count := count_of(sample, "job count", PATH):
            key = (partition_label(sample.labels), state)
            counts[key] = counts.get(key, 0) + count
    return counts if seen else None


JOBS_PATH = "/metrics/jobs"
JOBS_PREFIX = "slurm_jobs"
# (metric, labels, value), sorted: every job gauge of slurmctld's `/metrics/jobs` (counts per state, held,
# started, allocated CPUs/memory/nodes)
JobFingerprint = tuple[tuple[str, str, float], ...]


def job_fingerprint(text: str) -> JobFingerprint:
    """What `/metrics/jobs` (3.5 KB, 26.05.5) says of the jobs slurmctld holds: moved by every submit, start,
    end, hold and release, not by a preemption's grace window (measured, docs/slurm-releases.md "Jobs for
    pods"); SlurmMetricsDecodeError when the page has no job gauges."""
    found = samples(text, lambda line: line.startswith(JOBS_PREFIX), what="job gauges", endpoint=JOBS_PATH)
    fingerprint = tuple(
        sorted(
            (s.name, partition_label(s.labels), float(s.value))
            for s in found
            if s.name.startswith(JOBS_PREFIX)
        )
    )
    if not fingerprint:
        raise SlurmMetricsDecodeError(f"no {JOBS_PREFIX}* gauges in the answer", endpoint=JOBS_PATH)
    return fingerprint
