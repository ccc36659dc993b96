"""The fault scenarios in their short form: under every fault the syncer takes no wrong action and loses
no change (benchmarks/faults.py; the long versions write docs/reliability.md's figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
ROOT = Path(__file__).resolve().parents[2]


def test_short_fault_scenarios_have_no_wrong_action_and_lose_nothing(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "faults.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert (tmp_path / "results.json").exists(), result.stdout[-2000:] + result.stderr[-4000:]
    rows = {row["scenario"]: row for row in json.loads((tmp_path / "results.json").read_text())["scenarios"]}
    assert len(rows) == 6
    for row in rows.values():
        assert row["faults_injected"] > 0, row
        assert row["wrong_actions"] == 0, row
        assert row["changes_lost"] == 0, row
        # no Event storm: one transition or action is one Event (a retry may repeat it), even while the
        # safety valve holds drains back or a restarted syncer sees everything afresh
        assert row["events"]["max_per_object_reason"] <= 3, row
    for row in rows.values():
        assert row["ready_after"] in (True, None), row  # /readyz recovers by itself (None: not measured)
    # slurmrestd down longer than the staleness bound: /readyz said so meanwhile
    assert rows["slurmrestd killed and restarted"]["not_ready_s"] > 0
    crash = rows["syncer SIGKILLed at random points and restarted"]
    assert crash["faults_injected"] == 4, crash
    # Kubernetes API faults: no retry storm against the API server, no Event storm, against the same stream
    # of changes without faults
    kube = rows["Kubernetes API: dropped watches, 410, 500/429, latency"]
    assert kube["kube_requests"]["ratio_to_baseline"] <= 3.0, kube
    assert kube["kube_requests"]["lists"] <= 3 * kube["faults_injected"], kube  # a re-list per fault at most
    assert kube["events"]["written"] <= 2 * kube["events"]["baseline_written"], kube
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
