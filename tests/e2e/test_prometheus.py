"""Dashboards and alerts against the real thing: a real Prometheus scrapes a running syncer (real
Slurm sandbox, emulator) and evaluates every panel query and alert; promtool checks and unit-tests
the rules; the committed files are what the code generates."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from syncer.app import dashboards
from syncer.testing.processes import stop_process
from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import NAMESPACE, Rig, fresh_slurm_nodes, running_syncer
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "rules-test.yaml"
P99_K8S_TO_SLURM = (
    "histogram_quantile(0.99, sum by (le) "
    '(rate(slurm_syncer_propagation_latency_seconds_bucket{direction="k8s_to_slurm"}[1m])))'
)


def tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} not found: scripts/bootstrap installs the Debian package prometheus"
    return found


def test_committed_dashboards_and_rules_are_generated() -> None:
    for relative, content in dashboards.render().items():
        path = ROOT / "deploy" / relative
        assert path.exists() and path.read_text() == content, (
            f"deploy/{relative} is out of date: run python -m syncer.app.dashboards"
        )


def test_dashboards_are_well_formed() -> None:
    for name, board in dashboards.dashboards().items():
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), name
        for panel in board["panels"]:
            assert panel["targets"], f"{name}: panel {panel['title']} has no query"
            assert all(t["expr"] and t["refId"] for t in panel["targets"])


def test_promtool_checks_and_unit_tests_every_alert() -> None:
    check = subprocess.run([tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(dashboards.ALERTS)} rules found" in check.stdout
    unit = subprocess.run(
        [tool("promtool"), "test", "rules", RULES_TEST.name],
        capture_output=True, text=True, cwd=RULES_TEST.parent,
    )  # fmt: skip
    assert unit.returncode == 0, unit.stdout + unit.stderr
    cases = [
        case for group in yaml.safe_load(RULES_TEST.read_text())["tests"] for case in group["alert_rule_test"]
    ]
    for alert in dashboards.ALERTS:
        mine = [c for c in cases if c["alertname"] == alert.name]
        assert any(c["exp_alerts"] for c in mine), f"no promtool case where {alert.name} fires"
        assert any(not c["exp_alerts"] for c in mine), f"no promtool case where {alert.name} stays quiet"


@contextlib.asynccontextmanager
async def prometheus(tmp_path: Path, target_port: int) -> AsyncIterator[str]:
    port = free_port()
    shutil.copy(RULES, tmp_path / "rules.yaml")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yaml")],
        "scrape_configs": [
            {"job_name": "slurm-syncer", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (tmp_path / "prometheus.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        tool("prometheus"),
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        stdout=log, stderr=log,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await stop_process(process)
        log.close()


async def query(http: aiohttp.ClientSession, base: str, promql: str) -> list[dict[str, Any]]:
    async with http.get(f"{base}/api/v1/query", params={"query": promql}) as response:
        body = await response.json()
    assert body.get("status") == "success", f"{promql}: {body}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.mark.slurm
@pytest.mark.kube
async def test_real_prometheus_evaluates_every_panel_and_alert(rig: Rig, tmp_path: Path):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    job = rig.sandbox.run("sbatch", "-w", rig.sandbox.real_node, "--wrap", "sleep 120", check=True)
    nodeset = {
        "metadata": {"name": "promset", "namespace": NAMESPACE},
        "spec": {
            "replicas": 0,
            "template": {"spec": {"containers": [{"name": "slurmd", "image": "slurmd"}]}},
        },
    }
    rig.kube.create("slurm-syncer.dev", "v1alpha1", "nodesets", nodeset, namespace=NAMESPACE)
    try:
        async with running_syncer(rig, jobs_poll_interval_s=1.0) as service:
            assert service.http_port is not None
            async with prometheus(tmp_path, service.http_port) as base, aiohttp.ClientSession() as http:

                async def scraped() -> bool:
                    with contextlib.suppress(aiohttp.ClientError):
                        found = await query(http, base, 'count_over_time(up{job="slurm-syncer"}[1m])')
                        return bool(found) and float(found[0]["value"][1]) >= 3
                    return False

                await wait_for(scraped, deadline_s=60, what="three scrapes of the syncer")
                rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})  # a drain

                async def drain_seen() -> bool:
                    found = await query(
                        http,
                        base,
                        'slurm_syncer_actions_total{kind="drain",direction="k8s_to_slurm",result="ok"}',
                    )
                    return bool(found)

                await wait_for(drain_seen, deadline_s=30, what="the drain in Prometheus")
                await wait_for(scraped, deadline_s=10, what="another scrape")
                missing = []
                for board, panels in (("cluster", dashboards.CLUSTER), ("syncer", dashboards.SYNCER)):
                    for panel in panels:
                        for expr, _ in panel.queries:
                            if not await query(http, base, expr.replace(dashboards.RATE, "1m")):
                                missing.append(f"{board} / {panel.title}: {expr}")
                for alert in dashboards.ALERTS:
                    if not await query(http, base, alert.signal):
                        missing.append(f"alert {alert.name}: {alert.signal}")
                    await query(http, base, alert.expr)  # evaluates (firing or not)
                assert not missing, "queries without data:\n" + "\n".join(missing)
                latency = await query(http, base, P99_K8S_TO_SLURM)
                assert 0 < float(latency[0]["value"][1]) < 2.0  # the drain above, measured
                async with http.get(f"{base}/api/v1/rules") as response:
                    groups = (await response.json())["data"]["groups"]
                loaded = {r["name"]: r for g in groups for r in g["rules"]}
                assert set(loaded) == {a.name for a in dashboards.ALERTS}
                assert all(r["health"] == "ok" for r in loaded.values()), json.dumps(loaded, indent=1)
    finally:
        job_id = job.stdout.split()[-1]
        rig.sandbox.run("scancel", job_id)
