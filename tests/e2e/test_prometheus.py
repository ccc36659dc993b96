"""Dashboards and alerts against the real thing: a real Prometheus scrapes running syncers (real Slurm
sandbox, emulator), a leader alone and beside its standby, and evaluates every panel query (the same
figure either way) and alert (quiet for healthy releases, true in the failures it names); promtool checks
and unit-tests the rules; the committed files are what the code generates."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from syncer.app import dashboards
from syncer.controllers.partitions.options import PartitionOptions
from syncer.controllers.partitions.plan import PRECONDITION, UNSUPPORTED
from syncer.controllers.scheduler.options import SchedulerOptions
from syncer.slurm.jwt import mint_token
from syncer.testing.processes import stop_process
from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import FAST, NAMESPACE, Rig, fresh_slurm_nodes, running_syncer
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "rules-test.yaml"
P99_K8S_TO_SLURM = (
    "histogram_quantile(0.99, sum by (le) "
    '(rate(slurm_syncer_propagation_latency_seconds_bucket{direction="k8s_to_slurm"}[1m])))'
)


# Slurm 26.05+ declares a power-managed NodeSet's members over REST: its power row's members-by-state and
# actions panels get data from one member declared powered down. The power-up latency panel needs a real
# power-up (a slurmd -b per member and Slurm's 30 s periodic check): promtool over synthetic series only
# (tests/integration/test_dashboards_power.py).
POWER_PANELS = (
    tuple(p for p in dashboards.POWER if "p50" not in p.title) if "v0.0.45" in SELECTED.api_versions else ()
)
POWER_NODESET = {
    "metadata": {"name": "prompower", "namespace": NAMESPACE},
    "spec": {
        "slurm": {"features": ["prompower"]},
        "power": {"minReplicas": 0, "maxReplicas": 1, "node": {"cpus": 1, "realMemory": 400}},
        "template": {"spec": {"containers": [{"name": "slurmd", "image": "slurmd"}]}},
    },
}


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
            for target in panel["targets"]:  # every series selected by the board's variables
                selectors = target["expr"].count("{")
                assert target["expr"].count(dashboards.BOARD) == selectors, target["expr"]
        names = [v["name"] for v in board["templating"]["list"]]
        assert names == ["datasource", "job", "namespace", "release"], name
    for alert in dashboards.ALERTS:  # every series selected by SEL, which the chart narrows per release
        assert alert.expr.count(dashboards.SEL) == alert.expr.count("{") > 0, alert.expr


def test_every_alert_has_its_runbook_and_table_row_in_operations_md() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    headings = [line[4:] for line in text.splitlines() if line.startswith("### Slurm")]
    assert headings == [a.name for a in dashboards.ALERTS]  # the anchors runbook_url points at, in order
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| Slurm")}
    for alert in dashboards.ALERTS:
        row = rows.get(alert.name, "")
        assert row.startswith(f"| {alert.name} | {alert.severity} |"), alert.name
        assert row.endswith(f"| {alert.for_} |"), alert.name


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
async def prometheus(
    tmp_path: Path, groups: list[dict[str, Any]], rule_files: dict[str, dict[str, Any]]
) -> AsyncIterator[str]:
    """A real Prometheus scraping `groups` (static target groups of job slurm-syncer) with the rules."""
    port = free_port()
    for name, rules in rule_files.items():
        (tmp_path / name).write_text(yaml.safe_dump(rules, sort_keys=False))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / name) for name in rule_files],
        "scrape_configs": [{"job_name": "slurm-syncer", "static_configs": groups}],
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


def on_board(expr: str, release: str) -> str:
    """A panel's query as Grafana sends it with these variables chosen."""
    for variable, value in (
        (dashboards.RATE, "1m"), ("$job", "slurm-syncer"), ("$namespace", NAMESPACE), ("$release", release)
    ):  # fmt: skip
        expr = expr.replace(variable, value)
    return expr


def figures(result: list[dict[str, Any]], leave_out: str = "") -> dict[tuple[tuple[str, str], ...], float]:
    """Series -> value, the release label dropped (the two scrapes differ in it), `leave_out`'s dropped."""
    return {
        tuple(sorted((k, v) for k, v in row["metric"].items() if k != "release")): float(row["value"][1])
        for row in result
        if row["metric"].get("instance") != leave_out or not leave_out
    }


