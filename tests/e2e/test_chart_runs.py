"""The syncer started exactly as the Helm chart's Deployment starts it (its environment and arguments,
rendered by the real Helm engine) against the real Slurm sandbox and the emulator: it becomes ready and
drains a cordoned node."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import Rig, fresh_slurm_nodes
from tests.helpers import wait_for
from tests.integration.test_helm_chart import NAMESPACE, container, render

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")


async def test_the_rendered_deployment_runs_against_slurm_and_kubernetes(rig: Rig, tmp_path: Path):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    port = free_port()
    token = rig.sandbox.token_file
    auth = {"type": "token", "secretKey": token.name, "mountPath": str(token.parent)}
    values = {
        "slurm": {"url": rig.sandbox.rest_url, "auth": auth},
        # what differs outside a cluster: credentials from a kubeconfig, and metrics on loopback only
        "extraArgs": [f"--kubeconfig={rig.kubeconfig}", f"--listen-address=127.0.0.1:{port}"],
    }  # fmt: skip
    main = container(render(values))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    for var in main["env"]:
        env[var["name"]] = NAMESPACE if "valueFrom" in var else var["value"]
    log = tmp_path / "syncer.log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            CLI, "run", *main["args"], env=env, stdout=out, stderr=out
        )
    try:

        async def ready() -> bool:
            if process.returncode is not None:
                raise AssertionError(f"the syncer exited: {log.read_text()[-2000:]}")
            try:
                async with aiohttp.ClientSession() as http:
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                        return response.status == 200 and "leader" in await response.text()
            except aiohttp.ClientError:
                return False

        await wait_for(ready, deadline_s=60, what="the chart-configured syncer to lead and be ready")
        lease = rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", namespace=NAMESPACE)
        assert lease is not None  # leader election on, the Lease in the release namespace
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=15, what="the cordon drained in Slurm")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 30)
