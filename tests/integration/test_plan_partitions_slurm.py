"""The pure partition plan carried out against the real slurmrestd (26.05, v0.0.45): what it writes reads
back so that the next plan writes nothing, a change made behind its back is put back, and a deleted CR's
partition is drained while a job remains and deleted after. The controller will do what `carry_out` does."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from syncer.controllers.partitions.plan import (
    DRAINING,
    HELD,
    UNSUPPORTED,
    Ownership,
    Plan,
    Wanted,
    World,
    plan,
)
from syncer.controllers.partitions.spec import partition_jobs, settings_from_spec, wanted_from
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.partitions import PartitionSettings
from syncer.testing.sandbox import REAL_NODE, Sandbox
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm
HOSTS = "node[01121-01123]"
SPEC: dict[str, Any] = {
    "nodes": {"hosts": [HOSTS, REAL_NODE]}, "state": "UP", "maxTime": 120, "defaultTime": 30,
    "priorityTier": 4, "allowAccounts": ["root"], "overSubscribe": {"mode": "YES"}, "exclusive": "USER",
    "hidden": True, "maxNodes": "UNLIMITED",
}  # fmt: skip


MADE: set[str] = (
    set()
)  # partitions this test created, their claims not confirmed yet (the controller's memory)


async def world_of(
    client: SlurmClient, owned: dict[str, tuple[str, Ownership]], jobs: dict[str, int]
) -> World:
    present = {p.name: p for p in await client.partition_states()}
    nodes = frozenset(n.name for n in (await client.list_all_nodes()).nodes)
    return World(
        present, dict(owned), jobs, nodes, keeps_partitions=True, writes=client.partition_writes,
        made=frozenset(MADE),
    )  # fmt: skip


async def polled_counts(client: SlurmClient) -> dict[str, tuple[int, int]]:
    """What the service's job poll counts from slurmrestd ({(partition, state): jobs}), per partition."""
    counts: dict[tuple[str, str], int] = {}
    for job in await client.list_jobs():
        for state in job.states:
            counts[job.partition, state] = counts.get((job.partition, state), 0) + 1
    return partition_jobs(counts)


async def carry_out(client: SlurmClient, result: Plan, owned: dict[str, tuple[str, Ownership]]) -> None:
    for action in result.actions:
        if action.kind == "claim":
            assert action.ownership is not None
            owned[action.partition] = (action.cr, action.ownership)
            if action.ownership == "created":
                MADE.discard(action.partition)
        elif action.kind in ("create", "update", "drain"):
            await client.put_partition(action.partition, action.settings, nodes=action.nodes)
            if action.kind == "create":
                MADE.add(action.partition)
        elif action.kind == "delete":
            assert await client.delete_partition(action.partition)
        else:
            owned.pop(action.partition, None)


@pytest.mark.only_where(SELECTED.name == "26.05")
async def test_the_plan_converges_on_real_slurm_and_puts_back_what_changed(slurm_sandbox: Sandbox):
    cr = {"metadata": {"name": "itest-plan", "uid": "u", "creationTimestamp": "t"}, "spec": SPEC}
    want: Wanted = wanted_from(cr, [], lambda _n: (), lambda _ns, _n: None, observed=1)
    want = replace(want, generation=1)  # its status written at generation 1
    assert want.settings == settings_from_spec(SPEC) and not want.problems
    owned: dict[str, tuple[str, Ownership]] = {}
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as client:
        try:
            first = plan([want], await world_of(client, owned, {}))
            assert [a.kind for a in first.actions] == ["claim", "create"]
            await carry_out(client, first, owned)
            confirm = plan([want], await world_of(client, owned, {}))
            assert [(a.kind, a.ownership) for a in confirm.actions] == [("claim", "created")]
            await carry_out(client, confirm, owned)
            again = plan([want], await world_of(client, owned, {}))
            assert not again.actions and again.outcomes["itest-plan"].ready, (
                "what was written reads back equal"
            )
            # behind its back: drained, a member taken out, the tier changed. The member and the tier are
            # put back; the DRAIN (an admin's stop) is kept until the CR changes
            await client.put_partition(
                "itest-plan", PartitionSettings(state="DRAIN", priority_tier=9), nodes=f"-{REAL_NODE}"
            )
            fix = plan([want], await world_of(client, owned, {}))
            [update] = fix.actions
            assert update.settings == PartitionSettings(priority_tier=4) and update.nodes == f"+{REAL_NODE}"
            assert update.before is not None and update.before.state == "DRAIN"
            await carry_out(client, fix, owned)
            held = plan([want], await world_of(client, owned, {}))
            assert not held.actions and held.outcomes["itest-plan"].reason == HELD
            changed = plan([replace(want, generation=2)], await world_of(client, owned, {}))
            assert [a.settings for a in changed.actions] == [PartitionSettings(state="UP")]
            await carry_out(client, changed, owned)
            assert not plan([replace(want, generation=2)], await world_of(client, owned, {})).actions
            # deleted with a job in it: drained, then deleted once the job is gone
            gone = replace(want, deleting=True)
            job = slurm_sandbox.run(  # held, pending in two partitions: counts in each
                "sbatch", "-H", "-p", "itest-plan,main", "--parsable", "--wrap", "true", check=True
            ).stdout.strip()
            counts = await polled_counts(client)
            assert counts["itest-plan"] == (0, 1) and counts["main"][1] >= 1
            in_use = {name: running + pending for name, (running, pending) in counts.items()}
            draining = plan([gone], await world_of(client, owned, in_use))
            assert [a.kind for a in draining.actions] == ["drain"]
            assert draining.outcomes["itest-plan"].reason == DRAINING
            await carry_out(client, draining, owned)
            refused = slurm_sandbox.run("sbatch", "-p", "itest-plan", "--wrap", "true")
            assert "Required partition not available" in refused.stderr
            slurm_sandbox.run("scancel", job, check=True)
            await wait_for(
                lambda: not _jobs_in(slurm_sandbox, "itest-plan"), deadline_s=30, what="no job left"
            )
            finished = plan([gone], await world_of(client, owned, {}))
            assert [a.kind for a in finished.actions] == ["delete", "release"]
            await carry_out(client, finished, owned)
            assert "itest-plan" not in (await world_of(client, owned, {})).present and not owned
        finally:
            await client.delete_partition("itest-plan")


def _jobs_in(sandbox: Sandbox, partition: str) -> str:
    """The jobs Slurm still counts in the partition (what the controller reads from GET /jobs)."""
    return sandbox.run("squeue", "-h", "-p", partition, "-o", "%i").stdout.strip()


async def test_where_rest_cannot_write_partitions_the_plan_writes_nothing(client_per_version: SlurmClient):
    client = client_per_version
    cr = {"metadata": {"name": "itest-ro", "uid": "u", "creationTimestamp": "t"}, "spec": SPEC}
    want = wanted_from(cr, [], lambda _n: (), lambda _ns, _n: None)
    result = plan([want], await world_of(client, {}, {}))
    if client.partition_writes:
        assert [a.kind for a in result.actions] == ["claim", "create"]
        return
    assert not result.actions and result.outcomes["itest-ro"].reason == UNSUPPORTED
    assert "Slurm 26.05+" in result.outcomes["itest-ro"].message
