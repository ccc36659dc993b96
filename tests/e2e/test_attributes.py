"""Node labels -> Slurm features and topology, end to end: the real slurmctld and slurmd (dynamic nodes
with admin features of their own), the emulator's Nodes, real jobs placed by `--constraint` and by the
block topology. Node labels are core objects: emulator only."""

from __future__ import annotations

import asyncio
import copy
import itertools
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any

import pytest

from syncer.app.service import SyncerService
from syncer.controllers.attributes.controller import EVENT_FEATURE_REFUSED
from syncer.controllers.attributes.features import FeatureLabel
from syncer.controllers.attributes.options import AttributeOptions
from syncer.controllers.attributes.topology import TopologySpec
from syncer.model.keys import Keys
from syncer.runtime.backoff import Backoff
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmConnectionError, SlurmNotFound
from syncer.slurm.updates import NodeUpdate
from syncer.testing.sandbox import up
from syncer.testing.sandbox.config import BLOCK_TOPOLOGY, PARTITION, TREE_TOPOLOGY
from tests.e2e.rig import (
    FAST,
    Rig,
    fresh_slurm_nodes,
    get,
    node_body,
    running_syncer,
    settled,
    syncer_environment,
)  # fmt: skip
from tests.e2e.test_commands import command
from tests.e2e.test_nodeset import nodeset_rig
from tests.fixtures.kube_targets import KUEUE_CRD
from tests.fixtures.slurm import SELECTED, served_only
from tests.helpers import captured_logs, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
GPU, IB, NVLINK, SPINE, LEAF = (
    "example.com/gpu", "example.com/ib", "example.com/nvlink", "example.com/spine", "example.com/leaf",
)  # fmt: skip
ATTRIBUTES = AttributeOptions(
    feature_labels=(FeatureLabel.parse(GPU), FeatureLabel.parse(f"{IB}=infiniband")),
    topology=TopologySpec(
        block_name=BLOCK_TOPOLOGY, block_label=NVLINK, tree_name=TREE_TOPOLOGY, tree_labels=(SPINE, LEAF)
    ),
)
_ids = itertools.count(1)


@contextmanager
def real_nodes(rig: Rig, count: int) -> Iterator[list[str]]:
    """`count` dynamic Slurm nodes with a real slurmd each and an admin feature of their own."""
    prefix = f"attr{next(_ids)}x"
    names = [f"{prefix}{i}" for i in range(count)]
    try:
        for name in names:
            rig.sandbox.start_slurmd(name, features=[f"admin-{name}"])
        yield names
    finally:
        for name in names:
            for job in rig.sandbox.run("squeue", "-h", "-w", name, "-o", "%i").stdout.split():
                rig.sandbox.run("scancel", job)
        for name in names:
            rig.sandbox.delete_node(name)


@asynccontextmanager
async def attribute_syncer(rig: Rig) -> AsyncIterator[SyncerService]:
    async with running_syncer(rig, FAST.replace(attributes=ATTRIBUTES)) as service:
        yield service


def label(rig: Rig, slurm_name: str, labels: dict[str, str | None]) -> None:
    rig.kube.patch("", "v1", "nodes", f"k8s-{slurm_name}", {"metadata": {"labels": labels}})


async def features_are(rig: Rig, name: str, expected: set[str]) -> bool:
    node = await rig.slurm(name)
    return set(node.features) == expected and set(node.active_features) == expected


def run_job(rig: Rig, *args: str) -> str:
    """Submits a short job; returns its id."""
    out = rig.sandbox.run("sbatch", "--parsable", *args, "--wrap", "true", check=True).stdout
    return out.strip().split(";")[0]


def job_field(rig: Rig, job: str, name: str) -> str:
    found = re.search(rf"\b{name}=(\S*)", rig.sandbox.run("scontrol", "show", "job", job).stdout)
    return found.group(1) if found else ""


async def ran_on(rig: Rig, job: str) -> str:
    await wait_for(lambda: job_field(rig, job, "JobState") == "COMPLETED", 60, what=f"job {job} completed")
    return job_field(rig, job, "NodeList")


