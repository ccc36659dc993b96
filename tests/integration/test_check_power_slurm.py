"""check's power-saving items against the real slurmrestd of the session sandbox (SuspendTime=600,
ResumeTimeout=600, both programs /bin/true, SuspendExcNodes=sbx-real): all pass through v0.0.45 (26.05);
every older API version has no GET /conf, so the item says what it could not check."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from syncer.app.check_cmd import check_power_saving
from syncer.app.check_power import PowerNodeSet
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.sandbox import Sandbox
from tests.fixtures.slurm import API_VERSIONS

pytestmark = pytest.mark.slurm


@pytest.fixture(params=list(API_VERSIONS))
async def client(request: pytest.FixtureRequest, slurm_sandbox: Sandbox) -> AsyncIterator[SlurmClient]:
    async with SlurmClient(
        slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), api_version=request.param
    ) as c:
        yield c


async def test_power_saving_items_from_slurmctlds_conf(client: SlurmClient) -> None:
    assert client.version is not None
    items = await check_power_saving(client, [PowerNodeSet("slurm", "gpu", ceiling=4)])
    if not client.version.conf:
        [item] = items
        assert item.ok and item.warn
        assert f"not checked, API {client.version.name}" in item.what and "has no GET /conf" in item.what
        return
    # the sandbox's slurm.conf runs no PrologSlurmctld: the fifth line warns of what that costs
    assert [(i.ok, i.warn) for i in items] == [(True, False)] * 4 + [(True, True)], items
    assert items[4].what.startswith("no PrologSlurmctld runs") and "PrologSlurmctld=" in items[4].fix
    assert items[0].what.startswith("SuspendTime=600")
