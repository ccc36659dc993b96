"""Partitions over the real slurmrestd, per served API version: typed reads everywhere; create, update
(incremental nodes) and delete where the version can (v0.0.45, Slurm 26.05); older versions refuse to write
with a clear typed error before any request. `GET /conf`'s ReconfigFlags, with and without KeepPartInfo."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmApiError, SlurmError, SlurmVersionError
from syncer.slurm.partitions import (
    UNLIMITED,
    InvalidPartition,
    OverSubscribe,
    PartitionSettings,
    PartitionState,
    partition_in_use,
)
from syncer.testing.sandbox import REAL_NODE, Sandbox, up
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm
NODES = tuple(f"node{i:05d}" for i in range(1111, 1116))  # the session sandbox's high, unused nodes
SETTINGS = PartitionSettings(
    state="UP", default=False, hidden=True, max_time=120, default_time=30, max_nodes=3, min_nodes=1,
    priority_tier=5, priority_job_factor=2, grace_time=7, allow_accounts=("root",), allow_groups=("root",),
    oversubscribe=OverSubscribe("FORCE", 4), exclusive="USER", alternate="main",
)  # fmt: skip


@pytest.fixture
def client(client_per_version: SlurmClient) -> SlurmClient:
    return client_per_version


async def one(client: SlurmClient, name: str) -> PartitionState | None:
    return next((p for p in await client.partition_states() if p.name == name), None)


async def test_partitions_are_read_typed_on_every_version(client: SlurmClient, slurm_sandbox: Sandbox):
    main = await one(client, "main")
    assert main is not None
    assert main.nodes == frozenset(slurm_sandbox.node_names)
    assert main.settings.state == "UP" and main.settings.max_time == UNLIMITED
    assert client.version is not None
    if client.version.name == "v0.0.45":  # flags and the oversubscribe/exclusive strings: v0.0.45 only
        assert main.settings.default is True and main.settings.oversubscribe == OverSubscribe("NO")
    else:
        assert main.settings.default is None and main.settings.oversubscribe is None


async def test_partition_writes_round_trip_or_are_refused_clearly(client: SlurmClient):
    assert client.version is not None
    name = f"itest-{client.version.name.replace('.', '')}"
    if not client.partition_writes:
        sent = sum(client.stats.requests.values())
        with pytest.raises(SlurmVersionError, match=r"Slurm 26\.05\+ \(REST v0\.0\.45\)"):
            await client.put_partition(name, SETTINGS, nodes=",".join(NODES))
        with pytest.raises(SlurmVersionError, match=r"Slurm 26\.05"):
            await client.delete_partition("main")
        assert sum(client.stats.requests.values()) == sent, "refused before any request"
        assert await one(client, name) is None and await one(client, "main") is not None
        return
    try:
        await client.put_partition(name, SETTINGS, nodes=",".join(NODES[:3]))
        made = await one(client, name)
        assert made is not None and made.nodes == frozenset(NODES[:3])
        got = made.settings.managed()
        assert {k: got[k] for k in SETTINGS.managed()} == SETTINGS.managed(), (
            "every managed field round-trips"
        )
        # incremental membership: one in, one out; the other settings stay
        await client.put_partition(name, PartitionSettings(), nodes=f"+{NODES[4]},-{NODES[0]}")
        changed = await one(client, name)
        assert changed is not None and changed.nodes == frozenset({NODES[1], NODES[2], NODES[4]})
        assert changed.settings == made.settings
        # only the fields sent change; clearing flags and limits works
        await client.put_partition(
            name, PartitionSettings(state="DRAIN", hidden=False, exclusive="NO", max_time=UNLIMITED)
        )
        drained = await one(client, name)
        assert drained is not None
        assert (drained.settings.state, drained.settings.hidden, drained.settings.exclusive) == (
            "DRAIN", False, "NO",
        )  # fmt: skip
        assert drained.settings.max_time == UNLIMITED and drained.settings.priority_tier == 5
        # an unknown node: Slurm's error 2018, nothing changed
        with pytest.raises(SlurmApiError) as refused:
            await client.put_partition(name, PartitionSettings(), nodes="+no-such-node")
        assert refused.value.has_error("Invalid node name"), refused.value.errors
        assert (await one(client, name)) == drained
        # values Slurm would store as something else never leave the client
        bad_values = (
            PartitionSettings(state="BOGUS"), PartitionSettings(priority_tier=-1),
            PartitionSettings(max_time=-5), PartitionSettings(max_time=10, default_time=20),
        )  # fmt: skip
        for bad in bad_values:
            with pytest.raises(InvalidPartition):
                await client.put_partition(name, bad)
        assert (await one(client, name)) == drained, "an unknown state would have left it INACTIVE"
    finally:
        deleted = await client.delete_partition(name)
    assert deleted and await one(client, name) is None
    assert not await client.delete_partition(name), "already gone: False, no error"


async def test_a_partition_with_a_job_is_not_deleted(client: SlurmClient, slurm_sandbox: Sandbox):
    if not client.partition_writes:
        return  # refused before any request: the test above proves it per version
    name = "itest-busy"
    await client.put_partition(name, PartitionSettings(state="UP"), nodes=REAL_NODE)
    held = slurm_sandbox.run("sbatch", "-H", "-p", name, "--parsable", "--wrap", "true", check=True)
    job = held.stdout.strip()
    try:
        with pytest.raises(SlurmApiError) as refused:
            await client.delete_partition(name)
        assert partition_in_use(refused.value), refused.value.errors
        assert await one(client, name) is not None
    finally:
        slurm_sandbox.run("scancel", job, check=True)
    await wait_for(
        lambda: _deleted(client, name), deadline_s=30, what="the partition deleted once its job ended"
    )


async def _deleted(client: SlurmClient, name: str) -> bool:
    try:
        return await client.delete_partition(name) or await one(client, name) is None
    except SlurmApiError as exc:
        if partition_in_use(exc):
            return False
        raise


async def test_conf_says_whether_slurmctld_keeps_partitions(client: SlurmClient):
    conf = await client.slurmctld_conf()
    assert client.version is not None
    if client.version.name != "v0.0.45":
        assert conf is None, "no /conf before v0.0.45: the caller says the precondition cannot be read"
        return
    assert conf is not None and conf.port > 0
    assert conf.reconfig_flags == [] and not conf.keeps_partitions, "the session sandbox has no ReconfigFlags"


@pytest.mark.only_where(SELECTED.name == "26.05")
async def test_with_keep_part_info_a_partition_and_its_job_survive_reconfigure_and_restart(tmp_path: Path):
    sandbox = await asyncio.to_thread(up, tmp_path / "keep", nodes=4, slurm=SELECTED.name)
    try:
        with sandbox.slurm_conf.open("a") as conf:
            conf.write("ReconfigFlags=KeepPartInfo\n")
        sandbox.scontrol("reconfigure")
        async with SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file)) as client:
            await wait_for(lambda: _keeps(client), deadline_s=30, what="/conf to show KeepPartInfo")
            await client.put_partition("kept", SETTINGS, nodes=f"{REAL_NODE},node00001")
            before = await one(client, "kept")
            # ends when told (a file in the sandbox's work directory), not after a time a busy machine lasts
            wrap = "while [ ! -e kept.done ]; do sleep 0.2; done"
            job = sandbox.run("sbatch", "-p", "kept", "-w", REAL_NODE, "--parsable", "--wrap", wrap,
                              check=True).stdout.strip()  # fmt: skip
            await wait_for(
                lambda: _job_state(sandbox, job) == "RUNNING", deadline_s=30, what="the job running"
            )
            sandbox.scontrol("reconfigure")
            await asyncio.to_thread(sandbox.restart_slurmctld)
            await wait_for(lambda: _answers(client), deadline_s=30, what="slurmrestd answering again")
            assert await one(client, "kept") == before, "every field kept through reconfigure and restart"
            assert _job_state(sandbox, job) == "RUNNING"
            (sandbox.directory / "work" / "kept.done").touch()
            await wait_for(lambda: _final_state(sandbox, job) != "", deadline_s=30, what="the job to end")
            assert _final_state(sandbox, job) == "COMPLETED", "the job survived the reloads and ended well"
    finally:
        await asyncio.to_thread(sandbox.down)


async def _keeps(client: SlurmClient) -> bool:
    conf = await client.slurmctld_conf()
    return conf is not None and conf.keeps_partitions


async def _answers(client: SlurmClient) -> bool:
    try:
        return await one(client, "main") is not None
    except SlurmError:
        return False


def _job_state(sandbox: Sandbox, job: str) -> str:
    return sandbox.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()


@pytest.mark.only_where(SELECTED.name == "26.05")
async def test_a_node_leaving_a_partition_and_a_drain_leave_the_running_job_alone(slurm_sandbox: Sandbox):
    """What the controller relies on (docs/slurm-releases.md): `-node` and DRAIN never end a running job (it
    ends when the test says so: a file in the sandbox's work directory, not a time that a busy machine could
    outlast); a pending job that needs the node that left turns BadConstraints; DRAIN refuses new
    submissions at once."""
    name = "itest-leave"
    done = slurm_sandbox.directory / "work" / f"{name}.done"
    done.unlink(missing_ok=True)
    wrap = f"while [ ! -e {name}.done ]; do sleep 0.2; done"
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as client:
        await client.put_partition(name, PartitionSettings(state="UP"), nodes=f"{REAL_NODE},{NODES[0]}")
        jobs = [
            slurm_sandbox.run(
                "sbatch", "-p", name, "-w", REAL_NODE, "--parsable", "--wrap", wrap, check=True
            ).stdout.strip()
            for _ in range(2)  # the real node has one CPU: the second pends behind the first
        ]  # fmt: skip
        job, waiting = jobs
        try:
            await wait_for(
                lambda: _job_state(slurm_sandbox, job) == "RUNNING", deadline_s=30, what="job running"
            )
            assert _job_state(slurm_sandbox, waiting) == "PENDING"
            await client.put_partition(name, PartitionSettings(state="UP"), nodes=f"-{REAL_NODE}")
            await wait_for(
                lambda: _reason(slurm_sandbox, waiting) == "BadConstraints", deadline_s=30,
                what="the pending job that needs the node gone: BadConstraints",
            )  # fmt: skip
            assert _job_state(slurm_sandbox, job) == "RUNNING"
            await client.put_partition(name, PartitionSettings(state="DRAIN"))
            refused = slurm_sandbox.run("sbatch", "-p", name, "--wrap", "true")
            assert refused.returncode != 0 and "Required partition not available" in refused.stderr
            assert _job_state(slurm_sandbox, job) == "RUNNING"
            # DOWN: a new job is queued and pends with Slurm's reason; the running one goes on
            await client.put_partition(name, PartitionSettings(state="DOWN"))
            queued = slurm_sandbox.run("sbatch", "-p", name, "--parsable", "--wrap", "true", check=True)
            jobs.append(queued.stdout.strip())
            await wait_for(
                lambda: _reason(slurm_sandbox, jobs[-1]) == "PartitionDown", deadline_s=30,
                what="the job queued into a DOWN partition pending (PartitionDown)",
            )  # fmt: skip
            assert _job_state(slurm_sandbox, jobs[-1]) == "PENDING"
            assert _job_state(slurm_sandbox, job) == "RUNNING"
            slurm_sandbox.run("scancel", waiting, jobs[-1], check=True)
            done.touch()
            await wait_for(
                lambda: _final_state(slurm_sandbox, job) != "", deadline_s=60, what="the job to end"
            )
            assert _final_state(slurm_sandbox, job) == "COMPLETED"
        finally:
            done.touch()
            slurm_sandbox.run("scancel", *jobs)
            await wait_for(lambda: _deleted(client, name), deadline_s=30, what="the partition deleted")


def _reason(sandbox: Sandbox, job: str) -> str:
    return sandbox.run("squeue", "-h", "-j", job, "-o", "%r").stdout.strip()


def _final_state(sandbox: Sandbox, job: str) -> str:
    """COMPLETED, FAILED, ...: the job's end state while slurmctld still holds it (MinJobAge), else ""."""
    shown = sandbox.run("scontrol", "show", "job", job).stdout
    state = next((part.split("=", 1)[1] for part in shown.split() if part.startswith("JobState=")), "")
    return "" if state in ("", "RUNNING", "PENDING", "CONFIGURING", "COMPLETING") else state
