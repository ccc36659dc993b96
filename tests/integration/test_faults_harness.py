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
    rows = json.loads((tmp_path / "results.json").read_text())["scenarios"]
    assert len(rows) == 5
    for row in rows:
        assert row["faults_injected"] > 0, row
        assert row["wrong_actions"] == 0, row
        assert row["changes_lost"] == 0, row
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