def same_figure(one: float, two: float, expr: str) -> bool:
    """Counts must be equal. Rates and process figures move a little between the two scrapes of one
    process, time() between the two queries, and slurmctld's last and mean scheduling cycle with every
    cycle run between the two replicas' scrapes (24.11 CI: 13 us against 16 us; mean 1032 us against
    1049 us); the Slurm data age is a sawtooth
    (0 at each answer, up to the hint's floor): any value. The oldest pending pod's age grows between the
    two scrapes."""
    if "_age_" in expr:
        return True
    if math.isnan(one) or math.isnan(two):
        return math.isnan(one) and math.isnan(two)
    if any(moving in expr for moving in ("rate(", "process_", "time()", "_cycle_last_", "_cycle_mean_")):
        return math.isclose(one, two, rel_tol=0.3, abs_tol=0.5)
    if "_oldest_seconds" in expr:  # an age: grows by the time between the two scrapes (1 s apart at most)
        return abs(one - two) <= 2.0
    return one == two


# The leader is scraped three ways: alone (release one), with its standby (two: what the chart's
# monitor scrapes at replicas: 2), and twice under two addresses (dup: one process standing for two
# replicas that both claim the lease; honest for the leader gauge only, used for the TwoLeaders alert).
# Release down is a port nobody listens on; release gone has rules (as the chart renders them for it)
# and no target at all; release refused is a third syncer, in dry-run, its hint a closed port, its
# Kubernetes writes answered 403 (refusing_writes), whose token file is then replaced by an expired token
# signed with slurmctld's own key (slurmrestd refuses it: 511 for an expired token on both releases).
# The scheduler is on in every syncer here (its own name): a pod without requests is refused and stays
# pending, which gives the scheduler row's gauges and its alert's signal data; its counters (jobs,
# tear-downs) have no samples without a Slurm job, so those panels are left to promtool
# (tests/integration/test_dashboards_scheduler.py).
PROM_SCHEDULER = "prometheus-test"
SCHEDULER_PANELS = dashboards.SCHEDULER[:4]
LEADING = replace(
    FAST, leader_election=True, lease_name="prometheus-test", lease_duration_s=30.0, renew_deadline_s=20.0,
    retry_period_s=0.5, jobs_poll_interval_s=1.0,
).replace(scheduler=SchedulerOptions(name=PROM_SCHEDULER, namespaces=(NAMESPACE,)))  # fmt: skip
REFUSED = replace(LEADING, lease_name="prometheus-refused", dry_run=True)
# The comparison of release one (the leader alone) with two (leader and standby) holds while one replica
# leads throughout: after a hand-over each holds counters of its own term. A long lease keeps a loaded CI
# machine's slow renewal (6 s lease, 4 s deadline: CI 2026-12-02 saw the standby's drain) from moving it,
# and the Lease's transitions are read so that a hand-over fails with its name, not as a panel mismatch.
HEALTHY = ("one", "two")
# signals that select failures only (refused tokens, failed writes): their metric is there when healthy
ONLY_IN_FAILURE = {
    "SlurmSyncerSlurmAuthFailing": 'slurm_syncer_slurm_requests_total{job="slurm-syncer"}',
    "SlurmSyncerKubeWriteErrors": 'slurm_syncer_kube_requests_total{job="slurm-syncer"}',
    # no answer has a series before the first question: the gauge beside it is always there
    "SlurmSyncerPrologDegraded": 'slurm_syncer_prolog_waiting{job="slurm-syncer"}',
}


