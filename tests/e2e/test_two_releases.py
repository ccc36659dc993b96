"""Two syncers in one namespace (two Slurm clusters, two chart releases) with their own Lease names
(--lease-name; the chart's default is the release's full name) each lead: neither waits on the other. What
each acts on (its cluster identity): tests/e2e/two_releases.py, in test_nodeset_power.py's side by side."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import replace

import pytest

from syncer.app import wiring
from syncer.app.cli import build_parser
from syncer.app.settings import load
from tests.e2e.rig import FAST, NAMESPACE, Rig, running_syncer
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


def holder(rig: Rig, name: str) -> str:
    lease = rig.kube.get("coordination.k8s.io", "v1", "leases", name, NAMESPACE) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def test_two_releases_in_one_namespace_each_lead_on_their_own_lease(rig: Rig):
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    async with AsyncExitStack() as stack:
        for release in ("gpu-a", "gpu-b"):
            # as the chart's Deployment sets it: SLURM_SYNCER_LEASE_NAME, the release's full name
            environ = {
                "SLURM_SYNCER_SLURM_URL": rig.sandbox.rest_url,
                "POD_NAMESPACE": NAMESPACE,
                "SLURM_SYNCER_LEASE_NAME": f"{release}-slurm-syncer",
                "SLURM_SYNCER_IDENTITY": release,
            }
            config = wiring.service_config(load(build_parser().parse_args(["run"]), environ), environ)
            # without --cluster-name each release's identity is its lease name: apart as the Leases are
            assert config.cluster_name == f"{release}-slurm-syncer"
            config = replace(
                FAST, leader_election=True, lease_namespace=config.lease_namespace,
                lease_name=config.lease_name, identity=config.identity, cluster_name=config.cluster_name,
                lease_duration_s=3.0, renew_deadline_s=2.0, retry_period_s=0.5,
            )  # fmt: skip
            await stack.enter_async_context(running_syncer(rig, config))
        await wait_for(
            lambda: (
                (holder(rig, "gpu-a-slurm-syncer"), holder(rig, "gpu-b-slurm-syncer")) == ("gpu-a", "gpu-b")
            ),
            deadline_s=20,
            what="each release leading on its own Lease",
        )
    assert rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", NAMESPACE) is None
