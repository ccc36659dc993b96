"""The exporter's scheduler statistics read from slurmctld 26.05.5's GET /metrics/scheduler (captured here
from a 10,000-node sandbox with one job running)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.app.metrics import DIAG_FIELDS
from syncer.slurm.metrics_hint import SlurmMetricsDecodeError
from syncer.slurm.metrics_scheduler import scheduler_stats

SCHEDULER = (Path(__file__).parent / "data" / "slurmctld-26.05.5-metrics-scheduler.txt").read_text()


def test_every_exported_diag_statistic_is_read_under_its_diag_name() -> None:
    stats = scheduler_stats(SCHEDULER)
    assert set(stats) == set(DIAG_FIELDS)
    # cycle times in microseconds, as /diag gives them
    assert (stats["bf_cycle_last"], stats["schedule_cycle_last"], stats["schedule_cycle_mean"]) == (
        214612, 46539, 39196,
    )  # fmt: skip
    assert (stats["jobs_running"], stats["jobs_pending"]) == (1, 3)


@pytest.mark.parametrize(
    "text", ["", 'slurm_partition_nodes{partition="main"} 3\n', "slurm_bf_cycle_last{ 3\n"]
)
def test_a_page_without_scheduler_statistics_is_a_decode_error(text: str) -> None:
    with pytest.raises(SlurmMetricsDecodeError):
        scheduler_stats(text)