@pytest.mark.slurm
@pytest.mark.kube
async def test_real_prometheus_panels_and_alerts_with_two_replicas_and_two_releases(rig: Rig, tmp_path: Path):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    job = rig.sandbox.run("sbatch", "-w", rig.sandbox.real_node, "--wrap", "sleep 300", check=True)
    nodeset = {
        "metadata": {"name": "promset", "namespace": NAMESPACE},
        "spec": {
            "replicas": 0,
            "template": {"spec": {"containers": [{"name": "slurmd", "image": "slurmd"}]}},
        },
    }
    rig.kube.create("slurm-syncer.dev", "v1alpha1", "nodesets", nodeset, namespace=NAMESPACE)
    if POWER_PANELS:  # one member declared powered down: the power row's members and actions
        rig.kube.create("slurm-syncer.dev", "v1alpha1", "nodesets", POWER_NODESET, namespace=NAMESPACE)
    # a SlurmPartition the leader refuses without a write (the sandbox lacks KeepPartInfo; 24.11 cannot
    # write partitions): the partitions panel's Ready figure, 0 with its reason
    partition = {"metadata": {"name": "prom-part"}, "spec": {"nodes": {"hosts": [rig.sandbox.real_node]}}}
    rig.kube.create("slurm-syncer.dev", "v1alpha1", "slurmpartitions", partition)
    refused_pod = {  # no requests: refused, pending with SlurmRequestRefused (the scheduler row, its alert)
        "metadata": {"name": "prom-refused"},
        "spec": {"schedulerName": PROM_SCHEDULER, "containers": [{"name": "main", "image": "app"}]},
    }
    rig.kube.create("", "v1", "pods", refused_pod, namespace=NAMESPACE)
    leading = LEADING.replace(
        slurm_metrics_url=rig.sandbox.metrics_url, partitions=PartitionOptions(enabled=True)
    )  # metrics off on 24.11: not "failing"
    refusing = replace(REFUSED, slurm_metrics_url=f"http://127.0.0.1:{free_port()}")  # nobody there
    token = tmp_path / "refused-token"
    token.write_text(rig.sandbox.token_file.read_text())
    try:
        async with (
            running_syncer(rig, leading, identity="prom-a") as a,
            running_syncer(rig, leading, identity="prom-b") as b,
            refusing_writes(rig.kube.url) as api_server,
            running_syncer(
                rig,
                refusing,
                identity="prom-c",
                token_file=token,
                kubeconfig=pointed(rig, api_server, tmp_path),
            ) as refused,
        ):
            await wait_for(lambda: a.gate.leading or b.gate.leading, deadline_s=30, what="a leader")
            leader, standby = (a, b) if a.gate.leading else (b, a)
            assert leader.http_port and standby.http_port
            me, other = f"127.0.0.1:{leader.http_port}", f"127.0.0.1:{standby.http_port}"
            async with aiohttp.ClientSession() as asker:  # a PrologSlurmctld's question: the prolog panel
                ready = {"job": "1", "nodes": rig.sandbox.real_node, "wait": "0"}
                async with asker.get(f"http://{me}/prolog/ready", params=ready) as answer:
                    assert (await answer.text()).startswith("done none")
            groups = [
                {"targets": targets, "labels": {"namespace": NAMESPACE, "release": release}}
                for release, targets in (
                    ("one", [me]),
                    ("two", [me, other]),
                    ("dup", [me, f"localhost:{leader.http_port}"]),
                    ("down", [f"127.0.0.1:{free_port()}"]),
                    ("refused", [f"127.0.0.1:{refused.http_port}"]),
                )
            ]
            runbooks = "https://wiki.example.org/slurm-syncer"
            rule_files = {
                "rules.yaml": yaml.safe_load(RULES.read_text()),
                "gone.yaml": dashboards.rules_for_release("slurm-syncer", NAMESPACE, "gone", runbooks),
                "two.yaml": dashboards.rules_for_release("slurm-syncer", NAMESPACE, "two", runbooks),
            }
            async with prometheus(tmp_path, groups, rule_files) as base, aiohttp.ClientSession() as http:

                async def scraped() -> bool:
                    with contextlib.suppress(aiohttp.ClientError):
                        found = await query(http, base, 'count_over_time(up{job="slurm-syncer"}[1m]) >= 3')
                        return len(found) == 7  # every target three times
                    return False

                await wait_for(scraped, deadline_s=60, what="three scrapes of every target")
                rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})  # a drain

                async def drain_seen() -> bool:
                    found = await query(
                        http, base,
                        'slurm_syncer_actions_total{kind="drain",direction="k8s_to_slurm",result="ok"}',
                    )  # fmt: skip
                    return {r["metric"]["release"] for r in found} >= set(HEALTHY)

                await wait_for(drain_seen, deadline_s=30, what="the drain in Prometheus")

                async def drain_flag_seen() -> bool:  # the node's flag follows the Slurm list after the write
                    found = await query(http, base, 'max by (release) (slurm_node_flags{flag="drain"}) >= 1')
                    return {r["metric"]["release"] for r in found} >= set(HEALTHY)

                await wait_for(drain_flag_seen, deadline_s=30, what="the drained node's flag in Prometheus")

                async def partition_refused() -> bool:
                    found = await query(http, base, on_board(dashboards.CLUSTER[-1].queries[0][0], "two"))
                    return [(r["metric"]["cr"], r["metric"]["reason"], r["value"][1]) for r in found] in (
                        [("prom-part", reason, "0")] for reason in (PRECONDITION, UNSUPPORTED)
                    )

                await wait_for(partition_refused, deadline_s=30, what="SlurmPartitions Ready: prom-part 0")

                # each release scrapes the leader on its own schedule: a change reaches one release's series a
                # scrape before another's, so the panels are judged by their last comparison, not a new one
                mismatched: list[str] = []

                async def panels_agree() -> bool:
                    mismatched[:] = await differences(http, base, other)
                    return not mismatched

                with contextlib.suppress(AssertionError):  # settled, or the assertion below names why not
                    await wait_for(panels_agree, deadline_s=60, what="both scrapes settled")
                where = {"namespace": LEADING.lease_namespace}
                lease = rig.kube.get("coordination.k8s.io", "v1", "leases", LEADING.lease_name, **where)
                lease = lease or {"spec": {}}
                assert not lease["spec"].get("leaseTransitions"), f"leadership moved: {lease['spec']}"
                assert not mismatched, "\n".join([*mismatched, *await scrape_health(http, base)])
                latency = await query(http, base, P99_K8S_TO_SLURM)
                assert 0 < float(latency[0]["value"][1]) < 2.0  # the drain above, measured

                async def rows(alert: dashboards.Alert, file: str) -> set[str]:
                    return await true_for(http, base, rule_files[file], alert.name)

                by_name = {a.name: a for a in dashboards.ALERTS}
                for alert in dashboards.ALERTS:
                    healthy = (await rows(alert, "rules.yaml")) & set(HEALTHY)
                    assert not healthy, f"{alert.name} is true for healthy releases {healthy}"
                    assert not await rows(alert, "two.yaml"), f"{alert.name} (scoped to two) is true"
                    measured = ONLY_IN_FAILURE.get(alert.name, alert.signal)  # absent's has none
                    if measured:
                        assert await query(http, base, measured), f"{alert.name}: no data: {measured}"
                assert await rows(by_name["SlurmSyncerTwoLeaders"], "rules.yaml") == {"dup"}
                assert await rows(by_name["SlurmSyncerDown"], "rules.yaml") == {"down"}
                assert await rows(by_name["SlurmSyncerAbsent"], "rules.yaml") == set()  # some are scraped
                assert await rows(by_name["SlurmSyncerDryRun"], "rules.yaml") == {"refused"}
                assert await rows(by_name["SlurmSyncerMetricsHintFailing"], "rules.yaml") == {"refused"}

                async def writes_refused() -> bool:  # its Lease create, every retry period
                    return await rows(by_name["SlurmSyncerKubeWriteErrors"], "rules.yaml") == {"refused"}

                await wait_for(writes_refused, deadline_s=30, what="SlurmSyncerKubeWriteErrors for refused")
                key = rig.sandbox.jwt_key_path.read_bytes()
                token.write_text(mint_token(key, "slurm", 600, now=time.time() - 3600))  # expired an hour ago
                for refusal in ("SlurmSyncerSlurmAuthFailing", "SlurmSyncerSlurmTokenExpiring"):

                    async def refused_only(alert: str = refusal) -> bool:
                        return await rows(by_name[alert], "rules.yaml") == {"refused"}

                    await wait_for(refused_only, deadline_s=30, what=f"{refusal} true for release refused")
                for absent in ("SlurmSyncerAbsent", "SlurmSyncerNoLeader", "SlurmSyncerDown"):
                    expected = {"gone"} if absent != "SlurmSyncerDown" else set()  # nothing to be down
                    assert await rows(by_name[absent], "gone.yaml") == expected, absent

                async def pending() -> set[tuple[str, str]]:
                    found = await query(http, base, 'ALERTS{alertstate="pending"}')
                    return {(r["metric"]["alertname"], r["metric"].get("release", "")) for r in found}

                # the rules themselves, not only their expressions: pending (their `for` not yet served)
                wanted = {("SlurmSyncerAbsent", "gone"), ("SlurmSyncerNoLeader", "gone"),
                          ("SlurmSyncerTwoLeaders", "dup"), ("SlurmSyncerDown", "down")}  # fmt: skip
                await wait_for(lambda: _contains(pending(), wanted), deadline_s=20, what=f"{wanted} pending")
                async with http.get(f"{base}/api/v1/rules") as response:
                    groups_loaded = (await response.json())["data"]["groups"]
                loaded = [r for g in groups_loaded for r in g["rules"]]
                assert len(loaded) == 3 * len(dashboards.ALERTS)
                assert all(r["health"] == "ok" for r in loaded), json.dumps(loaded, indent=1)
                assert {r["name"] for r in loaded} == set(by_name)

    finally:
        job_id = job.stdout.split()[-1]
        rig.sandbox.run("scancel", job_id)
        rig.kube.api.delete(rig.kube.api.resource("", "v1", "pods"), NAMESPACE, "prom-refused")
        plural = rig.kube.api.resource("slurm-syncer.dev", "v1alpha1", "slurmpartitions")
        rig.kube.patch("slurm-syncer.dev", "v1alpha1", "slurmpartitions", "prom-part",
                       {"metadata": {"finalizers": None}})  # fmt: skip
        rig.kube.api.delete(plural, "", "prom-part")
        if POWER_PANELS:
            plural = rig.kube.api.resource("slurm-syncer.dev", "v1alpha1", "nodesets")
            rig.kube.patch("slurm-syncer.dev", "v1alpha1", "nodesets", "prompower",
                           {"metadata": {"finalizers": None}}, namespace=NAMESPACE)  # fmt: skip
            rig.kube.api.delete(plural, NAMESPACE, "prompower")
            if "prompower-0" in rig.sandbox.run("sinfo", "-h", "-N", "-o", "%N").stdout.split():
                rig.sandbox.delete_node("prompower-0")