async def test_labels_become_features_that_place_jobs_and_follow_relabels(rig: Rig) -> None:
    with real_nodes(rig, 2) as (a, b):
        rig.bind_pod(a, node_labels={GPU: "h100", IB: "true"})
        rig.bind_pod(b, node_labels={GPU: "a100"})
        async with attribute_syncer(rig) as service:
            await wait_for(
                lambda: features_are(rig, a, {f"admin-{a}", "k8s.gpu:h100", "k8s.infiniband"}), 10,
                what="labels of A as features",
            )  # fmt: skip
            await wait_for(lambda: features_are(rig, b, {f"admin-{b}", "k8s.gpu:a100"}), 10, what="B's")
            job = run_job(rig, "-p", PARTITION, "--constraint=k8s.gpu:h100")
            assert await ran_on(rig, job) == a
            label(rig, a, {GPU: "a100", IB: "false"})
            label(rig, b, {GPU: "h100"})
            await wait_for(
                lambda: features_are(rig, a, {f"admin-{a}", "k8s.gpu:a100"}), 10, what="A relabelled"
            )
            await wait_for(
                lambda: features_are(rig, b, {f"admin-{b}", "k8s.gpu:h100"}), 10, what="B relabelled"
            )
            job = run_job(rig, "-p", PARTITION, "--constraint=k8s.gpu:h100")
            assert await ran_on(rig, job) == b
            label(rig, b, {GPU: None})
            await wait_for(lambda: features_are(rig, b, {f"admin-{b}"}), 10, what="B's label removed")
            assert service.attributes is not None
            writes = service.attributes.stats.writes
            await wait_for(lambda: writes["features", "ok"] >= 5, 10, what="five writes counted")
            assert not writes["features", "error"]


async def test_a_restart_writes_nothing_when_slurm_already_agrees(rig: Rig) -> None:
    with real_nodes(rig, 1) as (a,):
        rig.bind_pod(a, node_labels={GPU: "h100"})
        async with attribute_syncer(rig):
            await wait_for(lambda: features_are(rig, a, {f"admin-{a}", "k8s.gpu:h100"}), 10, what="features")
        async with attribute_syncer(rig) as again:
            assert again.attributes is not None
            before = again.attributes.stats.reconciles
            await wait_for(lambda: again.attributes.stats.reconciles > before, 10, what="a reconcile of A")  # type: ignore[union-attr]
            await again.attributes.queue.wait_idle()
            assert not again.attributes.stats.writes and not again.attributes.writing
            assert again.context.slurm_writer.bulk.stats.requests == 0


async def test_a_value_slurm_cannot_take_gives_no_feature_and_one_event(rig: Rig) -> None:
    with real_nodes(rig, 1) as (a,):
        node_name, _ = rig.bind_pod(a, node_labels={GPU: "h100"})
        async with attribute_syncer(rig) as service:
            await wait_for(lambda: features_are(rig, a, {f"admin-{a}", "k8s.gpu:h100"}), 10, what="features")
            # A validating API server refuses this value (label values are [A-Za-z0-9._-]): it is written
            # straight into the emulator's store, as another API server or an old object could hold it.
            node = copy.deepcopy(rig.node_obj(node_name))
            node["metadata"]["labels"][GPU] = "h100=sxm"
            rig.kube.api.store.write(("", "nodes"), node, "MODIFIED")
            await wait_for(lambda: features_are(rig, a, {f"admin-{a}"}), 10, what="the feature removed")

            def refused() -> list[dict[str, Any]]:
                return [e for e in rig.events_for(node_name) if e["reason"] == EVENT_FEATURE_REFUSED]

            await wait_for(lambda: bool(refused()), 10, what="an Event naming the label")
            assert GPU in refused()[0]["message"] and "h100=sxm" in refused()[0]["message"]
            assert service.attributes is not None
            before = service.attributes.stats.reconciles
            await service.attributes.runner.resync()
            await wait_for(lambda: service.attributes.stats.reconciles > before, 10, what="another reconcile")  # type: ignore[union-attr]
            await service.attributes.queue.wait_idle()
            assert [e.get("count", 1) for e in refused()] == [1]  # not repeated by the reconcile


