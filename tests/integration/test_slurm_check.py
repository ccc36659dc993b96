"""The README's main-job command (for now the scripted Slurm-side check) runs end to end."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slurm


def test_scripted_check_drains_undrains_and_cleans_up() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "syncer.testing.slurm_check", "--nodes", "5"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sinfo now says: drained~ k8s: demo drain" in result.stdout
    assert "undrained (UNDRAIN, not RESUME): idle~" in result.stdout
    assert "sandbox stopped" in result.stdout
