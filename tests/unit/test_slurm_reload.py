"""slurmctld's start marker: read from its metrics page or slurmrestd's /diag, and when it tells a reload
(sequences as measured on 24.11 and 26.05: a new slurmctld reads 0, then its start time; two reconfigures
0.6 s apart read 0, 0, then the second one's start)."""

from __future__ import annotations

import pytest

from syncer.slurm.errors import SlurmDecodeError
from syncer.slurm.metrics_hint import SlurmMetricsDecodeError
from syncer.slurm.metrics_scheduler import PATH as SCHEDULER_PATH
from syncer.slurm.reload import (
    SETTLE_S,
    ReloadWatch,
    started_from_diag,
    started_from_metrics,
    stats_reads_from_diag,
)

SCHEDULER_PAGE = """\
# HELP slurm_sdiag_job_states_ts Job states timestamp
# TYPE slurm_sdiag_job_states_ts gauge
slurm_sdiag_job_states_ts 1795652314
# HELP slurm_last_proc_req_start Timestamp of last process request start
# TYPE slurm_last_proc_req_start gauge
slurm_last_proc_req_start 1795652317
# HELP slurm_sched_stats_timestamp Statistics snapshot timestamp
# TYPE slurm_sched_stats_timestamp gauge
slurm_sched_stats_timestamp 1795652322
"""


def test_the_marker_is_read_from_the_scheduler_page() -> None:
    assert started_from_metrics(SCHEDULER_PAGE) == 1795652317
    assert started_from_metrics(SCHEDULER_PAGE.replace(" 1795652317", " 0")) == 0


@pytest.mark.parametrize("page", ["", "slurm_sched_stats_timestamp 1\n", "slurm_last_proc_req_start -4\n"])
def test_a_page_without_a_marker_is_an_error_naming_it(page: str) -> None:
    with pytest.raises(SlurmMetricsDecodeError, match="slurm_last_proc_req_start"):
        started_from_metrics(page)


def test_the_marker_is_read_from_diag_in_either_shape() -> None:
    assert started_from_diag({"req_time_start": {"set": True, "infinite": False, "number": 1795652317}}) == (
        1795652317
    )
    assert started_from_diag({"req_time_start": 1795652317}) == 1795652317
    assert started_from_diag({"req_time_start": {"set": False, "number": 5}}) == 0


@pytest.mark.parametrize("value", [None, "soon", True, -1])
def test_diag_without_a_marker_is_an_error_naming_it(value: object) -> None:
    with pytest.raises(SlurmDecodeError, match="req_time_start"):
        started_from_diag({"req_time_start": value} if value is not None else {})


@pytest.mark.parametrize(
    ("markers", "told"),
    [
        ([5, 5, 0, 7, 7], [False, False, True, True, False]),  # a reload read in its 0 window: 0 and start
        ([5, 7, 7], [False, True, False]),  # the 0 window missed: the new start tells
        ([5, 0, 0, 7], [False, True, False, True]),  # two reloads 0.6 s apart: the start after both tells
        ([0, 5, 5, 7], [False, True, False, True]),  # first read as slurmctld started: 5 may be a later one
        ([0, 0, 5], [False, False, True]),
    ],
)
def test_a_new_slurmctld_is_told_at_its_0_and_at_its_start(markers: list[int], told: list[bool]) -> None:
    watch = ReloadWatch(None, None)  # type: ignore[arg-type]  # moved() reads nothing
    assert [watch.moved(marker) for marker in markers] == told


@pytest.mark.parametrize(
    ("before_list", "after_list", "told"),
    [
        # a syncer started just after a reconfigure: its reads until the first list only record, and the
        # list waits for the start, so the start read after it is no reload (it was one more node list)
        ([0, 0, 5], [5, 5, 7], [False, False, True]),
        ([5], [5, 0, 7], [False, True, True]),
        # the wait ran out on 0: a start after the list may be a later slurmctld's, and tells
        ([0], [5, 5], [True, False]),
    ],
)
def test_reads_before_the_first_list_only_record(
    before_list: list[int], after_list: list[int], told: list[bool]
) -> None:
    watch = ReloadWatch(None, None)  # type: ignore[arg-type]  # moved() reads nothing
    assert not any(watch.moved(marker, listed=False) for marker in before_list)
    assert [watch.moved(marker) for marker in after_list] == told


