"""The benchmark harness in its quick form (100 nodes, a few changes), so it never rots. The figures
are printed and kept, not asserted: speed targets live in benchmarks/RESULTS.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_writes_results_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["nodes"] == 100 and results["api_version"].startswith("v0.0.")
    for key in ("latency_s", "baseline_latency_s"):
        for direction in ("k8s_to_slurm", "annotation_to_slurm", "slurm_to_k8s"):
            figures = results[key][direction]
            assert figures["n"] == 5 and 0 < figures["p50"] <= figures["p95"] <= figures["p99"]
    # the full-poll baseline really polls every 30 s: Slurm-side changes wait for it
    assert results["baseline_latency_s"]["slurm_to_k8s"]["p50"] > results["latency_s"]["slurm_to_k8s"]["p50"]
    for key in ("idle_per_minute", "baseline_idle_per_minute"):
        assert set(results[key]) == {"slurm_requests", "slurm_bytes", "full_fetches", "syncer_cpu_percent"}
    assert results["baseline_idle_per_minute"]["full_fetches"] >= 1
    assert results["snapshot"]["ratio"] > 0 and results["rss_mb"] > 0
    assert results["storm"]["k8s_to_slurm_s"] < 60 and results["storm"]["slurm_to_k8s_s"] < 60
    assert (out / "latency_cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "slurm_to_k8s" in result.stdout  # the human summary
