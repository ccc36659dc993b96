"""The scheduler's counters say in their HELP every label value the controller counts (a scrape's
reader sees no other documentation)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from syncer.app.metric_families import COUNTERS

CONTROLLER = Path(__file__).parents[2] / "syncer" / "controllers" / "scheduler" / "controller.py"
COUNTED = re.compile(r"stats\.(jobs|errors)\[([^\]]+)\]")


def counted(table: str) -> set[str]:
    keys = [m.group(2) for m in COUNTED.finditer(CONTROLLER.read_text()) if m.group(1) == table]
    return {literal for key in keys for literal in re.findall(r'"([^"]+)"', key)}


@pytest.mark.parametrize(
    ("table", "family"),
    [("jobs", "slurm_syncer_scheduler_jobs"), ("errors", "slurm_syncer_scheduler_job_errors")],
)
def test_the_help_names_every_value_counted(table: str, family: str) -> None:
    values = counted(table)
    assert len(values) >= 3, f"found only {values} in {CONTROLLER}: the pattern no longer matches"
    help_text = COUNTERS[family].help
    assert not [v for v in values if v not in help_text], help_text
