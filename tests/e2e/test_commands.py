"""The commands as an operator runs them: `run` as a process (killed and restarted mid-change),
`status` and `check` against the real sandbox and the emulator, and their error messages."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import pytest
import yaml

from syncer.slurm.jwt import mint_token
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox.config import TIERS
from tests.e2e.rig import Rig, fresh_slurm_nodes, running_syncer, start_daemon, syncer_environment
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


environment = syncer_environment


async def command(rig: Rig, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "syncer", "--log-format", "json", *args,
        env=env or environment(rig), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_run_killed_and_restarted_mid_change_converges(rig: Rig):
    names = fresh_slurm_nodes(6)
    kube_nodes = [rig.bind_pod(n)[0] for n in names]
    daemon = await start_daemon(rig)
    try:

        async def drained(name: str) -> bool:
            return (await rig.slurm(name)).drain_flag

        rig.kube.patch("", "v1", "nodes", kube_nodes[0], {"spec": {"unschedulable": True}})
        await wait_for(lambda: drained(names[0]), deadline_s=20, what="the daemon drains a cordoned node")
        for node in kube_nodes[1:]:
            rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})
        daemon.send_signal(signal.SIGKILL)  # in the middle of the change
        await daemon.wait()
        rig.kube.patch(
            "", "v1", "nodes", kube_nodes[0], {"spec": {"unschedulable": None}}
        )  # changed while down
        daemon = await start_daemon(rig)

        async def converged() -> bool:
            return [await drained(n) for n in names] == [False, True, True, True, True, True]

        await wait_for(converged, deadline_s=30, what="convergence after SIGKILL and restart")
        for name in names[1:]:
            assert (await rig.slurm(name)).reason.startswith("k8s: ")
        daemon.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(daemon.wait(), 20) == 0
    finally:
        if daemon.returncode is None:
            daemon.kill()
            await daemon.wait()


async def test_run_rejects_bad_options_with_one_clear_line(rig: Rig):
    code, _, err = await command(rig, "run", "--max-drain-fraction", "2")
    assert code == 2
    expected = "slurm-syncer run: bad value '2' for --max-drain-fraction: expected a fraction in (0, 1]"
    assert err.strip().splitlines() == [expected + ", e.g. 0.10 for 10 %"]
    # slurmrestd away at start: `run` waits for it (tests/e2e/test_availability.py)
    env = {**environment(rig), "SLURM_SYNCER_KUBECONFIG": "/nonexistent/kubeconfig"}
    code, _, err = await command(rig, "run", env=env)
    assert code == 2 and "cannot load Kubernetes credentials" in err


async def test_status_table_json_yaml_and_drifting(rig: Rig):
    names = fresh_slurm_nodes(2)
    kube_nodes = [rig.bind_pod(n)[0] for n in names]
    async with running_syncer(rig) as service:  # both sides in agreement first
        await service.engine.queue.wait_idle()
        await wait_for(lambda: not service.engine.stats.drifted, what="no drift")
    rig.kube.patch("", "v1", "nodes", kube_nodes[0], {"spec": {"unschedulable": True}})  # no syncer: drift
    code, out, err = await command(rig, "status", "-o", "json")
    assert code == 3, err  # drift exists
    rows = {row["slurm_node"]: row for row in json.loads(out)}
    assert rows[names[0]]["drift"] is True and rows[names[0]]["cordon"] == "yes"
    assert rows[names[0]]["would"].startswith("drain in Slurm (k8s: "), rows[names[0]]
    assert rows[names[1]]["drift"] is False and rows[names[1]]["binding"] == "pod"
    assert (
        rows[names[1]]["pod"] == f"slurm/slurmd-{names[1]}" and rows[names[1]]["kube_node"] == kube_nodes[1]
    )
    assert rows[names[1]]["would"] == ""
    code, out, _ = await command(rig, "status", "-o", "yaml")
    assert code == 3 and {row["slurm_node"]: row for row in yaml.safe_load(out)} == rows
    code, out, _ = await command(rig, "status")
    assert code == 3 and out.splitlines()[0].split()[:3] == ["SLURM", "NODE", "BINDING"]
    drifting = sum(row["drift"] for row in rows.values())
    assert f"{drifting} drifting" in out
    # only the drifting nodes, each with what the syncer would do; no header for scripts
    code, out, _ = await command(rig, "status", "--drifting", "--no-headers")
    listed = {line.split()[0]: line for line in out.splitlines()}
    assert code == 3 and len(listed) == drifting and names[1] not in listed
    assert "drain in Slurm (k8s: " in listed[names[0]], out
    # agreement again: exit 0 (the node's drift is the only one this test made; others' may remain)
    rig.kube.patch("", "v1", "nodes", kube_nodes[0], {"spec": {"unschedulable": None}})
    code, out, _ = await command(rig, "status", "--drifting", "-o", "json")
    assert names[0] not in {row["slurm_node"] for row in json.loads(out)}
    assert code == (3 if json.loads(out) else 0)


async def test_check_reports_each_item(rig: Rig):
    code, out, err = await command(rig, "check")
    assert code == 0, out + err
    newest, release = SELECTED.newest_api_version, rig.sandbox.slurm_version.split("-")[0]
    assert f"answers; API {newest} in use (Slurm {release})" in out, out
    assert "ok    slurmrestd at" in out and "token may update nodes" in out
    assert "ok    may patch nodes/status" in out
    rig.kube.api.denied_access.add(("patch", "", "pods"))
    code, out, _ = await command(rig, "check")
    assert code == 1
    assert (
        "FAIL  may patch pods (cluster-wide): labels and annotations of NodeSet pods" in out
        and "fix: grant it to the syncer's ServiceAccount" in out
    )
    env = {**environment(rig), "SLURM_SYNCER_SLURM_TOKEN_FILE": str(write(rig, "bad-token", "not-a-jwt"))}
    code, out, _ = await command(rig, "check", env=env)
    assert code == 1 and "FAIL  token rejected" in out
    # a token signed with another key: one clear line, never a parser error (26.05 answers twice)
    env["SLURM_SYNCER_SLURM_TOKEN_FILE"] = str(
        write(rig, "foreign-token", mint_token(b"k" * 32, "slurm", 600))
    )
    code, out, _ = await command(rig, "check", env=env)
    rejected = [line for line in out.splitlines() if "token rejected" in line]
    assert code == 1 and len(rejected) == 1 and "rejected the token (HTTP" in rejected[0], out
    assert "Connection: close" not in out and "Traceback" not in out


async def test_check_in_a_dry_run_writes_nothing_anywhere(rig: Rig, tmp_path: Path):
    """Recording proxies in front of slurmrestd and the Kubernetes API: `check` writes one thing, its
    write probe, and named; `--dry-run`, a dry-run configuration and `--no-write-probe` write nothing.
    Kubernetes only ever sees SelfSubjectAccessReviews, questions the API server answers and never stores."""
    async with FaultProxy(rig.sandbox.rest_url) as slurm, FaultProxy(rig.kube.url) as kube:
        config = yaml.safe_load(rig.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = kube.url
        (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
        env = {
            **environment(rig),
            "SLURM_SYNCER_SLURM_URL": slurm.url,
            "SLURM_SYNCER_KUBECONFIG": str(tmp_path / "kubeconfig"),
            "SLURM_SYNCER_SLURM_METRICS_URL": "off",  # slurmctld's metrics are read past the proxy
        }
        reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

        def kube_writes() -> set[tuple[str, str]]:
            return {(method, path) for _, method, path, _ in kube.writes}

        code, out, err = await command(rig, "check", env=env)
        assert code == 0, out + err
        ((_, method, path, _),) = slurm.writes  # the write probe, and nothing else
        probed = path.rsplit("/", 1)[1]
        assert method == "POST" and f"/node/{probed}" in path
        assert f"write probe rewrote the comment of {probed} with its own value" in out, out
        assert kube.requests > 0 and kube_writes() == {("POST", reviews)}
        for argv, extra, why in (
            (["--dry-run"], {}, "--dry-run"),
            ([], {"SLURM_SYNCER_DRY_RUN": "true"}, "dry-run configuration"),
            (["--no-write-probe"], {}, "--no-write-probe"),
        ):
            slurm.writes.clear()
            kube.writes.clear()
            stored = rig.kube.api.store.rv
            code, out, err = await command(rig, "check", *argv, env={**env, **extra})
            assert code == 0, out + err
            assert slurm.writes == [], (argv, slurm.writes)
            assert kube_writes() == {("POST", reviews)}, argv
            assert rig.kube.api.store.rv == stored, "the Kubernetes API stored something"
            assert f"WARN  write probe skipped ({why}): whether the token may update nodes" in out, out


def write(rig: Rig, name: str, text: str) -> Path:
    path = rig.kubeconfig.parent / name
    path.write_text(text)
    return path


async def test_kubeconfig_comes_from_kubeconfig_env_then_home_like_kubectl(rig: Rig, tmp_path: Path):
    """run, status and check find credentials as kubectl does: $KUBECONFIG (a list, merged), then
    ~/.kube/config; `check` says which it used."""
    env = {key: value for key, value in environment(rig).items() if key != "SLURM_SYNCER_KUBECONFIG"}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config yet
    env["KUBECONFIG"] = f"{tmp_path / 'absent'}:{rig.kubeconfig}"
    code, out, err = await command(rig, "check", env=env)
    assert code == 0, out + err
    assert f"credentials from KUBECONFIG ({rig.kubeconfig})" in out
    code, out, err = await command(rig, "status", env=env)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["SLURM", "NODE", "BINDING"], err
    name = fresh_slurm_nodes(1)[0]
    kube_node = rig.bind_pod(name)[0]
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "syncer", "--log-format", "json", "run",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=30, what="run with only $KUBECONFIG drains a cordoned node")
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(daemon.wait(), 20) == 0
    del env["KUBECONFIG"]
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(rig.kubeconfig.read_text())
    code, out, err = await command(rig, "check", env=env)
    assert code == 0 and f"credentials from {tmp_path / '.kube' / 'config'}" in out, out + err


async def test_check_finds_slurmctlds_metrics_by_itself_or_says_what_it_costs(rig: Rig):
    """--slurm-metrics-url auto (the default): the primary controller from slurmrestd's ping, on the
    SlurmctldPort slurmrestd's /conf names (26.05: the sandbox's is not 6817), else on
    --slurm-metrics-port; where it serves no metrics (24.11), a warning with the remedy and the cost."""
    port = str(rig.sandbox.ports.slurmctld)
    code, out, err = await command(rig, "check")  # no port given: 6817 would be wrong here
    hint = [line for line in out.splitlines() if "metrics hint" in line]
    assert code == 0 and len(hint) == 1, out + err
    if SELECTED.openmetrics:
        partitions = 1 + sum(line.startswith("PartitionName=") for line in TIERS)  # main + the tiers
        assert hint[0].startswith(
            f"ok    slurmctld's metrics hint: node counts of {partitions} partition(s) read at http://"
        ), hint
        assert hint[0].endswith(f":{port} (auto, found from slurmrestd's /conf (SlurmctldPort {port}))"), hint
    else:  # 24.11: no /conf, and slurmctld serves no metrics
        assert hint[0].startswith("WARN  slurmctld's metrics hint (auto) unusable: "), hint
        assert ":6817 (from slurmrestd's ping and --slurm-metrics-port 6817) serves no metrics" in hint[0], (
            hint
        )
        code, out, err = await command(
            rig, "check", env={**environment(rig), "SLURM_SYNCER_SLURM_METRICS_PORT": port}
        )
        hint = [line for line in out.splitlines() if "metrics hint" in line]
        assert code == 0 and f":{port} (from slurmrestd's ping and --slurm-metrics-port {port})" in hint[0], (
            hint
        )
        assert "full node list" in hint[0] and "MetricsType=metrics/openmetrics" in out
        # the cost predicted from one list's time here (which a busy machine stretches): a list every
        # 200 ms poll, or fewer where the duty limit spaces them, against the poller's 2 a minute
        cost = re.search(r"up to (\d+) lists a minute here \(one took ([\d.]+) s\), ([\d.]+) x the", hint[0])
        assert cost, hint
        lists, took, ratio = int(cost[1]), float(cost[2]), float(cost[3])
        assert abs(lists - 60 / max(0.2, took / 0.25)) <= 60 / max(0.2, took / 0.25) * 0.05 + 1, hint
        assert abs(ratio - lists / 2) <= 0.6, hint
        assert "fix: enable MetricsType=metrics/openmetrics in slurm.conf (Slurm 25.11+)" in out
    env = {**environment(rig), "SLURM_SYNCER_SLURM_METRICS_URL": "off"}
    code, out, _ = await command(rig, "check", env=env)
    assert code == 0 and "WARN  slurmctld's metrics hint: off; without it" in out