def topology_entries(text: str) -> set[str]:
    return {entry for entry in text.split(",") if entry}


def hostnames(rig: Rig, hostlist: str) -> set[str]:
    return set(rig.sandbox.run("scontrol", "show", "hostnames", hostlist, check=True).stdout.split())


def unit_nodes(rig: Rig, topology: str, kind: str, unit: str) -> set[str]:
    """The nodes `scontrol show topology` lists under one block or switch."""
    out = rig.sandbox.scontrol("show", "topology", topology)
    found = re.search(rf"^{kind}={re.escape(unit)} .*?Nodes=(\S*)", out, re.MULTILINE)
    return hostnames(rig, found.group(1)) if found and found.group(1) else set()


@pytest.fixture
async def topology_rig(rig: Rig, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Rig]:
    """The test's emulator with a Slurm sandbox of its own that has topology.yaml (block and tree
    topologies and their partitions), so the session's sandbox keeps its one partition."""
    sandbox = up(tmp_path_factory.mktemp("topology-sandbox"), nodes=0, slurm=SELECTED.name, topology=True)
    reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    try:
        await reader.start()
        yield Rig(sandbox, rig.kube, rig.kubeconfig, reader)
    finally:
        await reader.close()
        sandbox.down()


@pytest.mark.only_where(SELECTED.topology, "needs Slurm 25.05+: see test_topology_needs_slurm_25_05")
async def test_topology_labels_place_nodes_in_blocks_and_switches_and_jobs_stay_inside(
    topology_rig: Rig,
) -> None:
    rig = topology_rig
    with real_nodes(rig, 3) as (a, b, c):
        rig.bind_pod(a, node_labels={NVLINK: "b1", SPINE: "spine1", LEAF: "leafx"})
        rig.bind_pod(b, node_labels={NVLINK: "b2", SPINE: "spine2", LEAF: "leafy"})
        rig.bind_pod(c, node_labels={NVLINK: "b1", SPINE: "spine1", LEAF: "leafx"})
        async with attribute_syncer(rig):

            async def placed(name: str, block: str, *path: str) -> bool:
                wanted = {f"{BLOCK_TOPOLOGY}:{block}", ":".join((TREE_TOPOLOGY, *path))}
                return topology_entries((await rig.slurm(name)).topology) == wanted

            async def all_placed() -> bool:
                wanted = (
                    (a, "b1", "spine1", "leafx"),
                    (b, "b2", "spine2", "leafy"),
                    (c, "b1", "spine1", "leafx"),
                )
                return all([await placed(name, block, *path) for name, block, *path in wanted])

            await wait_for(all_placed, 10, what="every node in its block and under its switches")
            assert unit_nodes(rig, BLOCK_TOPOLOGY, "BlockName", "b1") == {a, c}
            assert unit_nodes(rig, TREE_TOPOLOGY, "SwitchName", "leafx") == {a, c}
            assert unit_nodes(rig, TREE_TOPOLOGY, "SwitchName", "spine1") >= {a, c}
            for _ in range(2):  # a two-node segment fits only in b1 (b2 holds one node, b-seed one)
                job = run_job(rig, "-p", BLOCK_TOPOLOGY, "-N2", "--segment=2")
                assert hostnames(rig, await ran_on(rig, job)) == {a, c}
            job = run_job(rig, "-p", TREE_TOPOLOGY, "-N2", "--switches=1@10:00")
            assert hostnames(rig, await ran_on(rig, job)) == {a, c}
            label(rig, c, {NVLINK: "b2"})  # c moves to b's block
            await wait_for(lambda: placed(c, "b2", "spine1", "leafx"), 10, what="c moved to b2")
            assert unit_nodes(rig, BLOCK_TOPOLOGY, "BlockName", "b2") == {b, c}
            job = run_job(rig, "-p", BLOCK_TOPOLOGY, "-N2", "--segment=2")
            assert hostnames(rig, await ran_on(rig, job)) == {b, c}


