"""check's preemption line for the scheduler's pods against the real slurmctld of the session sandbox
(`PreemptType=preempt/partition_prio`; config.TIERS: tier_low without GraceTime, tier_grace with 30 s,
tier_high above both, over the nodes with the TIERED feature): read through every API version, the
partitions' tiers and GraceTime as Slurm shows them; /conf and a partition's PreemptMode only from v0.0.45
(26.05)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from syncer.app.check_scheduler import Landing, preemption
from syncer.slurm.client import SlurmClient
from syncer.testing.sandbox import Sandbox
from syncer.testing.sandbox.config import TIER_GRACE, TIER_GRACE_S, TIER_HIGH, TIER_LOW, TIERED

pytestmark = pytest.mark.slurm
NODE = "chktier0"


@pytest.fixture(scope="module")
def tiered(slurm_sandbox: Sandbox) -> Iterator[str]:
    """A real slurmd with the TIERED feature: the tier partitions' one node (and main's)."""
    slurm_sandbox.start_slurmd(NODE, cpus=1, memory_mb=500, features=[TIERED])
    try:
        yield NODE
    finally:
        slurm_sandbox.delete_node(NODE)


@pytest.fixture
def client(client_per_version: SlurmClient) -> SlurmClient:
    """Each API version the release serves in turn (tests/fixtures/slurm.py)."""
    return client_per_version


async def test_preemption_line_from_slurmctlds_partitions(client: SlurmClient, tiered: str) -> None:
    assert client.version is not None
    partitions = {p.name: p for p in await client.partition_states()}
    assert {TIER_LOW, TIER_GRACE, TIER_HIGH} <= partitions.keys()
    assert tiered in partitions[TIER_LOW].nodes and tiered in partitions["main"].nodes
    modes = (partitions[TIER_LOW].preempt_mode, partitions[TIER_HIGH].preempt_mode)
    # v0.0.45 alone shows a partition's PreemptMode (OFF as "DISABLED", read as OFF); older: unknown
    assert modes == ((("CANCEL",), ("OFF",)) if client.version.conf else ((), ())), modes
    assert partitions[TIER_GRACE].settings.grace_time == TIER_GRACE_S
    assert (partitions[TIER_HIGH].settings.priority_tier, partitions[TIER_LOW].settings.priority_tier) == (
        10,
        1,
    )
    conf = await client.slurmctld_conf()
    api = f"API {client.version.name}"
    anywhere = preemption(conf, list(partitions.values()), Landing(any=True), 20, api)
    if not client.version.conf:
        assert conf is None
        assert anywhere[0] and anywhere[3] and f"not checked, {api} has no GET /conf" in anywhere[1]
        return
    ok, what, fix, warn = anywhere
    assert ok and warn, anywhere
    # main and tier_low share the tiered node with tier_high and have no GraceTime; tier_grace has enough
    assert f"{TIER_LOW} (GraceTime 0 s, PreemptMode=CANCEL)" in what and "main (GraceTime 0 s" in what
    assert f"{TIER_GRACE} (" not in what and f"{TIER_HIGH} (" not in what
    assert "GraceTime=25 or more" in fix
    graced = preemption(conf, list(partitions.values()), Landing(named=frozenset({TIER_GRACE})), 20, api)
    assert graced[0] and not graced[3] and f"partition(s) {TIER_GRACE} its pods" in graced[1], graced
    too_long = preemption(conf, list(partitions.values()), Landing(named=frozenset({TIER_GRACE})), 60, api)
    assert too_long[3] and "less than 65 s" in too_long[1]
