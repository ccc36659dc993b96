"""What polling without slurmctld's metrics hint costs, as `check` predicts it (issue 30)."""

from __future__ import annotations

import pytest

from syncer.slurm.cache import busiest_lists_per_minute


@pytest.mark.parametrize(
    ("list_s", "poll_s", "lists"),
    [
        (0.05, 1.0, 60.0),  # 1,000 nodes: a list every poll
        (1.2, 1.0, 12.5),  # 10,000 nodes: the duty limit (0.25) spaces them 4.8 s apart
        (0.05, 5.0, 12.0),  # a slower poll: one list per poll
    ],
)
def test_lists_a_minute_on_a_busy_cluster(list_s: float, poll_s: float, lists: float) -> None:
    assert busiest_lists_per_minute(list_s, poll_s) == pytest.approx(lists)
