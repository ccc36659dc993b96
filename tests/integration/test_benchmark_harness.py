"""The benchmark harness in its quick form (100 nodes, a few changes), so it never rots. The figures
are printed and kept, not asserted: speed targets live in benchmarks/RESULTS.md. What is asserted is
that every figure says how it was observed: its sample count, no percentile from too few samples, idle
cost counted at the wire, storms labelled by their settings, RSS as steady and peak."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run import cell, percentiles, tail_text

# the harness is release-agnostic and takes minutes: scripts/test runs it on 26.05 only
pytestmark = [pytest.mark.slurm, pytest.mark.kube, pytest.mark.one_release]
ROOT = Path(__file__).resolve().parents[2]


def test_percentiles_need_enough_samples() -> None:
    few = percentiles([float(i) for i in range(1, 51)])
    assert few["n"] == 50 and few["max"] == 50.0 and few["p95"] is None and few["p99"] is None
    assert tail_text(few) == "max of 50 50.000 s"
    many = percentiles([float(i) for i in range(1, 1001)])
    assert many["p99"] == 990.0 and many["p95"] == 950.0 and many["p50"] == 501.0
    assert tail_text(many) == "p99 990.000 s (n=1000)"
    assert tail_text(percentiles([1.0] * 100)) == "p95 1.000 s (n=100)"
    assert percentiles([])["n"] == 0
    # a change never shown is a sample past every other, counted apart, never dropped
    missed = percentiles([0.1] * 99 + [math.inf])
    assert missed["n"] == 100 and missed["not_shown"] == 1 and missed["max"] == math.inf
    assert cell(missed) == "p50 0.100 s, p95 0.100 s (n=100); 1 not shown within the deadline"


def test_quick_benchmark_writes_results_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["nodes"] == 100 and results["api_version"].startswith("v0.0.")
    for key, mode in (
        ("latency_s", "syncer"),
        ("baseline_latency_s", "baseline"),
        ("equal_cost_latency_s", "equal"),
    ):
        for direction in ("k8s_to_slurm", "annotation_to_slurm", "slurm_to_k8s"):
            figures = results[key][direction]
            # every sample is kept; 5 samples give a median and a maximum, never a p95 or p99
            assert figures["n"] == 5 == len(results["samples"][mode][direction])
            assert 0 < figures["p50"] <= figures["max"] and figures["p99"] is None and figures["p95"] is None
            assert figures["not_shown"] == 0
    # each syncer round is kept apart with the lists read meanwhile: a slow round is told from a slow run
    (only,) = results["rounds"]
    assert only["round"] == 1 and only["lists"] + only["probes"] >= 1 and only["seconds"] > 0
    assert only["slurm_to_k8s_max"] == results["latency_s"]["slurm_to_k8s"]["max"]
    assert only["nodes_request_s"] > 0 and only["fresh_reads_s"] > 0
    assert "syncer: round 1/1: Slurm -> Kubernetes max" in result.stderr
    # the Slinky-like baseline: cordons and Slurm drains (it has no drain annotation), each measured
    slinky = results["slinky_latency_s"]
    assert (
        slinky["k8s_to_slurm"]["n"] == 5 == slinky["slurm_to_k8s"]["n"]
        and "annotation_to_slurm" not in slinky
    )
    # both baselines see Slurm-side changes at their next 30 s cycle, met at a random phase (so their
    # latency may by chance be short: no ordering against ours is asserted), and list everything to do it
    for key in ("slinky_latency_s", "baseline_latency_s"):
        assert results[key]["slurm_to_k8s"]["max"] < 31.0 + 5.0, results[key]
    assert results["slinky_idle_per_minute"]["full_fetches"] >= 1
    assert results["phases_per_baseline"] == 1
    # the full poller at the syncer's bytes per minute: its interval follows from the two idle windows
    one_list = (
        results["baseline_idle_per_minute"]["slurm_bytes"]
        / results["baseline_idle_per_minute"]["full_fetches"]
    )
    interval = results["equal_cost_interval_s"]
    assert interval == pytest.approx(
        max(60 * one_list / results["idle_per_minute"]["slurm_bytes"], 1.0), abs=0.06
    )
    # real jobs ran through the run; every read path of the syncer is counted
    assert results["job_churn"]["submitted"] >= 10 and results["job_churn"]["refused"] == 0
    scheduler = results["slurmctld_scheduler"]  # slurmctld's own figures of the load the jobs made
    assert (
        scheduler["jobs_submitted"] >= 1 and scheduler["main_total_cycles"] >= 1
    )  # sdiag resets at midnight
    reads = results["slurm_reads"]
    assert reads["list_reads"] >= 1 and reads["list_bytes"] > 0 and reads["probe_reads"] >= 1
    # a restart over objects in agreement writes nothing to Kubernetes
    restart = results["restart"]
    assert 0 < restart["ready_s"] <= restart["caught_up_s"] and restart["kube_writes"] == 0, restart
    for key in (
        "idle_per_minute",
        "slinky_idle_per_minute",
        "baseline_idle_per_minute",
        "equal_cost_idle_per_minute",
    ):
        idle = results[key]
        assert set(idle) == {"seconds", "slurm_requests", "slurm_bytes", "full_fetches", "syncer_cpu_percent"}
        assert idle["seconds"] >= 31 and idle["slurm_requests"] > 0 and idle["slurm_bytes"] > 0  # at the wire
    assert results["baseline_idle_per_minute"]["full_fetches"] >= 1
    assert results["snapshot"]["ratio"] > 0
    assert 0 < results["rss_mb"]["steady"] <= results["rss_mb"]["peak"]
    off, defaults = results["storm_valve_off_200qps"], results["storm_defaults"]
    assert off["nodes"] == 50 and off["of"] == 100
    assert off["k8s_to_slurm_s"] < 60 and off["slurm_to_k8s_s"] < 60
    # counted at the emulator until every pod and Node showed the drain: at least the pod and the Node
    assert off["kube_writes_per_node"] >= 2 and defaults["kube_writes_per_node"] >= 2
    # the node cache during the cordons, recorded so a slow storm can be told apart (lists compete with it)
    assert set(off["cache_during_cordons"]) == {"lists", "own_work_waits"}
    assert all(value >= 0 for value in off["cache_during_cordons"].values())
    # cordons are explicit intents: at the default settings the valve holds none of them back (issue 17);
    # how many drained within the deadline is a figure (50 QPS to the API server), not asserted
    assert defaults["valve_refusals"] == 0 and 0 < defaults["drained_within_deadline"] <= defaults["nodes"]
    assert (out / "latency_cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "slurm_to_k8s" in result.stdout and "max of 5" in result.stdout  # the human summary


def test_out_of_the_box_benchmark_runs_the_chart_as_rendered(tmp_path: Path) -> None:
    """benchmarks/defaults.py in small: the syncer gets the chart's environment and arguments with only the
    machine's addresses replaced, finds slurmctld's metrics by itself (26.05), and every figure is kept."""
    out = tmp_path / "defaults"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "defaults.py"), "--nodes", "100", "--rounds", "1",
         "--changes", "5", "--idle-seconds", "31", "--storm", "50", "--out", str(out)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert sorted(results["replaced_in_the_chart"]) == [
        "SLURM_SYNCER_KUBECONFIG", "SLURM_SYNCER_LISTEN_ADDRESS", "SLURM_SYNCER_SLURM_TOKEN_FILE",
        "SLURM_SYNCER_SLURM_URL",
    ]  # fmt: skip
    # `auto` found slurmctld's metrics without being told where (its port from slurmrestd's /conf)
    assert results["hint_failing"] == 0
    assert results["check_hint_line"].startswith("ok    slurmctld's metrics hint: node counts")
    assert results["poller_30s_bytes_per_minute"] > 0 and results["idle_bytes_ratio"] > 0
    # the exporter's job counts and scheduler statistics came from slurmctld's metrics while idle, not
    # from GET /jobs and /diag
    reads = results["exporter_reads_while_idle"]
    assert reads["jobs:slurmrestd"] == reads["scheduler:slurmrestd"] == 0, reads
    assert reads["jobs:slurmctld_metrics"] >= 1 and reads["scheduler:slurmctld_metrics"] >= 1, reads
    assert results["jobs_poll_bytes_per_minute"] == 0
    for direction in ("k8s_to_slurm", "slurm_to_k8s"):
        assert results["latency_s"][direction]["n"] == 5 and results["latency_s"][direction]["not_shown"] == 0
    storms = results["storms"]
    assert storms["size"] == 50
    for key in ("drained_after_last_cordon_s", "undrained_after_last_uncordon_s", "slurm_drains_shown_s"):
        assert math.isfinite(storms[key]), storms