@contextlib.asynccontextmanager
async def refusing_writes(upstream: str) -> AsyncIterator[str]:
    """In front of the API server: every write answered 403 with the Status kube-apiserver sends for a
    right the Role lacks; reads and watches pass through, streamed."""
    session = aiohttp.ClientSession(auto_decompress=False)

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.method != "GET":
            await request.read()
            user = "system:serviceaccount:slurm:slurm-syncer"
            status = {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": f'{request.path} is forbidden: User "{user}" cannot {request.method.lower()} it',
                "reason": "Forbidden", "details": {}, "code": 403,
            }  # fmt: skip
            return web.json_response(status, status=403)
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        timeout = aiohttp.ClientTimeout(total=None)
        async with session.get(upstream + request.path_qs, headers=headers, timeout=timeout) as answer:
            kept = {
                k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "content-encoding")
            }
            response = web.StreamResponse(status=answer.status, headers=kept)
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
        await session.close()


def pointed(rig: Rig, server: str, tmp_path: Path) -> Path:
    """The rig's kubeconfig with another server."""
    config = yaml.safe_load(rig.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = server
    path = tmp_path / "kubeconfig-refusing"
    path.write_text(yaml.safe_dump(config))
    return path


async def differences(http: aiohttp.ClientSession, base: str, standby: str) -> list[str]:
    """Each panel's query with one replica scraped and with both: the same figure for each series (the
    standby's own per-replica series left out)."""
    found = []
    boards = (
        ("cluster", dashboards.CLUSTER + SCHEDULER_PANELS + POWER_PANELS),
        ("syncer", dashboards.SYNCER),
    )
    for board, panels in boards:
        for panel in panels:
            for expr, _ in panel.queries:
                one = figures(await query(http, base, on_board(expr, "one")))
                two = figures(await query(http, base, on_board(expr, "two")), standby)
                if not one:
                    found.append(f"{board} / {panel.title}: no data: {expr}")
                elif one.keys() != two.keys() or not all(same_figure(one[k], two[k], expr) for k in one):
                    found.append(f"{board} / {panel.title}: {expr}\n  one: {one}\n  two: {two}")
    return found


async def scrape_health(http: aiohttp.ClientSession, base: str) -> list[str]:
    """Each target's scrapes over the last minute: a mismatch from failed scrapes names them."""
    counted = await query(http, base, 'count_over_time(up{job="slurm-syncer"}[1m])')
    good = await query(http, base, 'sum_over_time(up{job="slurm-syncer"}[1m])')
    kept = {(r["metric"]["release"], r["metric"]["instance"]): r["value"][1] for r in good}
    return [
        f"  scrapes in the last minute, {r['metric']['release']} {r['metric']['instance']}: "
        f"{kept.get((r['metric']['release'], r['metric']['instance']), '?')} of {r['value'][1]} up"
        for r in counted
    ]


async def true_for(http: aiohttp.ClientSession, base: str, rules: dict[str, Any], alert: str) -> set[str]:
    """The releases ("" for none) an alert's expression, as `rules` has it, is true for now."""
    expr = next(r["expr"] for g in rules["groups"] for r in g["rules"] if r["alert"] == alert)
    return {r["metric"].get("release", "") for r in await query(http, base, expr)}


async def _contains(found: Awaitable[set[tuple[str, str]]], wanted: set[tuple[str, str]]) -> bool:
    return wanted <= await found
