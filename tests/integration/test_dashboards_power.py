"""The power row of the Slurm cluster dashboard, evaluated by promtool (Prometheus' own engine) over
synthetic series named as the syncer exports them: two releases, a leader and a standby in one, the gauge
exported by both replicas (counted once), counters and the histogram moved by the leader only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from syncer.app import dashboards

SEL = 'job="slurm-syncer", namespace="slurm"'
LEADER, STANDBY = 'release="one", instance="a1:8080"', 'release="one", instance="a2:8080"'
OTHER = 'release="two", instance="b1:8080"'


def series(metric: str, where: str, labels: str, values: str) -> dict[str, str]:
    extra = f", {labels}" if labels else ""
    return {"series": f"{metric}{{{SEL}, {where}{extra}}}", "values": values}


MEMBERS = "slurm_syncer_nodeset_power_members"
ACTIONS = "slurm_syncer_nodeset_power_actions_total"
PROLOG, HELD = "slurm_syncer_prolog_answers_total", "slurm_syncer_prolog_waiting"
INPUT = [
    *(
        series(MEMBERS, who, f'nodeset="slurm/gpu", state="{state}"', f"{count}x40")
        for who in (LEADER, STANDBY)
        for state, count in (("declared", 8), ("poweredDown", 6), ("poweringUp", 1), ("poweredUp", 1))
    ),
    series(MEMBERS, OTHER, 'nodeset="hpc/cpu", state="declared"', "2x40"),
    series(MEMBERS, OTHER, 'nodeset="hpc/cpu", state="poweredUp"', "2x40"),
    # per 15 s: 15 power-ups (1/s), 7.5 power-downs, 3.75 failures; the standby's counters stay 0
    series(ACTIONS, LEADER, 'action="power_up"', "0+15x40"),
    series(ACTIONS, LEADER, 'action="power_down"', "0+7.5x40"),
    series(ACTIONS, LEADER, 'action="failure"', "0+3.75x40"),
    *(series(ACTIONS, STANDBY, f'action="{a}"', "0x40") for a in ("power_up", "power_down", "failure")),
    # the prolog: any replica answers (the standby too), each counts its own; jobs held now, per replica
    series(PROLOG, LEADER, 'outcome="ready"', "0+15x40"),
    series(PROLOG, STANDBY, 'outcome="ready"', "0+7.5x40"),
    series(PROLOG, OTHER, 'outcome="none"', "0+30x40"),
    series(HELD, LEADER, "", "2x40"),
    series(HELD, STANDBY, "", "1x40"),
    series(HELD, OTHER, "", "0x40"),
    # per 15 s: 16 registrations, half within 5 s, all within 10 s: p50 5 s, p99 5 + 5 * (15.84 - 8) / 8
    *(
        series(dashboards.POWER_UP, who, f'le="{le}"', f"0+{n}x40")
        for who, scale in ((LEADER, 1), (STANDBY, 0))
        for le, n in (("2.0", 0), ("5.0", 8 * scale), ("10.0", 16 * scale), ("+Inf", 16 * scale))
    ),
]
EXPECTED: dict[str, list[list[tuple[str, float]]]] = {
    "Power-managed members by state": [
        [
            ('{nodeset="slurm/gpu", state="poweredDown"}', 6),
            ('{nodeset="slurm/gpu", state="poweringUp"}', 1),
            ('{nodeset="slurm/gpu", state="poweredUp"}', 1),
            ('{nodeset="hpc/cpu", state="poweredUp"}', 2),
        ],
        [('{nodeset="slurm/gpu"}', 8), ('{nodeset="hpc/cpu"}', 2)],
    ],
    "Power-up to slurmd registered p50 / p99": [[("{}", 5)], [("{}", 9.9)]],
    "Power actions and failures": [
        [('{action="power_up"}', 1), ('{action="power_down"}', 0.5)],
        [("{}", 0.25)],
    ],
    "PrologSlurmctld answers and jobs held": [
        [('{outcome="ready"}', 1.5), ('{outcome="none"}', 2)],  # both replicas' answers of release one
        [("{}", 3)],  # held now: every replica's own
    ],
}


def on_board(expr: str) -> str:
    """A panel's query as Grafana sends it: every namespace and release, a 1-minute rate window."""
    for variable, value in (
        (dashboards.RATE, "1m"),
        ("$job", "slurm-syncer"),
        ("$namespace", ".*"),
        ("$release", ".*"),
    ):
        expr = expr.replace(variable, value)
    return expr


def test_power_panels_under_promtool(tmp_path: Path) -> None:
    assert [p.title for p in dashboards.POWER] == list(EXPECTED)
    cluster = dashboards.dashboards()["slurm-cluster.json"]["panels"]
    assert [p["title"] for p in cluster[-len(dashboards.POWER) :]] == list(EXPECTED)  # the row, last
    cases: list[dict[str, Any]] = []
    for panel in dashboards.POWER:
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
    (tmp_path / "power-test.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    promtool = shutil.which("promtool")
    assert promtool, "promtool not found: scripts/bootstrap installs the Debian package prometheus"
    run = subprocess.run(
        [promtool, "test", "rules", "power-test.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout + run.stderr