async def test_topology_needs_slurm_25_05(rig: Rig) -> None:
    """On REST v0.0.42 (all 24.11 has; 26.05 pinned to it) topology is never written: one log line and a
    metric say why; features still work."""
    with real_nodes(rig, 1) as (a,):
        rig.bind_pod(a, node_labels={GPU: "h100", NVLINK: "b1", SPINE: "spine1", LEAF: "leafx"})
        before = (await rig.slurm(a)).topology
        async with running_syncer(rig, FAST.replace(attributes=ATTRIBUTES), api_version="v0.0.42") as service:
            await wait_for(lambda: features_are(rig, a, {f"admin-{a}", "k8s.gpu:h100"}), 10, what="features")
            assert service.attributes is not None and service.attributes.stats.topology_unsupported
            _, metrics = await get(service, "/metrics")
            assert "slurm_syncer_topology_unsupported 1.0" in metrics
            assert not service.attributes.stats.writes["topology", "ok"]
        assert (await rig.slurm(a)).topology == before


@pytest.mark.only_where(SELECTED.topology, "26.05's slurmrestd serving v0.0.42, then all of its own")
async def test_topology_is_written_once_slurmrestd_serves_a_version_that_takes_it(rig: Rig) -> None:
    """slurmrestd serving v0.0.42 only: topology not written (gauge 1). Replaced by one that serves v0.0.43+
    too (an upgrade): the syncer, not restarted, decides again (gauge 0) and sends the node's topology; no
    resync comes within the test (an hour away). The session sandbox has no topology.yaml: Slurm refuses the
    unit, which is enough to see the write was sent."""
    with real_nodes(rig, 1) as (a,):
        rig.bind_pod(a, node_labels={GPU: "h100", NVLINK: "b1", SPINE: "spine1", LEAF: "leafx"})
        config = FAST.replace(attributes=ATTRIBUTES, resync_s=3600.0)
        async with served_only(rig.sandbox, ["v0.0.42"]), running_syncer(rig, config) as service:
            attributes = service.attributes
            assert attributes is not None
            await wait_for(lambda: features_are(rig, a, {f"admin-{a}", "k8s.gpu:h100"}), 10, what="features")
            assert attributes.stats.topology_unsupported

            def topology_writes() -> int:
                return sum(n for (kind, _), n in attributes.stats.writes.items() if kind == "topology")

            assert topology_writes() == 0
            await asyncio.to_thread(rig.sandbox.stop_slurmrestd)
            await wait_for(lambda: bool(service.slurm.follow.why), 10, what="slurmrestd seen away")
            await asyncio.to_thread(rig.sandbox.start_slurmrestd)  # every version: topology from v0.0.43
            await wait_for(lambda: topology_writes() > 0, 20, what="the node's topology sent")
            assert not attributes.stats.topology_unsupported
            _, metrics = await get(service, "/metrics")
            assert "slurm_syncer_topology_unsupported 0.0" in metrics


async def test_check_says_topology_needs_slurm_25_05(rig: Rig) -> None:
    env = {**syncer_environment(rig), "SLURM_SYNCER_TOPOLOGY_BLOCK_NAME": BLOCK_TOPOLOGY}
    code, out, _ = await command(rig, "check", env={**env, "SLURM_SYNCER_SLURM_API_VERSION": "v0.0.42"})
    assert code == 1 and "FAIL  node topology from labels (block) needs Slurm 25.05+" in out, out
    if SELECTED.topology:
        code, out, _ = await command(rig, "check", env=env)
        assert code == 0 and "ok    node topology from labels can be written (block; API v0.0.4" in out, out


