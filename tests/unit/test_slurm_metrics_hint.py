"""The metrics hint's parser on text captured from slurmctld 26.05.5's GET /metrics/partitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.slurm.metrics_hint import SlurmMetricsDecodeError, parse_fingerprint

DATA = Path(__file__).parent / "data"
IDLE = (DATA / "slurmctld-26.05.5-metrics-partitions.txt").read_text()  # 1,000 CLOUD nodes + sbx-real
JOB = (DATA / "slurmctld-26.05.5-metrics-partitions-job.txt").read_text()  # a job on sbx-real
JOB_DRAIN = (DATA / "slurmctld-26.05.5-metrics-partitions-job-drain.txt").read_text()  # + node00005 drained


def counts(text: str) -> dict[tuple[str, str], int]:
    return {(p, s): n for p, s, n in parse_fingerprint(text)}


def test_reads_the_node_state_counts_per_partition() -> None:
    idle = counts(IDLE)
    assert idle[("main", "total")] == 1001
    assert idle[("main", "cloud")] == 1000
    assert idle[("main", "powered_down")] == 1000
    for state in ("drain", "drained", "draining", "down", "fail", "no_resp", "maint"):
        assert idle[("main", state)] == 0


def test_job_driven_counts_are_left_out() -> None:
    # a job moved alloc/mixed/idle, CPUs and memory: the fingerprint must not move with it
    assert JOB != IDLE
    assert parse_fingerprint(JOB) == parse_fingerprint(IDLE)
    states = {s for _, s, _ in parse_fingerprint(IDLE)}
    assert not states & {"alloc", "mixed", "idle", "cg", "planned", "cpus_alloc", "mem_free"}


def test_a_drain_moves_the_fingerprint() -> None:
    drained = counts(JOB_DRAIN)
    assert (drained[("main", "drain")], drained[("main", "drained")]) == (1, 1)
    assert parse_fingerprint(JOB_DRAIN) != parse_fingerprint(JOB)


def test_partitions_are_told_apart_and_order_does_not_matter() -> None:
    text = (
        'slurm_partition_nodes{partition="b"} 2\nslurm_partition_nodes_drain{partition="b"} 1\n'
        'slurm_partition_nodes{partition="a"} 3\nslurm_partition_nodes_drain{partition="a"} 0\n'
    )
    swapped = "\n".join(reversed(text.splitlines()))
    assert parse_fingerprint(text) == parse_fingerprint(swapped)
    assert parse_fingerprint(text) == (
        ("a", "drain", 0),
        ("a", "total", 3),
        ("b", "drain", 1),
        ("b", "total", 2),
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<html>502 Bad Gateway</html>",
        "# HELP only comments\n",
        'slurm_partition_nodes_drain{partition="main"} 1\n',  # no node total: not this endpoint's answer
        'slurm_partition_nodes{partition="main"} many\n',
        'slurm_partition_nodes{partition="main"} 1.5\n',
        'slurm_partition_nodes{partition="main"} -1\n',
        'slurm_partition_nodes{partition="main" 7\n',
        IDLE[: IDLE.index("slurm_partition_nodes{")],  # cut before the total
    ],
)
def test_garbage_is_a_typed_error(text: str) -> None:
    with pytest.raises(SlurmMetricsDecodeError):
        parse_fingerprint(text)


def test_other_metrics_are_ignored() -> None:
    text = 'slurm_partition_jobs{partition="main"} 5\nslurm_partition_nodes{partition="main"} 4\nfoo 1\n'
    assert parse_fingerprint(text) == (("main", "total", 4),)


def test_counts_with_more_labels_than_the_partition_are_read_and_kept_apart() -> None:
    # the exposition format allows any labels; a newer slurmctld may add one (a cluster name, say)
    text = (
        "# TYPE slurm_partition_nodes gauge\n"
        'slurm_partition_nodes{cluster="c1",partition="main"} 4\n'
        'slurm_partition_nodes{partition="main",cluster="c2"} 2\n'
        'slurm_partition_nodes_drain{partition="main",cluster="c1"} 1\n'
    )
    assert parse_fingerprint(text) == (
        ("main{cluster=c1}", "drain", 1),
        ("main{cluster=c1}", "total", 4),
        ("main{cluster=c2}", "total", 2),
    )


def test_auto_follows_the_primary_controller_that_answers() -> None:
    from syncer.slurm.metrics_locate import primary_host
    from syncer.slurm.models import PingEntry

    # v0.0.43+: `primary`; v0.0.42: `mode` and `pinged`
    assert (
        primary_host(
            [
                PingEntry("ctld-a", responding=True, primary=True),
                PingEntry("ctld-b", responding=True, primary=False),
            ]
        )
        == "ctld-a"
    )
    # failed over: the old primary no longer answers, the backup took over
    assert (
        primary_host(
            [
                PingEntry("ctld-a", responding=False, primary=False),
                PingEntry("ctld-b", responding=True, primary=True),
            ]
        )
        == "ctld-b"
    )
    assert (
        primary_host(
            [
                PingEntry("ctld-a", pinged="DOWN", mode="primary"),
                PingEntry("ctld-b", pinged="UP", mode="backup"),
            ]
        )
        == "ctld-b"
    )
    assert primary_host([PingEntry("ctld-a", pinged="UP", mode="primary")]) == "ctld-a"
    assert primary_host([PingEntry("ctld-a", responding=False)]) is None
    assert primary_host([]) is None
