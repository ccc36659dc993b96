"""Scheduler statistics from slurmctld's `/metrics/scheduler` (Slurm 25.11+), shaped as slurmrestd's
`GET /diag` statistics, so the exporter's `slurm_scheduler_*` gauges need no slurmrestd request where
slurmctld serves its metrics. Units are slurmrestd's too (cycle times in microseconds).

    stats = scheduler_stats(text)   # {"server_thread_count": 3, "bf_cycle_last": 214612, ...}
"""

from __future__ import annotations

from syncer.slurm.metrics_hint import SlurmMetricsDecodeError, samples

PATH = "/metrics/scheduler"
# slurmctld's metric -> the /diag statistic of the same figure (what the exporter's gauges read)
DIAG_NAMES = {
    "slurm_server_thread_cnt": "server_thread_count",
    "slurm_agent_queue_size": "agent_queue_size",
    "slurm_slurmdbd_queue_size": "dbd_agent_queue_size",
    "slurm_schedule_cycle_last": "schedule_cycle_last",
    "slurm_sched_mean_cycle": "schedule_cycle_mean",
    "slurm_schedule_queue_len": "schedule_queue_length",
    "slurm_bf_cycle_last": "bf_cycle_last",
    "slurm_bf_queue_len": "bf_queue_len",
    "slurm_sdiag_jobs_pending": "jobs_pending",
    "slurm_sdiag_jobs_running": "jobs_running",
}


def scheduler_stats(text: str) -> dict[str, object]:
    """The statistics of DIAG_NAMES found in a `/metrics/scheduler` body; SlurmMetricsDecodeError when
    it is unreadable or has none of them (not slurmctld's scheduler page)."""
    stats: dict[str, object] = {}
    wanted = samples(
        text, lambda line: line.split(" ", 1)[0] in DIAG_NAMES, what="scheduler statistics", endpoint=PATH
    )
    for sample in wanted:
        name = DIAG_NAMES.get(sample.name)
        if name is not None:
            value = sample.value
            stats[name] = int(value) if float(value).is_integer() else value
    if not stats:
        raise SlurmMetricsDecodeError("no scheduler statistics in the answer", endpoint=PATH)
    return stats