async def test_a_nodeset_node_gets_its_features_when_it_registers(rig: Rig) -> None:
    """A dynamic node registered by a NodeSet's slurmd: the Slurm cache sees it appear, its reconcile
    writes the features of the Node its pod runs on, next to the NodeSet's own feature."""
    for pool in ("pool-0", "pool-1"):
        if rig.kube.node(pool) is None:
            rig.kube.create("", "v1", "nodes", node_body(pool, {"pool": "nodeset"}))
        rig.kube.patch("", "v1", "nodes", pool, {"metadata": {"labels": {GPU: "h100"}}})
    async with nodeset_rig(rig, attributes=ATTRIBUTES) as (nodeset, service, _):
        nodeset.patch_spec({"replicas": 1})
        member = nodeset.member(0)

        async def registered_with_features() -> bool:
            try:
                return await features_are(rig, member, {"nsfeat", "k8s.gpu:h100"})
            except SlurmNotFound:
                return False

        await wait_for(registered_with_features, 60, what="the NodeSet's node registered with its features")
        job = run_job(rig, "-p", PARTITION, "--constraint=k8s.gpu:h100&nsfeat")
        assert await ran_on(rig, job) == member
        assert service.attributes is not None
        writes = service.attributes.stats.writes
        await wait_for(lambda: writes["features", "ok"] >= 1, 10, what="the write counted")


async def test_a_rack_relabelled_at_once_goes_to_slurm_in_bulk(rig: Rig) -> None:
    names = fresh_slurm_nodes(30)
    for name in names:
        rig.bind_pod(name, node_labels={GPU: "b200"})
    async with attribute_syncer(rig) as service:

        async def all_labelled() -> bool:
            listing = {n.name: n for n in (await rig.reader.list_all_nodes()).nodes}
            return all("k8s.gpu:b200" in listing[n].features for n in names)

        await wait_for(all_labelled, 20, what="30 nodes' features")
        bulk = service.context.slurm_writer.bulk.stats
        # the initial reconcile of every node decides 30 identical updates together
        assert bulk.nodes == 30 and bulk.bulk_requests >= 1 and bulk.requests < 30, bulk


async def test_a_failing_update_backs_off_with_jitter_as_a_failed_reconcile_does(rig: Rig) -> None:
    """One retry policy: an update Slurm fails (slurmrestd away) is retried by the controller's runner with
    the backoff, growing and jittered (retry n after [d/2, d], d = base * 2^(n-1)), as a failed reconcile
    is, not at a fixed interval; its log line names the controller, the node and the reconcile; then the
    update goes through."""
    (name,) = fresh_slurm_nodes(1)
    rig.bind_pod(name)
    base = 0.1
    with captured_logs() as logs:
        async with running_syncer(
            rig, FAST.replace(attributes=ATTRIBUTES, backoff=Backoff(base, 30.0))
        ) as service:
            writer = service.context.slurm_writer
            real, tries = writer.update, list[float]()

            async def failing(node: str, update: NodeUpdate | None = None, **kwargs: Any) -> bool:
                if node == name and update is not None and update.features is not None and len(tries) < 4:
                    tries.append(time.monotonic())
                    raise SlurmConnectionError("injected: slurmrestd away")
                return await real(node, update, **kwargs)

            writer.update = failing  # type: ignore[method-assign,assignment]
            # the sync controller's first writes for the new binding are done: nothing else names the node
            await wait_for(lambda: Keys.STATE in rig.pod_obj(name)["metadata"].get("annotations", {}), 10)
            await settled(service, lambda: name in service.slurm_cache.nodes, "the node")
            label(rig, name, {GPU: "a100"})

            async def carried() -> bool:
                return "k8s.gpu:a100" in (await rig.slurm(name)).features

            await wait_for(carried, 30, what="the update, after 4 failures")
    retries = [e for e in logs.entries if e["event"] == "reconcile failed, retrying" and e.get("key") == name]
    assert [(e["controller"], e["attempt"]) for e in retries] == [("attributes", n) for n in (1, 2, 3, 4)]
    assert all(isinstance(e["reconcile_id"], int) for e in retries)
    delays = [e["retry_in_s"] for e in retries]
    for attempt, delay in enumerate(delays, start=1):
        ceiling = base * 2 ** (attempt - 1)
        assert ceiling / 2 - 0.001 <= delay <= ceiling + 0.001, (attempt, delays)
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert all(gap >= delay - 0.01 for gap, delay in zip(gaps, delays, strict=False)), (gaps, delays)