@pytest.mark.parametrize(
    ("reads", "told"),
    [
        # one slurmctld: it counted each read before (and another client's sdiag): no reload
        ([(5, 3), (5, 4), (5, 9)], [False, False, False]),
        # a reconfigure in the second the last one started: the same marker, the count started again
        ([(5, 3), (5, 0), (5, 1)], [False, True, False]),
        ([(5, 3), (5, 3)], [False, True]),
        # a read without the count (the metrics page) compares markers only, as before
        ([(5, 3), (5, None), (5, 0)], [False, False, False]),
        ([(5, 3), (7, 0)], [False, True]),
    ],
)
def test_a_slurmctld_started_in_the_same_second_is_told_by_its_statistics_count(
    reads: list[tuple[int, int | None]], told: list[bool]
) -> None:
    watch = ReloadWatch(None, None)  # type: ignore[arg-type]  # moved() reads nothing
    assert [watch.moved(marker, stats_reads=count) for marker, count in reads] == told


def test_the_statistics_count_is_read_from_diag() -> None:
    rpcs = [
        {"message_type": "REQUEST_PING", "count": 1},
        {"type_id": 2035, "message_type": "REQUEST_STATS_INFO", "count": 7, "queued": 0},
    ]
    assert stats_reads_from_diag({"rpcs_by_message_type": rpcs}) == 7
    assert stats_reads_from_diag({"rpcs_by_message_type": rpcs[:1]}) == 0, "a new slurmctld lists none yet"
    assert stats_reads_from_diag({}) is None
    assert stats_reads_from_diag({"rpcs_by_message_type": [{"message_type": "REQUEST_STATS_INFO"}]}) is None


class Pages:
    """The scheduler page and /diag as each read finds them: (start, slurmctld's clock[, count])."""

    def __init__(self, metrics: list[tuple[int, int]], diag: list[tuple[int, int, int]]) -> None:
        self.metrics, self.diag = metrics, diag
        self.read: list[str] = []

    async def read_page(self, path: str) -> str:
        assert path == SCHEDULER_PATH
        self.read.append("metrics")
        start, now = self.metrics.pop(0)
        return f"slurm_last_proc_req_start {start}\nslurm_sched_stats_timestamp {now}\n"

    async def diag_sized(self) -> tuple[dict[str, object], int]:
        self.read.append("diag")
        start, now, count = self.diag.pop(0)
        rpcs = [{"message_type": "REQUEST_STATS_INFO", "count": count}] if count else []
        return {"req_time_start": start, "req_time": {"number": now}, "rpcs_by_message_type": rpcs}, 4000


async def test_a_start_read_in_its_own_second_is_read_again_from_diag_with_the_count() -> None:
    """With the hint, the marker comes from the metrics page, which has no count: a start read in the
    second it names is read from /diag until slurmctld's clock has left that second, so a reconfigure later
    in that second (the same start) is told by the count."""
    pages = Pages(metrics=[(5, 5), (5, 7)], diag=[(5, 5, 2), (5, 5, 0), (5, 6, 1)])
    watch = ReloadWatch(pages, pages)  # type: ignore[arg-type]
    told = []
    for _ in range(4):
        marker, _, count = await watch.read(metrics=True)
        told.append(watch.moved(marker, stats_reads=count))
    assert told == [False, True, False, False]
    assert pages.read == ["metrics", "diag", "diag", "diag", "metrics"]


def test_the_first_list_waits_while_the_marker_reads_0_and_no_longer_than_settle_s() -> None:
    watch = ReloadWatch(None, None)  # type: ignore[arg-type]
    assert watch.settling(0.0)  # not read yet (the metrics are read beside the polls)
    watch.moved(0, listed=False)
    assert watch.settling(0.0) and watch.settling(SETTLE_S - 0.01)
    assert not watch.settling(SETTLE_S)
    watch.moved(5, listed=False)
    assert not watch.settling(0.0)
