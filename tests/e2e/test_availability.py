"""A Slurm outage at start, as the chart runs the syncer: `run` waits (alive, not ready, saying why) instead
of exiting, the chart's PodDisruptionBudget lets the not-ready replicas be evicted so node drains do not
hang, and the syncer becomes ready once slurmrestd is back (real sandbox, emulator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.testing.kubeapi.errors import ApiError
from tests.e2e.chart_pod import chart_pod, token_auth
from tests.e2e.rig import Rig, node_body
from tests.helpers import wait_for
from tests.integration.test_helm_chart import NAMESPACE, one

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


def evict(rig: Rig, pod: str) -> int:
    try:
        rig.kube.api.evict(NAMESPACE, pod, {})
    except ApiError as exc:
        return exc.code
    return 201


async def test_run_waits_for_slurmrestd_and_the_budget_lets_unready_replicas_go(rig: Rig, tmp_path: Path):
    rig.sandbox.stop_slurmrestd()  # a Slurm upgrade: slurmrestd is away when the pod starts
    try:
        async with chart_pod(rig, tmp_path, token_auth(rig)) as pod:

            async def waiting_and_saying_why() -> bool:
                pod.alive()
                ready, body = await pod.get("/readyz")
                healthy, _ = await pod.get("/healthz")
                tries = pod.log.read_text().count("waiting for slurmrestd")
                return healthy == 200 and ready == 503 and "cannot reach slurmrestd" in body and tries >= 3

            await wait_for(
                waiting_and_saying_why, deadline_s=60, what="live, not ready, retrying with the reason"
            )
            assert rig.sandbox.rest_url in pod.log.read_text()

            # Both replicas are NotReady now. The chart's budget must not keep their hosts from draining.
            budget = one(pod.objects, "PodDisruptionBudget")
            assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
            budget["spec"]["unhealthyPodEvictionPolicy"] = "IfHealthyBudget"  # the default before: blocks
            rig.kube.create("policy", "v1", "poddisruptionbudgets", budget, namespace=NAMESPACE)
            host = "k8s-syncer-host"
            rig.kube.create("", "v1", "nodes", node_body(host, {}))
            rig.kube.set_node_condition(host, "Ready", "False")  # keeps the stand-in pods NotReady
            labels = budget["spec"]["selector"]["matchLabels"]
            for replica in ("syncer-a", "syncer-b"):
                body = {
                    "metadata": {"name": replica, "labels": labels},
                    "spec": {"nodeName": host, "containers": []},
                }
                rig.kube.create("", "v1", "pods", body, namespace=NAMESPACE)
            assert evict(rig, "syncer-a") == 429  # what `kubectl drain` met during a Slurm outage
            name = budget["metadata"]["name"]
            policy = {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}  # the chart's value
            rig.kube.patch("policy", "v1", "poddisruptionbudgets", name, policy, namespace=NAMESPACE)
            assert evict(rig, "syncer-a") == 201 and evict(rig, "syncer-b") == 201

            rig.sandbox.start_slurmrestd()
            await wait_for(pod.ready, deadline_s=90, what="ready once slurmrestd answers")
            assert "slurmrestd answers" in pod.log.read_text()
    finally:
        if not rig.sandbox.running("slurmrestd"):
            rig.sandbox.start_slurmrestd()
