"""check's power-saving items against the real slurmrestd of the session sandbox (SuspendTime=600,
ResumeTimeout=600, both programs /bin/true, SuspendExcNodes=sbx-real): all pass through v0.0.45 (26.05);
every older API version has no GET /conf, so the item says what it could not check."""

from __future__ import annotations

import pytest

from syncer.app.check_cmd import check_power_saving
from syncer.app.check_power import PowerNodeSet
from syncer.slurm.client import SlurmClient

pytestmark = pytest.mark.slurm


@pytest.fixture
def client(client_per_version: SlurmClient) -> SlurmClient:
    """Each API version the release serves in turn (tests/fixtures/slurm.py)."""
    return client_per_version


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
