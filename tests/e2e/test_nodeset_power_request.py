"""A member an admin powers up (`scontrol update state=POWER_UP`) gets its pod once Slurm's power-save pass
carries the request out (POWERING_UP), not before: a slurmd started before that pass registered first and
left POWER_UP set for good on a node that is up, or was ignored as booted before the power-up until
ResumeTimeout, its job CONFIGURING (docs/slurm-releases.md; the likely cause of benchmarks/faults.py
power_not_ready timing out on 24.11 in CI). A sandbox of its own whose pass runs at most every
PASS_EVERY_S: a request made right after a pass waits that long for the next one, as one can for
power_save_interval (10 s) anywhere."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, SandboxError, up
from syncer.testing.sandbox.config import free_port_block
from syncer.testing.slurmd_standin import SlurmdStandIn
from tests.e2e.rig import NAMESPACE, Rig, rig_over, running_syncer, sync
from tests.e2e.test_nodeset import GROUP, VERSION, Set, end_jobs, ensure_pool
from tests.e2e.test_nodeset_power import declared, power_body, state_of, wait_slurm
from tests.fixtures.slurm import SELECTED

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
PASS_EVERY_S = 15
SET, MEMBERS = "pwreq", 2
PORTS: list[int] = []  # the members' slurmd ports, named in slurm.conf (both releases: 24.11 cannot declare)


@pytest.fixture(scope="module")
def request_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    PORTS[:] = [free_port_block(MEMBERS)]
    extra = [f"SlurmctldParameters=power_save_min_interval={PASS_EVERY_S}"] + [
        f"NodeName={SET}-{i} CPUs=1 RealMemory=400 State=CLOUD Features={SET} NodeAddr=127.0.0.1 "
        f"Port={PORTS[0] + i}"
        for i in range(MEMBERS)
    ]
    try:
        directory = tmp_path_factory.mktemp("power-request-sandbox")
        sandbox = up(directory, nodes=0, slurm=SELECTED.name, extra_conf=tuple(extra))
    except SandboxError as error:
        pytest.fail(f"the power-request Slurm sandbox did not start:\n{error}")
    try:
        yield sandbox
    finally:
        sandbox.down()


@pytest.fixture
async def rig(request_sandbox: Sandbox, kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[Rig]:
    async with rig_over(request_sandbox, kube_api, kubeconfig) as rig:
        yield rig


async def test_a_requested_power_up_gets_its_pod_once_slurm_carries_it_out(rig: Rig) -> None:
    nodeset = Set(rig, SET)
    first, second = nodeset.member(0), nodeset.member(1)
    ensure_pool(rig)

    async def power_up(member: str) -> None:
        await asyncio.to_thread(rig.sandbox.scontrol, "update", f"nodename={member}", "state=POWER_UP")

    async def registered(member: str) -> bool:
        flags = await state_of(rig, member)
        return bool(flags) and not flags & {"POWERED_DOWN", "POWERING_UP", "NOT_RESPONDING"}

    try:
        async with SlurmdStandIn(
            rig.kube, rig.sandbox, boot=True, port_base=PORTS[0], nodesets=(SET,)
        ) as standin:
            async with running_syncer(
                rig, sync=sync(max_drain_fraction=1.0), nodeset=NodeSetOptions(power_port_base=PORTS[0])
            ):
                rig.kube.create(
                    GROUP, VERSION, "nodesets", power_body(SET, MEMBERS, (SET,)), namespace=NAMESPACE
                )
                await declared(nodeset, MEMBERS)
                await power_up(first)

                async def passed() -> bool:
                    return "POWERED_DOWN" not in await state_of(rig, first)

                # the pass that carries out the first request comes within PASS_EVERY_S (+1: whole seconds)
                await wait_slurm(passed, deadline_s=PASS_EVERY_S + 30, what=f"Slurm powering {first} up")
                # the next pass is PASS_EVERY_S away: the second request waits for it, its pod with it
                await power_up(second)
                await wait_slurm(
                    lambda: registered(second), deadline_s=PASS_EVERY_S + 60, what=f"{second} registered"
                )
                flags = await state_of(rig, second)
                assert "POWER_UP" not in flags, (
                    f"{second} is {'+'.join(sorted(flags))}: its slurmd registered before Slurm carried the "
                    "request out (its pod was made for the request, not for POWERING_UP)"
                )
                await wait_slurm(lambda: registered(first), deadline_s=60, what=f"{first} registered")
                assert "POWER_UP" not in await state_of(rig, first)
            assert not standin.failures, standin.failures
    finally:
        await end_jobs(rig, SET + "-")
        rig.kube.patch(
            GROUP, VERSION, "nodesets", SET, {"metadata": {"finalizers": None}}, namespace=NAMESPACE
        )
        rig.kube.api.delete(rig.kube.api.resource(GROUP, VERSION, "nodesets"), NAMESPACE, SET)
