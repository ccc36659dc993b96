"""Two releases in one Kubernetes cluster (issue 45 item 3): release A on the power sandbox and release B on a
Slurm of its own, both in one namespace (the chart's default scope), each with a SlurmPartition and a power
NodeSet labelled with its cluster identity. A scenario of tests/e2e/test_nodeset_power.py's side-by-side run:
its wait for slurmctld's 30 s power-up check overlaps theirs. Before cluster identities, B created A's
partition in its Slurm, declared A's members there and deleted A's pod under a running job."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncer.app.service import SyncerService
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.controllers.partitions.options import PartitionOptions
from syncer.model.cluster import LABEL, partition_finalizer
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.partitions import PartitionState
from syncer.testing.sandbox import Sandbox, up
from syncer.testing.slurmd_standin import SlurmdStandIn
from tests.e2e.power_safety import job_state, submit, until_told
from tests.e2e.rig import Rig, running_syncer, sync
from tests.e2e.test_nodeset import GROUP, VERSION, end_jobs, ensure_pool
from tests.e2e.test_nodeset_power import SLOW_S, Ports, power_body, wait_slurm
from tests.fixtures.slurm import SELECTED
from tests.helpers import wait_for

NAMESPACE = "two-rel"  # both releases' NodeSets and pods, as two chart installs in one namespace
A, B = "tr-a", "tr-b"  # the releases' cluster identities
PARTITIONS = "slurmpartitions"


def nodeset_body(name: str, release: str, feature: str) -> dict[str, Any]:
    body: dict[str, Any] = power_body(name, 1, (feature,))
    body["metadata"].update(namespace=NAMESPACE, labels={LABEL: release})
    return body


def partition_body(name: str, release: str | None, spec: dict[str, Any]) -> dict[str, Any]:
    labels = {LABEL: release} if release else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def of_nodeset(name: str) -> dict[str, Any]:
    return {"nodes": {"nodeSets": [{"namespace": NAMESPACE, "name": name}]}}


async def partitions(reader: SlurmClient) -> dict[str, PartitionState]:
    return {p.name: p for p in await reader.partition_states()}


async def node_names(reader: SlurmClient, prefix: str) -> set[str]:
    return {n.name for n in (await reader.list_all_nodes()).nodes if n.name.startswith(prefix)}


def cr(rig: Rig, name: str) -> dict[str, Any]:
    return dict(rig.kube.get(GROUP, VERSION, PARTITIONS, name) or {})


def delete_cr(rig: Rig, name: str) -> None:
    with contextlib.suppress(Exception):
        rig.kube.api.delete(rig.kube.api.resource(GROUP, VERSION, PARTITIONS), "", name)


def pods(rig: Rig, nodeset: str) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in rig.kube.api.store.objects_of(("", "pods"), NAMESPACE)
        if (p["metadata"].get("labels") or {}).get("slurm-syncer.dev/nodeset") == nodeset
    }


async def stop_sandbox(starting: asyncio.Future[Sandbox]) -> None:
    """B's Slurm down, once its start has ended (one still starting is waited for: nothing left running)."""
    try:
        sandbox = await starting
    except Exception:  # it did not start: nothing to stop (the test failed where it awaited it)
        return
    await asyncio.to_thread(sandbox.down)


def release(rig: Rig, name: str, ports: Ports) -> Any:
    return running_syncer(
        # not adopting: the module's syncer beside them takes the unlabelled CRs, its scenarios' too (one
        # release adopts, as docs/operations.md advises for several)
        rig, namespace=NAMESPACE, cluster_name=name, lease_name=name, adopt_unlabelled=False,
        sync=sync(max_drain_fraction=1.0),
        nodeset=NodeSetOptions(requeue_s=0.5, power_ports=ports), partitions=PartitionOptions(enabled=True),
    )  # fmt: skip


def cleanup(rig: Rig) -> None:
    """The Kubernetes objects (both Slurms go with their sandboxes), and the unlabelled CR's partition where
    the module's own syncer took it."""
    for name in ("tra-part", "trb-part", "tru-part"):
        with contextlib.suppress(Exception):
            rig.kube.patch(GROUP, VERSION, PARTITIONS, name, {"metadata": {"finalizers": None}})
        delete_cr(rig, name)
    for name in ("tra", "trb"):
        with contextlib.suppress(Exception):
            rig.kube.api.delete(rig.kube.api.resource(GROUP, VERSION, "nodesets"), NAMESPACE, name)
    with contextlib.suppress(Exception):
        rig.scontrol("delete", "partitionname=tru-part")


