"""The syncer started exactly as the Helm chart's Deployment starts it (its environment and arguments,
rendered by the real Helm engine) against the real Slurm sandbox and the emulator: it becomes ready and
drains a cordoned node."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.chart_pod import chart_pod, token_auth
from tests.e2e.rig import Rig, fresh_slurm_nodes
from tests.helpers import wait_for
from tests.integration.test_helm_chart import NAMESPACE

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


async def test_the_rendered_deployment_runs_against_slurm_and_kubernetes(rig: Rig, tmp_path: Path):
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    async with chart_pod(rig, tmp_path, token_auth(rig)) as pod:
        await wait_for(pod.ready, deadline_s=60, what="the chart-configured syncer to lead and be ready")
        lease = rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", namespace=NAMESPACE)
        assert lease is not None  # leader election on, the Lease in the release namespace
        rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=15, what="the cordon drained in Slurm")