async def test_dry_run_logs_the_update_and_writes_nothing(rig: Rig) -> None:
    (name,) = fresh_slurm_nodes(1)
    rig.bind_pod(name, node_labels={GPU: "h100"})
    async with running_syncer(rig, FAST.replace(attributes=ATTRIBUTES, dry_run=True)) as service:
        assert service.attributes is not None
        writes = service.attributes.stats.writes
        await wait_for(lambda: writes["features", "dry_run"] >= 1, 10, what="the update it would send")
        assert not writes["features", "ok"] and service.context.slurm_writer.bulk.stats.requests == 0
    assert "k8s.gpu:h100" not in (await rig.slurm(name)).features


@pytest.mark.only_where(SELECTED.topology, "needs Slurm 25.05+: see test_topology_needs_slurm_25_05")
async def test_a_kueue_topology_names_the_tree_levels(topology_rig: Rig) -> None:
    rig = topology_rig
    rig.kube.create("apiextensions.k8s.io", "v1", "customresourcedefinitions", copy.deepcopy(KUEUE_CRD))
    levels = [
        {"nodeLabel": "example.com/kueue-spine"},
        {"nodeLabel": LEAF},
        {"nodeLabel": "kubernetes.io/hostname"},
    ]
    rig.kube.create(
        "kueue.x-k8s.io", "v1beta1", "topologies",
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "fabric"},
         "spec": {"levels": levels}},
    )  # fmt: skip
    kueue = replace(ATTRIBUTES, topology=replace(ATTRIBUTES.topology, block_name="", kueue_topology="fabric"))
    with real_nodes(rig, 1) as (a,):
        # the flags' tree labels (SPINE, LEAF) name spine1; the Kueue Topology's levels name spine2
        rig.bind_pod(a, node_labels={SPINE: "spine1", "example.com/kueue-spine": "spine2", LEAF: "leafk"})
        async with running_syncer(rig, FAST.replace(attributes=kueue)):

            async def placed() -> bool:
                return topology_entries((await rig.slurm(a)).topology) == {f"{TREE_TOPOLOGY}:spine2:leafk"}

            await wait_for(placed, 10, what="the path the Kueue Topology's levels name")
        assert unit_nodes(rig, TREE_TOPOLOGY, "SwitchName", "spine2") == {a}


# the metrics hint (slurmctld's metrics URL) where slurmctld serves metrics; off everywhere
HINTS = ("on", "off") if SELECTED.openmetrics else ("off",)


async def reload_slurmctld(rig: Rig, service: SyncerService, how: str) -> float:
    """`scontrol reconfigure` or a slurmctld restart (in a thread: the syncer runs meanwhile); returns the
    time.monotonic() it was over, once the syncer's cache has seen the reload."""
    cache = service.slurm_cache
    # slurmctld's start known, no reload pending (a first read of 0 tells the start read after it)
    await wait_for(lambda: cache.reload_watch.started != 0 and not cache.reloading, 10, what="start read")
    seen = cache.stats.reloads
    if how == "reconfigure":
        await asyncio.to_thread(rig.sandbox.scontrol, "reconfigure")
    else:
        await asyncio.to_thread(rig.sandbox.restart_slurmctld)
    done = time.monotonic()
    await wait_for(lambda: service.slurm_cache.stats.reloads > seen, 30, what=f"the syncer seeing the {how}")
    return done


def more_than(writes: Counter[tuple[str, str]], kind: str, before: int) -> Callable[[], bool]:
    """More writes of `kind` succeeded than `before`."""
    return lambda: writes[kind, "ok"] > before


def metrics_url(rig: Rig, hint: str) -> str:
    return rig.sandbox.metrics_url if hint == "on" else "off"


async def hint_as_asked(service: SyncerService, hint: str) -> None:
    """The cache reads slurmctld's counts (and skips slurmrestd on them) with the hint on; no hint off."""
    cache = service.slurm_cache
    assert (hint == "off") == (cache.hint is None), hint
    if hint == "on":
        unchanged = cache.stats.hint_unchanged
        await wait_for(
            lambda: cache.stats.hint_unchanged > unchanged and not cache.stats.hint_failing, 60,
            what="the hint read and working (a failed hint is tried again after its 30 s floor)",
        )  # fmt: skip


