"""A Slurm outage at start, as the chart runs the syncer: `run` waits (alive, not ready, saying why) instead
of exiting, the chart's PodDisruptionBudget lets the not-ready replicas be evicted so node drains do not
hang, and the syncer becomes ready once slurmrestd is back (real sandbox, emulator)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import Rig, node_body
from tests.helpers import wait_for
from tests.integration.test_helm_chart import NAMESPACE, container, one, render

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")


async def endpoint(port: int, path: str) -> tuple[int, str]:
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}{path}") as response:
                return response.status, await response.text()
    except aiohttp.ClientError:
        return 0, ""


def evict(rig: Rig, pod: str) -> int:
    try:
        rig.kube.api.evict(NAMESPACE, pod, {})
    except ApiError as exc:
        return exc.code
    return 201


async def test_run_waits_for_slurmrestd_and_the_budget_lets_unready_replicas_go(rig: Rig, tmp_path: Path):
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    port = free_port()
    token = rig.sandbox.token_file
    values = {
        "slurm": {
            "url": rig.sandbox.rest_url,
            "auth": {"secretKey": token.name, "mountPath": str(token.parent)},
        },
        "extraArgs": [f"--kubeconfig={rig.kubeconfig}", f"--listen-address=127.0.0.1:{port}"],
    }
    objects = render(values)
    main = container(objects)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    for var in main["env"]:
        env[var["name"]] = NAMESPACE if "valueFrom" in var else var["value"]
    log = tmp_path / "syncer.log"
    rig.sandbox.stop_slurmrestd()  # a Slurm upgrade: slurmrestd is away when the pod starts
    process = None
    try:
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                CLI, "run", *main["args"], env=env, stdout=out, stderr=out
            )

        def alive() -> None:
            assert process is not None
            if process.returncode is not None:
                raise AssertionError(f"the syncer exited {process.returncode}: {log.read_text()[-2000:]}")

        async def waiting_and_saying_why() -> bool:
            alive()
            ready, body = await endpoint(port, "/readyz")
            healthy, _ = await endpoint(port, "/healthz")
            tries = log.read_text().count("waiting for slurmrestd")
            return healthy == 200 and ready == 503 and "cannot reach slurmrestd" in body and tries >= 3

        await wait_for(
            waiting_and_saying_why, deadline_s=60, what="live, not ready, retrying with the reason"
        )
        assert rig.sandbox.rest_url in log.read_text()

        # Both replicas are NotReady now. The chart's budget must not keep their hosts from draining.
        budget = one(objects, "PodDisruptionBudget")
        assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        budget["spec"]["unhealthyPodEvictionPolicy"] = "IfHealthyBudget"  # the default before: blocks
        rig.kube.create("policy", "v1", "poddisruptionbudgets", budget, namespace=NAMESPACE)
        host = "k8s-syncer-host"
        rig.kube.create("", "v1", "nodes", node_body(host, {}))
        rig.kube.set_node_condition(host, "Ready", "False")  # keeps the stand-in pods NotReady
        labels = budget["spec"]["selector"]["matchLabels"]
        for replica in ("syncer-a", "syncer-b"):
            pod = {
                "metadata": {"name": replica, "labels": labels},
                "spec": {"nodeName": host, "containers": []},
            }
            rig.kube.create("", "v1", "pods", pod, namespace=NAMESPACE)
        assert evict(rig, "syncer-a") == 429  # what `kubectl drain` met during a Slurm outage
        name = budget["metadata"]["name"]
        policy = {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}  # the chart's value
        rig.kube.patch("policy", "v1", "poddisruptionbudgets", name, policy, namespace=NAMESPACE)
        assert evict(rig, "syncer-a") == 201 and evict(rig, "syncer-b") == 201

        rig.sandbox.start_slurmrestd()

        async def ready() -> bool:
            alive()
            status, body = await endpoint(port, "/readyz")
            return status == 200 and "leader" in body

        await wait_for(ready, deadline_s=90, what="ready once slurmrestd answers")
        assert "slurmrestd answers" in log.read_text()
    finally:
        if not rig.sandbox.running("slurmrestd"):
            rig.sandbox.start_slurmrestd()
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 30) == 0
