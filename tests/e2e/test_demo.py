"""The README's main-job command runs its whole scenario and cleans up after itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.slurm import SELECTED

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")


def daemons() -> dict[str, int]:
    counts = {}
    for name in ("slurmctld", "slurmrestd", "slurmd"):
        found = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True, check=False)
        counts[name] = len(found.stdout.split())
    return counts


def test_demo_plays_the_scenario_and_tears_down(tmp_path: Path) -> None:
    before = daemons()
    result = subprocess.run(
        [CLI, "--log-level", "warning", "demo", "--nodes", "5", "--slurm", SELECTED.name,
         "--dir", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    for expected in (
        f"starting a real Slurm {SELECTED.name} sandbox",
        "Slurm drained it",
        "Kubernetes shows it",
        "(idle): drained, pod deleted, Slurm node deleted",
        "its job finished (COMPLETED)",
        "stays with its job",
        "undrained",
        "stopping the Slurm sandbox",
        "==> done",
    ):
        assert expected in out, f"missing {expected!r} in:\n{out}"
    assert daemons() == before, "the demo left Slurm daemons behind"
