"""benchmarks/defaults.py: a storm the harness could not run is said, the rounds' figures kept; the outage
scenario's judge of Slurm writes."""

from __future__ import annotations

from benchmarks.defaults import Timeline, endpoint, summary

LATENCY = {"n": 1000, "p50": 0.03, "p95": 0.05, "p99": 0.07, "max": 0.1, "not_shown": 0}


def test_a_skipped_storm_is_said_and_the_rest_still_summarised() -> None:
    results = {
        "nodes": 1000, "slurm_release": "24.11.5", "api_version": "v0.0.42", "job_churn_s": 2.0,
        "date": "2026-11-25", "poller_30s_bytes_per_minute": 4.6e6, "idle_bytes_ratio": 24.0,
        "check_predicted_ratio": 25.4, "jobs_poll_bytes_per_minute": 0.0,
        "idle_per_minute": {"slurm_bytes": 1.1e8, "full_fetches": 48.0},
        "exporter_reads_while_idle": {"jobs:slurmrestd": 9.0, "scheduler:slurmrestd": 2.0},
        "latency_s": {"k8s_to_slurm": LATENCY, "slurm_to_k8s": LATENCY},
        "storms": {"skipped": "only 0 of 1000 nodes are undrained without a reason"},
        "rss_mb": {"steady": 62.0, "peak": 67.0}, "check_hint_line": "WARN ...", "machine_reference_s": 0.5,
    }  # fmt: skip
    text = summary(results)
    assert "| storms | skipped: only 0 of 1000 nodes are undrained without a reason | |" in text
    assert "p99 0.070 s" in text and "**24.00 x**" in text


def test_outage_writes_are_judged_by_the_cordons_and_admin_drains_at_their_arrival() -> None:
    """A drain needs a cordon holding when it arrives; an undrain needs none and no admin drain."""
    timeline = Timeline()
    timeline.changes = {"a": [(1.0, True), (2.0, False), (3.0, True)], "b": [(1.0, True)]}
    timeline.admin_drained = {"b": 5.0}
    drain, undrain = b'{"state":["DRAIN"],"reason":"k8s"}', b'{"state":["UNDRAIN"]}'
    writes = [
        (1.5, "POST", "/slurm/v0.0.45/node/a", drain),  # cordoned: right
        (2.5, "POST", "/slurm/v0.0.45/node/a", drain),  # uncordoned at 2.0: wrong
        (2.6, "POST", "/slurm/v0.0.45/node/a", undrain),  # right
        (3.5, "POST", "/slurm/v0.0.45/node/a", undrain),  # cordoned again at 3.0: wrong
        (6.0, "POST", "/slurm/v0.0.45/node/b", undrain),  # cordoned and an admin's: wrong
        (7.0, "GET", "/slurm/v0.0.45/node/b", b""),  # a read: not judged
    ]
    actions, wrong = timeline.wrong(writes)
    assert actions == 5
    assert wrong == ["drained a, not cordoned", "undrained a while cordoned", "undrained b while cordoned"]
    assert endpoint("GET", "/slurm/v0.0.45/node/node00042?x=1") == "GET /slurm/node/{name}"
    assert endpoint("POST", "/slurm/v0.0.45/nodes/") == "POST /slurm/nodes"
