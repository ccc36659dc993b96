"""The Slurm client against the real slurmrestd, for every API version the selected release serves
(24.11: v0.0.40-42; 26.05: v0.0.42-45); scripts/test runs this file on both releases."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from syncer.slurm.auth import JwtKeyToken, NoToken, StaticToken, TokenFile
from syncer.slurm.client import BulkUpdateError, SlurmClient
from syncer.slurm.errors import (
    SlurmApiError,
    SlurmAuthError,
    SlurmConnectionError,
    SlurmNotFound,
    SlurmVersionError,
)
from syncer.slurm.jwt import mint_token
from syncer.slurm.versions import VERSIONS as KNOWN
from syncer.testing.sandbox import REAL_NODE, Sandbox
from syncer.testing.sandbox.config import TIER_GRACE, TIER_HIGH, TIER_LOW
from tests.fixtures.http_proxy import http_proxy
from tests.fixtures.slurm import API_VERSIONS, SELECTED
from tests.helpers import wait_for

pytestmark = pytest.mark.slurm
VERSIONS = list(API_VERSIONS)


@pytest.fixture(params=VERSIONS)
async def client(request: pytest.FixtureRequest, slurm_sandbox: Sandbox) -> AsyncIterator[SlurmClient]:
    async with SlurmClient(
        slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), api_version=request.param
    ) as c:
        yield c


def scontrol_field(sandbox: Sandbox, node: str, field: str) -> str:
    text = sandbox.scontrol("show", "node", node)
    for part in text.replace("\n", " ").split():
        if part.startswith(field + "="):
            return part.split("=", 1)[1]
    return ""


async def test_negotiates_the_newest_version(slurm_sandbox: Sandbox) -> None:
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file)) as c:
        assert c.version is not None and c.version.name == SELECTED.newest_api_version
        assert await c.served_versions() == set(API_VERSIONS)
        await c.ping()
        assert c.release.startswith(SELECTED.name + "."), c.release  # read from the answers' meta


def test_every_served_version_is_known_and_verified_on_this_release() -> None:
    for name in API_VERSIONS:
        assert KNOWN[name].verified_live and SELECTED.name in KNOWN[name].verified_on


async def test_slurmctld_conf_where_the_version_has_it(client: SlurmClient, slurm_sandbox: Sandbox) -> None:
    """`GET /conf` answers for v0.0.45 only (404 for every older version, measured); the table says so."""
    assert client.version is not None
    conf = await client.slurmctld_conf()
    if not client.version.conf:
        assert conf is None
        raw = await client._send("GET", f"{client.version.prefix}/conf", endpoint="conf")
        assert raw[0] == 404  # the table is right: this version has no /conf
        return
    assert conf is not None and conf.port == slurm_sandbox.ports.slurmctld != 6817
    assert conf.metrics_type == "metrics/openmetrics" and [c.address for c in conf.controllers] == [
        "127.0.0.1"
    ]


async def test_pinning_an_unserved_version_says_what_is_served(slurm_sandbox: Sandbox) -> None:
    unserved = "v0.0.44" if SELECTED.name == "24.11" else "v0.0.40"
    c = SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), api_version=unserved)
    try:
        with pytest.raises(SlurmVersionError, match="serves " + ", ".join(API_VERSIONS).replace(".", r"\.")):
            await c.start()
    finally:
        await c.close()


async def test_ping_and_list_all_nodes(client: SlurmClient, slurm_sandbox: Sandbox) -> None:
    assert await client.ping()
    listing = await client.list_all_nodes()
    names = {n.name for n in listing.nodes}
    assert len(names) == slurm_sandbox.nodes + 1 >= 1000
    assert REAL_NODE in names
    cloud = next(n for n in listing.nodes if n.name == "node00001")
    assert {"IDLE", "CLOUD"} <= cloud.state and cloud.cpus == 64 and cloud.partitions == ("main",)
    assert listing.last_update > 0 and listing.body_bytes > 1_000_000


async def test_drain_and_undrain_round_trip(client: SlurmClient, slurm_sandbox: Sandbox) -> None:
    assert client.version is not None
    node = f"node{10 + VERSIONS.index(client.version.name):05d}"
    reason = f"k8s: test drain via {client.version.name}"
    await client.update_node(node, state=["DRAIN"], reason=reason)
    assert "DRAIN" in scontrol_field(slurm_sandbox, node, "State")
    assert reason in slurm_sandbox.scontrol("show", "node", node)
    seen = await client.get_node(node)
    assert seen.drain_flag and seen.reason == reason and seen.reason_set_by == "slurm"
    assert seen.reason_changed_at > 0
    await client.update_node(node, state=["UNDRAIN"])
    assert "DRAIN" not in scontrol_field(slurm_sandbox, node, "State")
    assert not (await client.get_node(node)).drain_flag


async def test_comment_and_features(client: SlurmClient) -> None:
    assert client.version is not None
    node = f"node{20 + VERSIONS.index(client.version.name):05d}"
    await client.update_node(node, comment="rack 7", features=["gpu", "a100"])
    seen = await client.get_node(node)
    assert seen.comment == "rack 7"
    assert set(seen.features) == {"gpu", "a100"}


async def test_missing_node_is_not_found(client: SlurmClient) -> None:
    with pytest.raises(SlurmNotFound, match="nosuchnode"):
        await client.get_node("nosuchnode")
    # 26.05 answers a refused update twice on one connection; still a typed, readable error
    with pytest.raises(SlurmNotFound, match="node nosuchnode does not exist") as info:
        await client.update_node("nosuchnode", state=["DRAIN"], reason="k8s: test")
    assert "Connection: close" not in str(info.value)


async def test_a_refused_update_is_a_typed_error(client: SlurmClient) -> None:
    with pytest.raises(SlurmApiError) as info:
        await client.update_node("node00001", state=["NO_SUCH_STATE"])
    assert info.value.status in (400, 422, 500) and "Connection: close" not in str(info.value)


async def test_bulk_update_by_hostlist(client: SlurmClient, slurm_sandbox: Sandbox) -> None:
    assert client.version is not None
    base = 100 + 10 * VERSIONS.index(client.version.name)
    names = [f"node{base + i:05d}" for i in range(3)]
    await client.update_nodes(names, state=["DRAIN"], reason="k8s: bulk test")
    assert all("DRAIN" in slurm_sandbox.node_state(n) for n in names)
    await client.update_nodes(names, state=["UNDRAIN"])
    assert not any("DRAIN" in slurm_sandbox.node_state(n) for n in names)


async def test_bulk_update_with_an_unknown_node_reports_each_nodes_standing(
    client: SlurmClient, slurm_sandbox: Sandbox
) -> None:
    """Slurm sorts the names and stops at the first unknown one: those sorted before it are changed."""
    assert client.version is not None
    base = 200 + 10 * VERSIONS.index(client.version.name)
    before = [f"node{base + i:05d}" for i in range(2)]  # sort before "zzz-missing"
    with pytest.raises(BulkUpdateError, match="zzz-missing unknown to Slurm") as info:
        await client.update_nodes([before[0], "zzz-missing", before[1]], state=["DRAIN"], reason="k8s: bulk")
    outcome = info.value.outcome
    assert outcome.unknown == {"zzz-missing"} and outcome.applied == set(before) and not outcome.not_applied
    after = f"node{base + 2:05d}"  # "aaa-missing" sorts first: nothing after it is changed
    with pytest.raises(BulkUpdateError) as info:
        await client.update_nodes(["aaa-missing", after], state=["DRAIN"], reason="k8s: bulk")
    assert info.value.outcome.not_applied == {after} and "DRAIN" not in slurm_sandbox.node_state(after)
    await client.update_nodes(before, state=["UNDRAIN"])


async def test_delete_dynamic_node(client: SlurmClient, slurm_sandbox: Sandbox) -> None:
    assert client.version is not None
    name = f"dyndel{client.version.name[-2:]}"
    slurm_sandbox.scontrol("create", f"nodename={name}", "state=cloud", "cpus=4", "realmemory=1000")
    created = await client.get_node(name)
    assert created.cpus == 4 and "DYNAMIC_NORM" in created.state  # what a NodeSet may delete (power.py)
    await client.delete_node(name)
    with pytest.raises(SlurmNotFound):
        await client.get_node(name)


async def test_a_slurm_conf_node_is_not_dynamic_and_refuses_delete(client: SlurmClient) -> None:
    """Why a power NodeSet deletes only DYNAMIC_NORM records: Slurm refuses to delete a slurm.conf node
    (an error that is not 'not found', so it must not be taken for 'gone already')."""
    name = "node00300"
    assert "DYNAMIC_NORM" not in (await client.get_node(name)).state
    with pytest.raises(SlurmApiError) as info:
        await client.delete_node(name)
    assert not isinstance(info.value, SlurmNotFound)
    assert (await client.get_node(name)).name == name


async def test_partitions_jobs_and_diag(client: SlurmClient, slurm_sandbox: Sandbox) -> None:
    partitions = await client.list_partitions()
    assert [p.name for p in partitions] == ["main", TIER_LOW, TIER_GRACE, TIER_HIGH]  # + preemption tiers
    assert partitions[0].total_nodes == slurm_sandbox.nodes + 1
    submitted = slurm_sandbox.run("sbatch", "-w", REAL_NODE, "-J", "probe", "--wrap", "sleep 30", check=True)
    job_id = int(submitted.stdout.split()[-1])
    try:
        jobs = {j.job_id: j for j in await client.list_jobs()}
        assert job_id in jobs and jobs[job_id].name == "probe" and jobs[job_id].partition == "main"
        assert jobs[job_id].states & {"PENDING", "RUNNING", "CONFIGURING"}
    finally:
        slurm_sandbox.run("scancel", str(job_id))
    stats = await client.diag()
    assert isinstance(stats.get("server_thread_count"), int)


@pytest.mark.parametrize("version", VERSIONS)
async def test_wrong_and_expired_tokens_give_auth_errors(slurm_sandbox: Sandbox, version: str) -> None:
    wrong = mint_token(b"x" * 32, "slurm", 600)
    expired = mint_token(slurm_sandbox.jwt_key_path.read_bytes(), "slurm", 60, now=1_000_000)
    for token in (wrong, expired):
        async with SlurmClient(
            slurm_sandbox.rest_url, StaticToken(token), api_version=version, attempts=1
        ) as c:
            with pytest.raises(SlurmAuthError, match="rejected the token") as info:
                await c.list_all_nodes()
            assert token not in str(info.value) and "Connection: close" not in str(info.value)
            with pytest.raises(SlurmAuthError, match="rejected the token"):
                await c.update_node("node00001", state=["DRAIN"], reason="k8s: must not land")
    assert "DRAIN" not in slurm_sandbox.node_state("node00001")


async def test_token_file_rotation_is_picked_up(slurm_sandbox: Sandbox, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(mint_token(b"y" * 32, "slurm", 600))
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(token_file), api_version="v0.0.42") as c:
        with pytest.raises(SlurmAuthError):
            await c.list_all_nodes()
        token_file.write_text(slurm_sandbox.token(lifespan_s=600))  # the Secret was rotated
        assert len((await c.list_all_nodes()).nodes) == slurm_sandbox.nodes + 1


async def test_token_minted_from_the_jwt_key(slurm_sandbox: Sandbox) -> None:
    async with SlurmClient(slurm_sandbox.rest_url, JwtKeyToken(slurm_sandbox.jwt_key_path)) as c:
        assert (await c.get_node("node00001")).name == "node00001"


async def test_connection_refused_is_a_connection_error(tmp_path: Path) -> None:
    c = SlurmClient("http://127.0.0.1:9", StaticToken("t"), attempts=2, deadline_s=2)
    try:
        with pytest.raises(SlurmConnectionError, match="cannot reach slurmrestd"):
            await c.start()
    finally:
        await c.close()


async def test_restart_of_slurmrestd_recovers_without_a_new_client(slurm_sandbox: Sandbox) -> None:
    async with SlurmClient(slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), attempts=1) as c:
        assert await c.ping()
        slurm_sandbox.stop_slurmrestd()
        try:
            with pytest.raises(SlurmConnectionError):
                await c.ping()
        finally:
            slurm_sandbox.start_slurmrestd()
        await wait_for(c.ping, deadline_s=30, what="ping after restart")


async def test_unix_socket_transport_with_local_auth(slurm_sandbox: Sandbox) -> None:
    socket_path = slurm_sandbox.start_slurmrestd_unix()
    try:
        async with SlurmClient(f"unix://{socket_path}", NoToken()) as c:
            assert c.version is not None and c.version.name == SELECTED.newest_api_version
            assert len((await c.list_all_nodes()).nodes) == slurm_sandbox.nodes + 1
            assert (await c.get_node("node00001")).name == "node00001"
    finally:
        slurm_sandbox.stop_slurmrestd_unix()


if SELECTED.name != "24.11":  # EXTERNAL nodes and the flag exist from 25.11 on (not collected on 24.11)

    async def test_newer_state_flags_decode_on_the_versions_that_list_them(slurm_sandbox: Sandbox) -> None:
        slurm_sandbox.scontrol("create", "nodename=ext-flag1", "state=external", "cpus=1", "realmemory=100")
        try:
            for version in VERSIONS:
                async with SlurmClient(
                    slurm_sandbox.rest_url, TokenFile(slurm_sandbox.token_file), api_version=version
                ) as c:
                    node = await c.get_node("ext-flag1")
                    # v0.0.42/43 omit flags they do not know; v0.0.44+ list EXTERNAL
                    assert ("EXTERNAL" in node.state) == (version >= "v0.0.44"), (version, node.state)
                    assert not node.unhealthy and not node.drain_flag and node.base_state == "IDLE"
        finally:
            slurm_sandbox.scontrol("delete", "nodename=ext-flag1")


async def test_slurmrestd_is_reached_through_the_proxy_the_environment_names(
    slurm_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = slurm_sandbox.rest_url.rsplit(":", 1)[1]
    async with http_proxy() as proxy:
        proxy.names.add("slurmrestd.test")
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "10.0.0.0/8")
        async with SlurmClient(
            f"http://slurmrestd.test:{port}", TokenFile(slurm_sandbox.token_file)
        ) as client:
            assert client.proxy == proxy.url
            assert (await client.get_node(REAL_NODE)).name == REAL_NODE
        assert proxy.seen and all(
            target.startswith(f"http://slurmrestd.test:{port}/") for _, target in proxy.seen
        )
        monkeypatch.setenv("NO_PROXY", "slurmrestd.test")
        assert (
            SlurmClient(f"http://slurmrestd.test:{port}", TokenFile(slurm_sandbox.token_file)).proxy is None
        )