@contextmanager
def reconfigured_after(rig: Rig) -> Iterator[None]:
    """The real node is in slurm.conf, shared by the session's tests: a reconfigure at the end gives it
    slurm.conf's features back (none)."""
    try:
        yield
    finally:
        rig.sandbox.scontrol("reconfigure")


@pytest.mark.parametrize("hint", HINTS)
async def test_features_are_back_at_once_after_a_reconfigure_and_a_restart(rig: Rig, hint: str) -> None:
    """A reconfigure and a restart give every node in slurm.conf slurm.conf's features back (dynamic nodes
    keep theirs) and move none of the counts the hint reads: the syncer sees slurmctld's new start, lists,
    writes them again, and a job that needs one runs on the node as before. How long that took is printed
    (measured, not asserted: a busy machine)."""
    node = rig.sandbox.real_node  # in slurm.conf, with a real slurmd
    rig.bind_pod(node, node_labels={GPU: "h100"})
    with reconfigured_after(rig):
        async with running_syncer(
            rig, FAST.replace(attributes=ATTRIBUTES), slurm_metrics_url=metrics_url(rig, hint)
        ) as service:
            assert service.attributes is not None
            writes = service.attributes.stats.writes
            await wait_for(lambda: features_are(rig, node, {"k8s.gpu:h100"}), 10, what="labels as features")
            await wait_for(lambda: writes["features", "ok"] >= 1, 10, what="the write counted")
            for how in ("reconfigure", "restart"):
                await hint_as_asked(service, hint)
                before = writes["features", "ok"]
                done = await reload_slurmctld(rig, service, how)
                # written again: the reload had erased them (a syncer that missed it writes nothing)
                await wait_for(more_than(writes, "features", before), 10, what=f"features rewritten ({how})")
                await wait_for(lambda: features_are(rig, node, {"k8s.gpu:h100"}), 10, what=f"back ({how})")
                print(f"features back {time.monotonic() - done:.2f} s after the {how} (hint {hint})")
                job = run_job(rig, "-p", PARTITION, "--constraint=k8s.gpu:h100")
                assert await ran_on(rig, job) == node


@pytest.mark.only_where(SELECTED.topology, "needs Slurm 25.05+: see test_topology_needs_slurm_25_05")
@pytest.mark.parametrize("hint", HINTS)
async def test_topology_is_back_at_once_after_a_reconfigure_and_a_restart(
    topology_rig: Rig, hint: str
) -> None:
    """The real node (in topology.yaml's block b-seed) labelled into b1 beside a dynamic node: a reload puts
    it back into b-seed (the dynamic node keeps its block); the syncer moves it into b1 again and a job that
    needs a two-node block runs on both."""
    rig = topology_rig
    real = rig.sandbox.real_node
    with real_nodes(rig, 1) as (a,):
        for name in (a, real):
            rig.bind_pod(name, node_labels={NVLINK: "b1"})

        async def in_b1() -> bool:
            return unit_nodes(rig, BLOCK_TOPOLOGY, "BlockName", "b1") == {a, real}

        async with running_syncer(
            rig, FAST.replace(attributes=ATTRIBUTES), slurm_metrics_url=metrics_url(rig, hint)
        ) as service:
            assert service.attributes is not None
            writes = service.attributes.stats.writes
            await wait_for(in_b1, 10, what="both nodes in block b1")
            for how in ("reconfigure", "restart"):
                await hint_as_asked(service, hint)
                before = writes["topology", "ok"]
                done = await reload_slurmctld(rig, service, how)
                await wait_for(more_than(writes, "topology", before), 10, what=f"topology rewritten ({how})")
                await wait_for(in_b1, 10, what=f"both nodes back in b1 ({how})")
                print(f"topology back {time.monotonic() - done:.2f} s after the {how} (hint {hint})")
                job = run_job(rig, "-p", BLOCK_TOPOLOGY, "-N2", "--segment=2")
                assert hostnames(rig, await ran_on(rig, job)) == {a, real}
