"""The scheduler row of the Slurm cluster dashboard, evaluated by promtool (Prometheus' own engine) over
synthetic series named as the scheduler exports them (docs/scheduler.md, metrics): two releases, a leader
and a standby in one (only the leader schedules: the standby exports no gauge and its counters stay 0)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from syncer.app import dashboards
from tests.integration.test_dashboards_power import LEADER, OTHER, SEL, STANDBY, on_board, series

PODS = "slurm_syncer_scheduler_pods"
PENDING = "slurm_syncer_scheduler_pending_pods"
OLDEST = "slurm_syncer_scheduler_pending_oldest_seconds"
HELD = "slurm_syncer_scheduler_held_nodes"
TEARDOWNS = "slurm_syncer_scheduler_teardowns_total"
JOBS = "slurm_syncer_scheduler_jobs_total"
ERRORS = "slurm_syncer_scheduler_job_errors_total"
INPUT = [
    *(
        series(PODS, who, f'state="{state}"', f"{n}x40")
        for who, counts in (
            (LEADER, (("pending", 3), ("bound", 5), ("terminating", 1))),
            (OTHER, (("pending", 2), ("bound", 1))),
        )
        for state, n in counts
    ),
    {"series": f"{HELD}{{{SEL}, {LEADER}}}", "values": "1x40"},
    {"series": f"{HELD}{{{SEL}, {OTHER}}}", "values": "0x40"},
    series(PENDING, LEADER, 'reason="SlurmJobPending", slurm_reason="Priority"', "2x40"),
    series(PENDING, LEADER, 'reason="SlurmRequestRefused", slurm_reason=""', "1x40"),
    series(PENDING, OTHER, 'reason="SlurmJobPending", slurm_reason="Priority"', "2x40"),
    series(OLDEST, LEADER, 'reason="SlurmJobPending"', "0+15x40"),  # one pod waiting since the start
    series(OLDEST, LEADER, 'reason="SlurmRequestRefused"', "30x40"),
    series(OLDEST, OTHER, 'reason="SlurmJobPending"', "90x40"),
    # per 15 s: 15 tear-downs for scancel (1/s), 7.5 for deleted pods; the standby's counters stay 0
    series(TEARDOWNS, LEADER, 'cause="cancelled"', "0+15x40"),
    series(TEARDOWNS, LEADER, 'cause="pod-deleted"', "0+7.5x40"),
    series(TEARDOWNS, STANDBY, 'cause="cancelled"', "0x40"),
    series(JOBS, LEADER, 'action="submitted"', "0+30x40"),
    series(JOBS, LEADER, 'action="adopted"', "0x40"),
    series(JOBS, OTHER, 'action="submitted"', "0+15x40"),
    series(ERRORS, LEADER, 'call="submit"', "0+3.75x40"),
    series(JOBS, STANDBY, 'action="submitted"', "0x40"),
    # per 15 s: 16 bindings, half within 0.5 s, all within 1 s: p50 0.5 s, p99 0.5 + 0.5 * (15.84 - 8) / 8
    *(
        series(dashboards.BIND_LATENCY, who, f'le="{le}"', f"0+{n}x40")
        for who, scale in ((LEADER, 1), (STANDBY, 0))
        for le, n in (("0.25", 0), ("0.5", 8 * scale), ("1.0", 16 * scale), ("+Inf", 16 * scale))
    ),
]  # fmt: skip
EXPECTED: dict[str, list[list[tuple[str, float]]]] = {
    "Scheduler pods by state": [
        [('{state="pending"}', 5), ('{state="bound"}', 6), ('{state="terminating"}', 1)],
        [("{}", 1)],
    ],
    "Pending pods by reason": [
        [
            ('{reason="SlurmJobPending", slurm_reason="Priority"}', 4),
            ('{reason="SlurmRequestRefused"}', 1),  # an empty label is no label
        ]
    ],
    "Oldest pending pod by reason": [
        [('{reason="SlurmJobPending"}', 300), ('{reason="SlurmRequestRefused"}', 30)]
    ],
    "Pod created to bound p50 / p99": [[("{}", 0.5)], [("{}", 0.99)]],
    "Tear-downs by cause": [[('{cause="cancelled"}', 1), ('{cause="pod-deleted"}', 0.5)]],
    "Slurm jobs for pods, and errors": [
        [('{action="submitted"}', 3), ('{action="adopted"}', 0)],
        [('{call="submit"}', 0.25)],
    ],
}  # fmt: skip


def test_scheduler_panels_under_promtool(tmp_path: Path) -> None:
    assert [p.title for p in dashboards.SCHEDULER] == list(EXPECTED)
    cluster = [p["title"] for p in dashboards.dashboards()["slurm-cluster.json"]["panels"]]
    start = cluster.index("Scheduler pods by state")
    assert cluster[start : start + len(EXPECTED)] == list(EXPECTED)  # one row of its own, in order
    cases: list[dict[str, Any]] = []
    for panel in dashboards.SCHEDULER:
        for (expr, _), samples in zip(panel.queries, EXPECTED[panel.title], strict=True):
            cases.append(
                {
                    "expr": on_board(expr),
                    "eval_time": "5m",
                    "exp_samples": [{"labels": labels, "value": value} for labels, value in samples],
                }
            )
    tests = {
        "rule_files": [],
        "tests": [{"interval": "15s", "input_series": INPUT, "promql_expr_test": cases}],
    }
    (tmp_path / "scheduler-test.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found: scripts/bootstrap installs the Debian package prometheus"
    run = subprocess.run(
        [promtool, "test", "rules", "scheduler-test.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout + run.stderr