async def slurm_of(stack: contextlib.AsyncExitStack, rig: Rig, starting: asyncio.Future[Sandbox]) -> Rig:
    """A release's Slurm once started, with a reader of its own; stopped with the stack."""
    sandbox = await starting
    reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    stack.push_async_callback(reader.close)
    await reader.start()
    return Rig(sandbox, rig.kube, rig.kubeconfig, reader)


async def two_releases_in_one_kubernetes_never_take_each_others_objects(
    rig: Rig, service: SyncerService
) -> None:
    """Item 3: A's partition exists in Slurm A only, and B leaves its own cluster's same-named partition (an
    admin's) as it was; neither declares the other's members; a job runs on A's member throughout and its pod
    stays; each CR carries its own release's finalizer only, and deleting A's CR removes A's partition and
    finalizer alone. An unlabelled CR is taken by the one release that adopts (the module's syncer), and only
    its Slurm gets the partition. Each release
    has a Slurm of its own (two syncers sharing one Slurm fight over its drains: not a setup to test here),
    both started at once; B's starts while A's member powers up for the job."""
    if rig.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        rig.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    ensure_pool(rig)
    ports = Ports()
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(cleanup, rig)  # last, once every syncer has stopped
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="two-rel-")))
        starting = [
            asyncio.ensure_future(
                asyncio.to_thread(up, tmp / name, nodes=0, slurm=SELECTED.name, keep_partitions=True)
            )
            for name in (A, B)
        ]  # each release's Slurm (KeepPartInfo, as partitions need)
        for each in starting:
            stack.push_async_callback(stop_sandbox, each)
        rig_a = await slurm_of(stack, rig, starting[0])
        wrap, tell = until_told(rig_a, "tra-job")
        stack.callback(tell)
        standin = await stack.enter_async_context(
            SlurmdStandIn(rig.kube, rig_a.sandbox, boot=True, port_of=ports, namespace=NAMESPACE)
        )
        await stack.enter_async_context(release(rig_a, A, ports))
        rig.kube.create(GROUP, VERSION, "nodesets", nodeset_body("tra", A, "tra"), namespace=NAMESPACE)
        rig.kube.create(GROUP, VERSION, PARTITIONS, partition_body("tra-part", A, of_nodeset("tra")))
        await wait_slurm(lambda: has_node(rig_a.reader, "tra-0"), SLOW_S, "A's member declared")
        job = await submit(rig_a, "--no-requeue", "-N", "1", "--constraint=tra", "--wrap", wrap)
        rig_b = await slurm_of(stack, rig, starting[1])
        # an admin's partition in Slurm B under the name of A's CR
        rig_b.scontrol("create", "partitionname=tra-part", f"nodes={rig_b.sandbox.real_node}", "maxtime=60")
        admins = (await partitions(rig_b.reader))["tra-part"]
        service_b = await stack.enter_async_context(release(rig_b, B, Ports()))
        rig.kube.create(GROUP, VERSION, "nodesets", nodeset_body("trb", B, "trb"), namespace=NAMESPACE)
        rig.kube.create(GROUP, VERSION, PARTITIONS, partition_body("trb-part", B, of_nodeset("trb")))
        hosts = {"nodes": {"hosts": [rig.sandbox.real_node]}}  # the same name in every sandbox
        rig.kube.create(GROUP, VERSION, PARTITIONS, partition_body("tru-part", None, hosts))
        try:
            await story(rig_a, rig_b, (rig, service), service_b, admins, job, tell)
        finally:
            tell()
            await end_jobs(rig_a, "tra-")
        assert not standin.failures, standin.failures


