"""The syncer started exactly as the Helm chart's Deployment starts it (its environment and arguments,
rendered by the real Helm engine) against the real Slurm sandbox and the emulator: it becomes ready and
drains a cordoned node."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.chart_pod import chart_pod, token_auth
from tests.e2e.rig import NAMESPACE as PODS_NAMESPACE
from tests.e2e.rig import Rig, fresh_slurm_nodes
from tests.helpers import wait_for
from tests.integration.test_helm_chart import NAMESPACE, ROOT, container, environment, render

SLINKY = ROOT / "deploy" / "examples" / "values-slinky.yaml"

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")


@pytest.mark.parametrize(
    "logging",
    [
        {},
        {"log": {"level": "warning"}},  # the chart value, SLURM_SYNCER_LOG_LEVEL
        {"extraArgs": ["--log-level=warning"]},  # after `run` (it exited 2 before)
    ],
    ids=["default-log", "log-level-value", "log-level-extra-arg"],
)
async def test_the_rendered_deployment_runs_against_slurm_and_kubernetes(
    rig: Rig, tmp_path: Path, logging: dict[str, Any]
):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with chart_pod(rig, tmp_path, token_auth(rig), logging) as pod:
        await wait_for(pod.ready, deadline_s=60, what="the chart-configured syncer to lead and be ready")
        lease = rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", namespace=NAMESPACE)
        assert lease is not None  # leader election on, the Lease in the release namespace
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=15, what="the cordon drained in Slurm")
    # JSON lines (no terminal); at warning the info lines (its start, the drain) are not written
    levels = {json.loads(line)["level"] for line in pod.log.read_text().splitlines() if line.startswith("{")}
    assert ("info" in levels) is (not logging), levels


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of values files: mappings key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


SLURMD = {"metadata": {"labels": {"app.kubernetes.io/name": "slurmd"}}}  # Slinky's slurmd pod label


def bind_one_slinky_labelled_one_not(rig: Rig) -> list[str]:
    """Two bound Slurm nodes, the first one's pod labelled as Slinky labels slurmd pods: the Slinky
    profile's pod selector takes only that one, the default profile both."""
    names = fresh_slurm_nodes(2)
    for name in names:
        rig.bind_pod(name)
    rig.kube.patch("", "v1", "pods", f"slurmd-{names[0]}", SLURMD, namespace=PODS_NAMESPACE)
    return names


@pytest.mark.parametrize("profile", ["default", "slinky", "jwt-key", "scheduler"])
async def test_check_and_status_through_kubectl_exec_see_the_charts_configuration(
    rig: Rig, tmp_path: Path, profile: str
):
    """`kubectl exec deploy/slurm-syncer -- slurm-syncer check` (and `status`) runs in the syncer's
    container with its environment and mounts but without `run`'s arguments: the rendered Deployment's
    environment alone must carry every credential and option. The Secret's directory is the sandbox's
    (the chart's mountPath value) with its token or its JWT key, and a kubeconfig stands in for the
    service account (tests/e2e/test_image.py runs the same in the image, with the service account)."""
    names = bind_one_slinky_labelled_one_not(rig)
    # the Secret's directory: the sandbox's token, or its JWT key (the syncer mints tokens as slurm.user)
    secret, auth = (
        (rig.sandbox.jwt_key_path, "jwtKey") if profile == "jwt-key" else (rig.sandbox.token_file, "token")
    )
    values = yaml.safe_load(SLINKY.read_text()) if profile == "slinky" else {}
    if profile == "scheduler":  # scheduler.* reach `check` through the environment (24.11: the placeholder)
        served = {"enabled": True, "name": "gpu-pool", "namespaces": ["team-a", "team-b"]}
        values = {"scheduler": {**served, "placeholder": True}}
    values = merged(
        values,
        {
            "slurm": {
                "url": rig.sandbox.rest_url,
                "auth": {"type": auth, "secretKey": secret.name, "mountPath": str(secret.parent)},
            },
            "extraEnv": [{"name": "KUBECONFIG", "value": str(rig.kubeconfig)}],
        },
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **environment(container(render(values)))}

    async def exec_in_container(*argv: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            CLI, *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode is not None
        return process.returncode, out.decode()

    code, out = await exec_in_container("check")
    assert code == 0, out
    assert "token accepted" in out and "token may update nodes" in out, out
    on = "scheduler: on for pods with schedulerName gpu-pool in "
    assert (on in out) is (profile == "scheduler"), out
    if profile == "scheduler":
        assert "team-a" in out.partition(on)[2].splitlines()[0], out
        placeholder = "has no external jobs: a placeholder batch job stands for"
        assert (placeholder in out) is ("v0.0.42" in out), out  # 24.11 only; 25.05+: external jobs
    code, out = await exec_in_container("status", "-o", "json")
    rows = {row["slurm_node"]: row for row in json.loads(out)}
    assert code == (3 if any(row["drift"] for row in rows.values()) else 0), out
    assert rows[names[0]]["pod"] == f"{PODS_NAMESPACE}/slurmd-{names[0]}"
    # the profile's pod selector reached status through the environment
    assert (names[1] in rows) is (profile != "slinky"), sorted(rows)
