"""The exporter's job counts read from slurmctld 26.05.5's GET /metrics/partitions (captured here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.slurm.metrics_hint import SlurmMetricsDecodeError
from syncer.slurm.metrics_jobs import job_counts

DATA = Path(__file__).parent / "data"
IDLE = (DATA / "slurmctld-26.05.5-metrics-partitions.txt").read_text()  # no jobs
JOB = (DATA / "slurmctld-26.05.5-metrics-partitions-job.txt").read_text()  # one job running on sbx-real


def test_a_running_job_is_counted_under_slurmrestds_state_name() -> None:
    # slurm_partition_jobs_running and _started are both 1; only the state slurmrestd also reports counts
    assert job_counts(JOB) == {("main", "RUNNING"): 1}


def test_no_jobs_is_an_empty_count_not_a_missing_one() -> None:
    assert job_counts(IDLE) == {}


def test_a_body_without_job_state_counters_says_so() -> None:
    nodes_only = "\n".join(line for line in JOB.splitlines() if "slurm_partition_jobs" not in line)
    assert job_counts(nodes_only) is None


def test_states_named_as_slurmrestd_names_them_per_partition() -> None:
    text = (
        'slurm_partition_jobs_node_failed{partition="gpu"} 2\n'
        'slurm_partition_jobs_pending{partition="gpu"} 5\n'
        'slurm_partition_jobs_pending{partition="cpu"} 1\n'
        'slurm_partition_jobs_hold{partition="cpu"} 4\n'
        'slurm_partition_jobs_outofmemory{partition="cpu"} 0\n'
    )
    assert job_counts(text) == {("gpu", "NODE_FAIL"): 2, ("gpu", "PENDING"): 5, ("cpu", "PENDING"): 1}


@pytest.mark.parametrize("value", ["1.5", "-1", "1\nslurm_partition_jobs_running{partition= 2"])
def test_garbage_is_a_decode_error(value: str) -> None:
    with pytest.raises(SlurmMetricsDecodeError):
        job_counts(f'slurm_partition_jobs_running{{partition="main"}} {value}\n')