async def story(
    rig: Rig,
    rig_b: Rig,
    module: tuple[Rig, SyncerService],
    service_b: SyncerService,
    admins: PartitionState,
    job: str,
    tell: Callable[[], None],
) -> None:
    """`rig` is A's (its Slurm), `rig_b` B's; `module` the module's own syncer and Slurm, a third release,
    the one that adopts."""
    reader_b = rig_b.reader

    async def each_has_its_own() -> bool:
        mine_a, mine_b = await partitions(rig.reader), await partitions(reader_b)
        return (
            mine_a.get("tra-part") is not None and mine_a["tra-part"].nodes == {"tra-0"}
            and mine_b.get("trb-part") is not None and mine_b["trb-part"].nodes == {"trb-0"}
        )  # fmt: skip

    await wait_slurm(each_has_its_own, SLOW_S, "each release's partition over its own member")
    await wait_slurm(lambda: job_is(rig, job, "RUNNING"), 150, "the job running on A's member, powered up")
    pod = pods(rig, "tra").get("tra-0")
    assert pod is not None, "A's pod deleted under its running job"
    assert pod["metadata"]["labels"][LABEL] == A, pod["metadata"]["labels"]
    # B has had its chance: passes of its own NodeSet after the job started
    await passes_of(service_b, "trb", count=3)
    assert await node_names(reader_b, "tra-") == set(), "B declared A's members"
    assert f"{NAMESPACE}/tra-0" not in service_b.kube_cache.pods.items, "B keeps A's pod in its caches"
    assert service_b.nodesets is not None and f"{NAMESPACE}/tra" not in service_b.nodesets.informer.items
    assert await node_names(rig.reader, "trb-") == set(), "A declared B's members"
    assert "trb-part" not in await partitions(rig.reader)
    assert (await partitions(reader_b))["tra-part"] == admins, "B touched its admin's partition"
    assert (pods(rig, "tra").get("tra-0") or {}).get("metadata", {}).get("uid") == pod["metadata"]["uid"]
    # a pod of A's made before the label existed (its label taken off): A labels it again
    rig.kube.patch("", "v1", "pods", "tra-0", {"metadata": {"labels": {LABEL: None}}}, namespace=NAMESPACE)
    await wait_for(
        lambda: (pods(rig, "tra").get("tra-0") or {}).get("metadata", {}).get("labels", {}).get(LABEL) == A,
        deadline_s=SLOW_S, what="A's label back on its pod",
    )  # fmt: skip
    assert await job_state(rig, job) == "RUNNING"
    assert cr(rig, "tra-part")["metadata"]["finalizers"] == [partition_finalizer(A)]
    assert cr(rig, "trb-part")["metadata"]["finalizers"] == [partition_finalizer(B)]
    # the unlabelled CR: the adopting release took it, and only its Slurm has the partition
    await wait_for(
        lambda: bool((cr(rig, "tru-part")["metadata"].get("labels") or {}).get(LABEL)),
        deadline_s=SLOW_S, what="the unlabelled CR taken by a release",
    )  # fmt: skip
    taker = cr(rig, "tru-part")["metadata"]["labels"][LABEL]
    assert taker == module[1].config.cluster_name, "a release that does not adopt took it"
    assert cr(rig, "tru-part")["metadata"].get("finalizers") in (None, [partition_finalizer(taker)])
    readers = {A: rig.reader, B: reader_b, module[1].config.cluster_name: module[0].reader}
    await wait_slurm(lambda: has(readers[taker], "tru-part"), SLOW_S, f"the partition in {taker}'s Slurm")
    assert [name for name, reader in readers.items() if await has(reader, "tru-part")] == [taker]
    delete_cr(rig, "tru-part")
    # deleting A's CR removes A's partition and A's finalizer alone
    delete_cr(rig, "tra-part")
    await wait_for(lambda: not cr(rig, "tra-part"), deadline_s=SLOW_S, what="A's CR gone")
    await wait_slurm(lambda: lacks(rig.reader, "tra-part"), SLOW_S, "A's partition gone from Slurm A")
    assert (await partitions(reader_b))["tra-part"] == admins
    assert cr(rig, "trb-part")["metadata"]["finalizers"] == [partition_finalizer(B)]
    assert "trb-part" in await partitions(reader_b)
    assert await job_state(rig, job) == "RUNNING"
    tell()
    await wait_slurm(lambda: job_is(rig, job, "COMPLETED"), SLOW_S, "the job completed")
    delete_cr(rig, "trb-part")
    await wait_for(lambda: not cr(rig, "trb-part"), deadline_s=SLOW_S, what="B's CR gone")
    await wait_for(lambda: not cr(rig, "tru-part"), deadline_s=SLOW_S, what="the unlabelled CR gone")


async def job_is(rig: Rig, job: str, state: str) -> bool:
    return await job_state(rig, job) == state


async def has(reader: SlurmClient, name: str) -> bool:
    return name in await partitions(reader)


async def has_node(reader: SlurmClient, name: str) -> bool:
    return name in await node_names(reader, name)


async def lacks(reader: SlurmClient, name: str) -> bool:
    return name not in await partitions(reader)


async def passes_of(service: SyncerService, nodeset: str, count: int) -> None:
    """Until `count` more reconciles of the release's own NodeSet are done: an assertion that it did nothing
    to another's is then about a release that had its chance."""
    assert service.nodesets is not None
    stats, key = service.nodesets.stats, f"{NAMESPACE}/{nodeset}"
    first = stats.passes.get(key, 0)
    await wait_for(
        lambda: stats.passes.get(key, 0) >= first + count, deadline_s=SLOW_S, what=f"{count} passes of {key}"
    )


SCENARIOS = (two_releases_in_one_kubernetes_never_take_each_others_objects,)
