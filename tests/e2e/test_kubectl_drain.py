"""`kubectl drain`, as admins type it, against the emulator: its protobuf Eviction is read, the PDB that
protects a busy slurmd pod refuses it while a real job runs, and the cordon it makes drains the Slurm node."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.model.keys import Keys
from tests.e2e.rig import Rig
from tests.e2e.test_nodeset import nodeset_rig, wait_registered
from tests.fixtures.kube import Kubectl
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
DRAIN = ("--ignore-daemonsets", "--delete-emptydir-data", "--force")


async def test_kubectl_drain_waits_for_the_job_then_evicts(rig: Rig, tmp_path: Path) -> None:
    kubectl = Kubectl(rig.kubeconfig, tmp_path / "kubectl-cache")
    async with nodeset_rig(rig, 1) as (nodeset, _, _):
        await wait_registered(nodeset, 1)
        member = nodeset.member(0)
        kube_node = nodeset.pods()[member]["spec"]["nodeName"]
        job = nodeset.submit(member, 300)
        await wait_for(
            lambda: nodeset.pods()[member]["metadata"]["labels"].get(Keys.BUSY_LABEL) == "true",
            what="busy label",
        )
        try:
            refused = await kubectl("drain", kube_node, *DRAIN, "--timeout=5s", ok=False)
            assert "disruption budget" in refused, refused
            assert member in nodeset.pods() and nodeset.job_state(job) == "RUNNING"

            async def slurm_drained() -> bool:
                return (await rig.slurm(member)).drain_flag

            # drain's first step is a cordon, and a cordon drains the Slurm node
            await wait_for(
                slurm_drained, deadline_s=15, what="the Slurm node drained by kubectl drain's cordon"
            )
            assert (await rig.slurm(member)).reason.startswith("k8s: ")
            rig.sandbox.run("scancel", job, check=True)
            await wait_for(
                lambda: (
                    Keys.BUSY_LABEL
                    not in nodeset.pods().get(member, {}).get("metadata", {}).get("labels", {})
                ),
                deadline_s=30,
                what="busy label removed once the job is gone",
            )
            drained = await kubectl("drain", kube_node, *DRAIN, "--timeout=60s")
            assert f"pod/{member} evicted" in drained and f"node/{kube_node} drained" in drained, drained
        finally:
            await kubectl("uncordon", kube_node)
