"""The syncer's Kubernetes layer against the emulator: informers, writers, events, leader election."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from structlog.testing import capture_logs

from syncer.control.gate import NotLeader, WriteGate
from syncer.kube import (
    EventRecorder,
    KubeCache,
    KubeClient,
    KubeWriter,
    LeaderElector,
    ObjectRef,
    node_path,
    pod_path,
)
from syncer.kube.errors import KubeError
from syncer.kube.informer import Informer
from syncer.kube.scheduler_pods import SchedulerPods
from syncer.model.keys import Keys
from syncer.model.kube import Condition, KubeNode
from syncer.runtime.backoff import Backoff
from syncer.runtime.tasks import cancel_and_wait
from syncer.testing.kubeapi import KubeApiEmulator, SeedOptions
from tests.helpers import wait_for

pytestmark = pytest.mark.kube
T = TypeVar("T")


def must(value: T | None) -> T:
    assert value is not None
    return value


@pytest.fixture
async def kube_client(kube_api: KubeApiEmulator, kubeconfig: Path) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_config(str(kubeconfig), qps=500, burst=500)
    try:
        yield client
    finally:
        await client.close()


def slurmd_pod(name: str, slurm_node: str, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {Keys.NODE_NAME_LABEL: slurm_node}},
        "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
    }


def _has_label(cache: KubeCache, node: str, key: str, value: str) -> Callable[[], bool]:
    return lambda: must(cache.node(node)).labels.get(key) == value


@pytest.fixture
async def cache(kube_api: KubeApiEmulator, kube_client: KubeClient) -> AsyncIterator[KubeCache]:
    kube_cache = KubeCache(kube_client, inactivity_timeout_s=5)
    kube_cache.start()
    await asyncio.wait_for(kube_cache.wait_synced(), 10)
    try:
        yield kube_cache
    finally:
        await kube_cache.stop()


async def test_missing_kubeconfig_is_a_clear_error(tmp_path: Path):
    with pytest.raises(KubeError) as raised:
        await KubeClient.from_config(str(tmp_path / "nope"))
    assert "cannot load Kubernetes credentials" in str(raised.value) and "nope" in str(raised.value)


async def test_cache_indexes_pods_and_nodes_and_reports_keys(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    kube_api.seed(SeedOptions(nodes=3))
    kube_api.create("", "v1", "pods", slurmd_pod("slurmd-a", "gpu-001", "node-0000"), "default")
    kube_api.create(
        "", "v1", "pods", {"metadata": {"name": "unrelated"}, "spec": {"nodeName": "node-0001"}}, "default"
    )
    cache = KubeCache(kube_client)
    seen: list[set[str]] = []
    cache.subscribe(seen.append)
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        assert [p.name for p in cache.pods_for("gpu-001")] == ["slurmd-a"]
        assert len(cache.pods.items) == 1  # only labelled pods are cached
        assert set(cache.nodes.items) == {"node-0000", "node-0001", "node-0002"}
        # a cordon of the pod's Node is reported under the Slurm node name
        seen.clear()
        kube_api.patch("", "v1", "nodes", "node-0000", {"spec": {"unschedulable": True}})
        await wait_for(lambda: {"gpu-001"} in seen, what="cordon reported as gpu-001")
        assert must(cache.node("node-0000")).unschedulable
        # a node-bound Slurm node: the Node itself carries the label
        kube_api.patch(
            "", "v1", "nodes", "node-0002", {"metadata": {"labels": {Keys.NODE_NAME_LABEL: "cpu-7"}}}
        )
        await wait_for(
            lambda: [n.name for n in cache.nodes_for("cpu-7")] == ["node-0002"], what="node-bound index"
        )
        # relabelling a pod moves it between Slurm names and reports both
        seen.clear()
        kube_api.patch(
            "",
            "v1",
            "pods",
            "slurmd-a",
            {"metadata": {"labels": {Keys.NODE_NAME_LABEL: "gpu-002"}}},
            namespace="default",
        )
        await wait_for(
            lambda: any({"gpu-001", "gpu-002"} <= keys for keys in seen), what="both names reported"
        )
        assert cache.pods_for("gpu-001") == [] and [p.name for p in cache.pods_for("gpu-002")] == ["slurmd-a"]
    finally:
        await cache.stop()


def claimed_from_scratch(cache: KubeCache) -> set[str]:
    """The claimed Slurm node names rebuilt from the informers' stores, as `slurm_names()` once did."""
    labels = [p.labels for p in cache.pods.items.values()] + [n.labels for n in cache.nodes.items.values()]
    names = {found for found in (each.get(Keys.NODE_NAME_LABEL, "") for each in labels) if found}
    if cache.bind_by_node_name:
        names |= set(cache.nodes.items)
    rebuilt = set(cache.pods_by_slurm_node) | set(cache.nodes_by_slurm_node)
    assert rebuilt | (set(cache.nodes.items) if cache.bind_by_node_name else set()) == names
    return names


def caught_up(kube_api: KubeApiEmulator, cache: KubeCache) -> bool:
    """The cache holds exactly what the API server stores (labelled pods, all Nodes), version for version."""
    store = kube_api.api.store
    pods = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["resourceVersion"]
        for p in store.objects_of(("", "pods"))
        if Keys.NODE_NAME_LABEL in (p["metadata"].get("labels") or {})
    }
    nodes = {n["metadata"]["name"]: n["metadata"]["resourceVersion"] for n in store.objects_of(("", "nodes"))}
    return {k: p.resource_version for k, p in cache.pods.items.items()} == pods and {
        k: n.resource_version for k, n in cache.nodes.items.items()
    } == nodes


def label(kube_api: KubeApiEmulator, plural: str, name: str, slurm_node: str | None) -> None:
    body = {"metadata": {"labels": {Keys.NODE_NAME_LABEL: slurm_node}}}
    kube_api.patch("", "v1", plural, name, body, namespace="default" if plural == "pods" else "")


def delete(kube_api: KubeApiEmulator, plural: str, name: str) -> None:
    resource = kube_api.api.resource("", "v1", plural)
    kube_api.api.delete(resource, "default" if plural == "pods" else "", name, {"gracePeriodSeconds": 0})


@pytest.mark.parametrize("bind_by_node_name", [False, True], ids=["labels", "node-names"])
async def test_claimed_names_index_equals_the_union_rebuilt_from_scratch(
    kube_api: KubeApiEmulator, kube_client: KubeClient, bind_by_node_name: bool
):
    kube_api.seed(SeedOptions(nodes=3))
    kube_api.create("", "v1", "pods", slurmd_pod("slurmd-a", "gpu-001", "node-0000"), "default")
    cache = KubeCache(kube_client, bind_by_node_name=bind_by_node_name, inactivity_timeout_s=5)
    cache.start()
    nodes = {"node-0000", "node-0001", "node-0002"}
    names = cache.slurm_names()  # a live view: taken once, read after every step

    async def expect(claimed: set[str], by_node_name: set[str], what: str) -> None:
        await wait_for(lambda: caught_up(kube_api, cache), what=f"cache caught up: {what}")
        want = claimed | (by_node_name if bind_by_node_name else set())
        assert set(names) == claimed_from_scratch(cache) == want, what
        assert len(names) == len(want) and all(name in names for name in want)
        assert "no-such-name" not in names

    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        assert names == cache.slurm_names() and not hasattr(names, "add")  # read-only
        await expect({"gpu-001"}, nodes, "first list")
        # adds: two pods on one name, a pod and a Node on one name, a Node named like a claimed name
        kube_api.create("", "v1", "pods", slurmd_pod("slurmd-b", "gpu-001", "node-0001"), "default")
        kube_api.create("", "v1", "pods", slurmd_pod("slurmd-c", "gpu-002", "node-0001"), "default")
        label(kube_api, "nodes", "node-0001", "gpu-002")
        label(kube_api, "nodes", "node-0002", "cpu-7")
        kube_api.create("", "v1", "nodes", {"metadata": {"name": "gpu-001"}})
        nodes.add("gpu-001")
        await expect({"gpu-001", "gpu-002", "cpu-7"}, nodes, "adds")
        # label changes: a name keeps its other claimants; a pod that loses the label leaves the cache
        label(kube_api, "pods", "slurmd-a", "gpu-003")
        label(kube_api, "nodes", "node-0002", "cpu-8")
        label(kube_api, "pods", "slurmd-c", None)
        await expect({"gpu-001", "gpu-002", "gpu-003", "cpu-8"}, nodes, "label changes")
        # deletes
        delete(kube_api, "pods", "slurmd-b")
        delete(kube_api, "nodes", "node-0001")
        delete(kube_api, "nodes", "gpu-001")
        nodes -= {"node-0001", "gpu-001"}
        await expect({"gpu-003", "cpu-8"}, nodes, "deletes")
        # re-list: changes made while the watches are down and history is compacted arrive as the
        # differences between the old store and a fresh list
        relists = cache.pods.stats.relists_after_gone + cache.nodes.stats.relists_after_gone
        kube_api.faults.pause()
        kube_api.drop_watches()
        kube_api.create("", "v1", "pods", slurmd_pod("slurmd-d", "gpu-004", "node-0000"), "default")
        label(kube_api, "pods", "slurmd-a", "gpu-005")
        delete(kube_api, "nodes", "node-0002")
        kube_api.create(
            "", "v1", "nodes", {"metadata": {"name": "node-0003", "labels": {Keys.NODE_NAME_LABEL: "cpu-9"}}}
        )
        nodes = (nodes - {"node-0002"}) | {"node-0003"}
        kube_api.compact()
        kube_api.faults.resume()
        await expect({"gpu-004", "gpu-005", "cpu-9"}, nodes, "re-list")
        assert cache.pods.stats.relists_after_gone + cache.nodes.stats.relists_after_gone > relists
        # churn: random adds, relabels, unlabels, deletes and status-only changes over few names, so
        # names gain and lose claimants of both kinds many times
        rng = random.Random(7)
        slurm_pool = ["s0", "s1", "s2", "n1"]  # "n1" is also a Node's name
        for step in range(120):
            store = kube_api.api.store
            pods = {p["metadata"]["name"] for p in store.objects_of(("", "pods"), "default")}
            node_names = {n["metadata"]["name"] for n in store.objects_of(("", "nodes"))}
            plural, pool = rng.choice([("pods", [f"p{i}" for i in range(5)]), ("nodes", ["n0", "n1", "n2"])])
            name = rng.choice(pool)
            exists = name in (pods if plural == "pods" else node_names)
            slurm_node = rng.choice([*slurm_pool, None])
            if not exists:
                labels = {Keys.NODE_NAME_LABEL: slurm_node} if slurm_node else {}
                body: dict[str, Any] = {"metadata": {"name": name, "labels": labels}}
                if plural == "pods":
                    body["spec"] = {"containers": [{"name": "slurmd", "image": "slurmd"}]}
                kube_api.create("", "v1", plural, body, "default" if plural == "pods" else "")
            elif rng.random() < 0.25:
                delete(kube_api, plural, name)
            elif plural == "nodes" and rng.random() < 0.3:
                kube_api.set_node_condition(name, "Ready", rng.choice(["True", "False"]))
            else:
                label(kube_api, plural, name, slurm_node)
            if step % 10 == 9:
                await wait_for(lambda: caught_up(kube_api, cache), what=f"cache caught up at step {step}")
                assert set(names) == claimed_from_scratch(cache), f"step {step}"
    finally:
        await cache.stop()


async def test_informer_survives_dropped_watches_and_compaction(kube_api: KubeApiEmulator, cache: KubeCache):
    kube_api.seed(SeedOptions(nodes=2))
    await wait_for(lambda: len(cache.nodes.items) == 2, what="seeded nodes via watch")
    for round_ in range(3):
        kube_api.drop_watches()
        kube_api.patch("", "v1", "nodes", "node-0000", {"metadata": {"labels": {"round": str(round_)}}})
        await wait_for(_has_label(cache, "node-0000", "round", str(round_)), what="change after drop")
    lists_before = cache.nodes.stats.lists
    kube_api.compact()
    kube_api.drop_watches()
    kube_api.patch("", "v1", "nodes", "node-0001", {"spec": {"unschedulable": True}})
    await wait_for(lambda: must(cache.node("node-0001")).unschedulable, what="change after compaction")
    kube_api.patch("", "v1", "nodes", "node-0001", {"metadata": {"annotations": {"late": "1"}}})
    kube_api.api.store.compact()
    await wait_for(lambda: must(cache.node("node-0001")).annotations.get("late") == "1", what="annotation")
    assert cache.nodes.stats.lists >= lists_before
    # a change the Node watch does not see: bookmarks carry only versions newer than the watch has seen
    kube_api.create("", "v1", "configmaps", {"metadata": {"name": "news"}}, namespace="default")
    await wait_for(lambda: cache.nodes.stats.bookmarks > 0, what="a bookmark on a quiet watch")


async def test_informer_relists_on_410_and_misses_nothing(kube_api: KubeApiEmulator, kube_client: KubeClient):
    kube_api.seed(SeedOptions(nodes=1))
    cache = KubeCache(kube_client)
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        kube_api.faults.pause()  # the informer's next watch hangs while history moves on and is compacted
        kube_api.drop_watches()
        kube_api.seed(SeedOptions(nodes=0))
        kube_api.create("", "v1", "nodes", {"metadata": {"name": "late-node"}})
        kube_api.compact()
        kube_api.faults.resume()
        await wait_for(lambda: cache.node("late-node") is not None, what="node created during the outage")
        assert cache.nodes.stats.relists_after_gone >= 1
    finally:
        await cache.stop()


async def test_informer_backs_off_on_errors_and_recovers(kube_api: KubeApiEmulator, kube_client: KubeClient):
    kube_api.seed(SeedOptions(nodes=1))
    kube_api.faults.fail_next(6, 500)
    cache = KubeCache(kube_client)
    cache.start()
    try:
        await asyncio.wait_for(cache.wait_synced(), 20)
        assert cache.node("node-0000") is not None
    finally:
        await cache.stop()


async def test_a_watch_that_worked_for_a_while_starts_its_backoff_anew(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    """Failed watches in a row back off more each time. One that delivered a change and stayed open at least
    as long as its failure's wait would be is the first failure of a new run, retried after the first delay:
    counting every drop since the start kept a healthy informer away for seconds once the server was fine,
    and drains wait for it (the fault benchmark's Kubernetes API scenario converged 6 s after its last
    fault). One dropped as soon as it delivered (a flapping server) still counts in the run: not hammered."""
    kube_api.seed(SeedOptions(nodes=1))
    informer: Informer[KubeNode] = Informer(kube_client, "/api/v1/nodes", "Node", lambda node: node.name)
    informer.backoff = Backoff(0.05, 2.0)  # ceilings 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, ...
    task = asyncio.create_task(informer.run())

    def delays() -> list[float]:
        return [e["delay_s"] for e in logs if e["event"] == "kubernetes watch failed, retrying"]

    async def through_the_watch(name: str) -> float:
        kube_api.create("", "v1", "nodes", {"metadata": {"name": name}})
        await wait_for(lambda: name in informer.items, what=f"{name} through the watch")
        return time.monotonic()

    def watching_after(failures: int) -> Callable[[], bool]:
        return lambda: len(delays()) == failures and informer.current

    try:
        with capture_logs() as logs:
            await through_the_watch("before-the-outage")
            kube_api.faults.fail_next(4, 500)  # the next watches fail: no word from the server
            kube_api.drop_watches()
            await wait_for(watching_after(5), what="the outage over")
            assert delays()[0] <= 0.05 and delays()[-1] >= 0.4, delays()  # the 5th wait: 0.4-0.8 s
            # flapping: dropped as soon as it delivered (open far less than the 6th wait's ceiling, 1.6 s)
            await through_the_watch("flap")
            kube_api.drop_watches()
            await wait_for(watching_after(6), what="watching after the flap")
            assert delays()[-1] >= 0.8, delays()
            # fine again: a watch open longer than the 7th wait's ceiling (2 s), then dropped
            seen = await through_the_watch("worked")
            await wait_for(lambda: time.monotonic() - seen >= 2.0, 10, what="the watch open for 2 s")
            kube_api.drop_watches()
            await wait_for(watching_after(7), what="watching after a drop")
            assert delays()[-1] <= 0.05, delays()
    finally:
        await cancel_and_wait([task])


async def test_requests_failing_together_do_not_retry_in_lock_step(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    """Reads failing at once (an API server restarting) are retried by the runtime's one retry loop:
    after a jittered backoff, spread out, not all at the same instant; a 429's Retry-After is honoured."""
    kube_api.seed(SeedOptions(nodes=1))
    readers = 16
    kube_api.server.record_requests = True
    kube_api.faults.fail_next(readers, 500)
    answers = await asyncio.gather(*(kube_client.get("/api/v1/nodes/node-0000") for _ in range(readers)))
    assert all(a["metadata"]["name"] == "node-0000" for a in answers)
    times = [at for at, method, path in kube_api.server.requests if path.endswith("/nodes/node-0000")]
    failed, retried = times[:readers], times[readers:]
    assert len(retried) == readers
    # jitter spreads the first retries over half the first delay (0.1 to 0.2 s after the failure)
    assert max(retried) - min(retried) >= 0.04, [round(t - min(failed), 3) for t in retried]
    assert min(retried) - max(failed) >= 0.05
    kube_api.server.requests.clear()
    kube_api.faults.fail_next(1, 429, retry_after_s=1)
    await kube_client.get("/api/v1/nodes/node-0000")
    first, second = [at for at, _, path in kube_api.server.requests if path.endswith("/nodes/node-0000")]
    assert second - first >= 0.9


async def test_a_silent_watch_ends_quietly_and_is_watched_again(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    """Nothing changes and no bookmark comes for longer than the inactivity timeout (a quiet resource): the
    stream is ended and watched again at once, not counted as a failure (no warning, no backoff)."""
    kube_api.seed(SeedOptions(nodes=1))
    informer: Informer[KubeNode] = Informer(
        kube_client, "/api/v1/nodes", "Node", lambda node: node.name, inactivity_timeout_s=0.3
    )
    task = asyncio.create_task(informer.run())
    try:
        await wait_for(lambda: informer.stats.watch_restarts >= 3, deadline_s=10, what="three silent watches")
        assert (informer.stats.errors, informer.stats.lists) == (0, 1)
        kube_api.create("", "v1", "nodes", {"metadata": {"name": "after-the-silence"}})
        await wait_for(lambda: "after-the-silence" in informer.items, deadline_s=5, what="the next change")
    finally:
        await cancel_and_wait([task])


async def test_undecodable_watch_event_is_skipped_not_fatal(kube_api: KubeApiEmulator, cache: KubeCache):
    kube_api.create(
        "",
        "v1",
        "nodes",
        {"metadata": {"name": "odd", "labels": {"x": "1"}}, "spec": {"unschedulable": "yes"}},
    )
    kube_api.create("", "v1", "nodes", {"metadata": {"name": "fine"}})
    await wait_for(lambda: cache.node("fine") is not None, what="the next good event")
    assert cache.node("odd") is None


async def test_a_burst_of_changes_reaches_a_watch_in_a_few_loop_turns(
    kube_api: KubeApiEmulator, cache: KubeCache
):
    """A watch is handed every change queued for it at once, as kube-apiserver hands over a backlog. Taken one
    by one, each change of any kind cost the emulator three event-loop turns per open watch; in the
    side-by-side power test at load 16-20 the pod informer fell 15-30 s behind and kept pods the server had
    deleted (each write to them a 404, a NodeSet's record kept past its ceiling). In turns, not time."""
    kube_api.create("", "v1", "pods", slurmd_pod("gone", "s-gone", "n-1"), namespace="default")
    await wait_for(lambda: bool(cache.pods_for("s-gone")), what="the pod in the cache")
    for i in range(300):  # changes the pod watch does not match but must look through
        kube_api.create("", "v1", "configmaps", {"metadata": {"name": f"burst-{i}"}}, namespace="default")
    kube_api.api.delete(kube_api.api.resource("", "v1", "pods"), "default", "gone", {"gracePeriodSeconds": 0})
    turns = 0
    while cache.pods_for("s-gone"):
        turns += 1
        assert turns <= 100, "the deletion is still on its way after 100 event-loop turns"
        await asyncio.sleep(0)


async def test_writer_patches_with_resource_version_and_retries_conflicts(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    kube_api.seed(SeedOptions(nodes=1))
    writer = KubeWriter(kube_client, WriteGate(always_leader=True))
    stale = await kube_client.get(node_path("node-0000"))
    kube_api.patch("", "v1", "nodes", "node-0000", {"metadata": {"annotations": {"other": "x"}}})
    await writer.set_annotations(
        node_path("node-0000"), {Keys.STATE: "IDLE+DRAIN", Keys.REASON: None}, current=stale
    )
    assert writer.stats.conflicts == 1 and writer.stats.writes == 1
    assert kube_client.errors == {("PATCH", 409): 1}  # exported by method and status (metrics.py)
    assert kube_client.errors_by_status == {409: 1}
    annotations = must(kube_api.node("node-0000"))["metadata"]["annotations"]
    assert annotations == {"other": "x", Keys.STATE: "IDLE+DRAIN"}
    # nothing to change: no request at all
    await writer.set_annotations(node_path("node-0000"), {Keys.STATE: "IDLE+DRAIN"})
    assert writer.stats.writes == 1 and writer.stats.noops == 1


async def running_pod_and_writer(kube_api: KubeApiEmulator, kube_client: KubeClient) -> KubeWriter:
    """Node node-0000 with the running pod default/slurmd-a, and a writer that may write."""
    kube_api.seed(SeedOptions(nodes=1))
    kube_api.create("", "v1", "pods", slurmd_pod("slurmd-a", "gpu-001", "node-0000"), "default")
    await wait_for(
        lambda: (kube_api.pod("default", "slurmd-a") or {}).get("status", {}).get("phase") == "Running"
    )
    return KubeWriter(kube_client, WriteGate(always_leader=True))


async def test_writer_sets_conditions_on_pod_and_node_status(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    writer = await running_pod_and_writer(kube_api, kube_client)
    drained = Condition(type=Keys.CONDITION_DRAINED, status="True", reason="Drained", message="k8s: cordon")
    for path in (pod_path("default", "slurmd-a"), node_path("node-0000")):
        await writer.set_conditions(path, [drained], "2026-11-22T10:00:00Z")
    pod_conditions = {
        c["type"]: c["status"] for c in must(kube_api.pod("default", "slurmd-a"))["status"]["conditions"]
    }
    node_conditions = {
        c["type"]: c["status"] for c in must(kube_api.node("node-0000"))["status"]["conditions"]
    }
    assert pod_conditions["SlurmNodeDrained"] == "True" and pod_conditions["Ready"] == "True"
    assert node_conditions == {"Ready": "True", "SlurmNodeDrained": "True"}
    # same status, new message: the transition time stays
    again = Condition(type=Keys.CONDITION_DRAINED, status="True", reason="Drained", message="k8s: other")
    await writer.set_conditions(node_path("node-0000"), [again], "2026-11-22T11:00:00Z")
    stored = next(
        c for c in must(kube_api.node("node-0000"))["status"]["conditions"] if c["type"] == "SlurmNodeDrained"
    )
    assert stored["message"] == "k8s: other" and stored["lastTransitionTime"] == "2026-11-22T10:00:00Z"


async def test_annotations_and_conditions_go_in_one_status_write(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    """pods/status and nodes/status accept metadata changes (kube-apiserver's status strategies for
    these kinds reset only spec): the Slurm state's annotations and conditions cost one write per object."""
    writer = await running_pod_and_writer(kube_api, kube_client)
    drained = Condition(type=Keys.CONDITION_DRAINED, status="True", reason="Drained", message="storm")
    wanted = {Keys.STATE: "IDLE+DRAIN", Keys.REASON: "storm"}
    for path in (pod_path("default", "slurmd-a"), node_path("node-0000")):
        written = await writer.set_status(path, [drained], "2026-11-22T10:00:00Z", annotations=wanted)
        assert must(written)["metadata"]["annotations"] == wanted
    assert writer.stats.writes == 2
    for obj in (must(kube_api.pod("default", "slurmd-a")), must(kube_api.node("node-0000"))):
        assert obj["metadata"]["annotations"] == wanted
        assert {c["type"]: c["status"] for c in obj["status"]["conditions"]}["SlurmNodeDrained"] == "True"
    assert must(kube_api.pod("default", "slurmd-a"))["spec"]["nodeName"] == "node-0000"  # spec untouched
    # already there: no request; one key removed, the rest kept
    await writer.set_status(node_path("node-0000"), [drained], "2026-11-22T11:00:00Z", annotations=wanted)
    assert writer.stats.writes == 2 and writer.stats.noops == 1
    await writer.set_status(
        node_path("node-0000"), [], "2026-11-22T11:00:00Z", annotations={Keys.REASON: None}
    )
    assert must(kube_api.node("node-0000"))["metadata"]["annotations"] == {Keys.STATE: "IDLE+DRAIN"}


async def test_cordon_only_when_allowed(kube_api: KubeApiEmulator, kube_client: KubeClient):
    kube_api.seed(SeedOptions(nodes=1))
    writer = KubeWriter(kube_client, WriteGate(always_leader=True))
    await writer.set_unschedulable("node-0000", True, {Keys.CORDONED_BY: "slurm"})
    node = must(kube_api.node("node-0000"))
    assert (
        node["spec"]["unschedulable"] is True and node["metadata"]["annotations"][Keys.CORDONED_BY] == "slurm"
    )

    def ours(obj: dict[str, Any]) -> dict[str, Any] | None:
        return obj if (obj["metadata"].get("annotations") or {}).get(Keys.CORDONED_BY) == "slurm" else None

    kube_api.patch("", "v1", "nodes", "node-0000", {"metadata": {"annotations": {Keys.CORDONED_BY: None}}})
    await writer.set_unschedulable("node-0000", False, {Keys.CORDONED_BY: None}, only_if=ours)
    assert must(kube_api.node("node-0000"))["spec"]["unschedulable"] is True


async def test_dry_run_and_not_leader_write_nothing(kube_api: KubeApiEmulator, kube_client: KubeClient):
    kube_api.seed(SeedOptions(nodes=1))
    rv = kube_api.api.store.rv
    dry = KubeWriter(kube_client, WriteGate(dry_run=True, always_leader=True))
    assert await dry.set_annotations(node_path("node-0000"), {Keys.STATE: "IDLE"}) is None
    follower = KubeWriter(kube_client, WriteGate())
    with pytest.raises(NotLeader):
        await follower.set_annotations(node_path("node-0000"), {Keys.STATE: "IDLE"})
    assert kube_api.api.store.rv == rv


async def test_rate_limit_bounds_request_rate(kube_api: KubeApiEmulator, kubeconfig: Path):
    kube_api.seed(SeedOptions(nodes=1))
    client = await KubeClient.from_config(str(kubeconfig), qps=20, burst=5)
    try:
        started = time.monotonic()
        for _ in range(25):
            await client.get(node_path("node-0000"))
        elapsed = time.monotonic() - started
    finally:
        await client.close()
    assert elapsed >= (25 - 5) / 20 * 0.9  # the burst goes at once, the rest at 20 per second


async def test_events_are_aggregated(kube_api: KubeApiEmulator, kube_client: KubeClient):
    kube_api.seed(SeedOptions(nodes=1))
    recorder = EventRecorder(kube_client, WriteGate(always_leader=True))
    for _ in range(5):
        await recorder.record(
            ObjectRef.node("node-0000"), "Normal", "SlurmNodeDrained", "drained: k8s: cordon"
        )
    await recorder.record(ObjectRef.node("node-0000"), "Normal", "SlurmNodeUndrained", "undrained")
    events = kube_api.api.store.objects_of(("", "events"))
    by_reason = {e["reason"]: e for e in events}
    assert len(events) == 2 and by_reason["SlurmNodeDrained"]["count"] == 5
    assert by_reason["SlurmNodeDrained"]["involvedObject"]["uid"] == "node-0000"
    assert recorder.created == 2 and recorder.aggregated == 4


async def test_event_storm_is_bounded_per_object(kube_api: KubeApiEmulator, kube_client: KubeClient):
    kube_api.seed(SeedOptions(nodes=1))
    recorder = EventRecorder(kube_client, WriteGate(always_leader=True), burst_per_object=3)
    for index in range(10):
        await recorder.record(ObjectRef.node("node-0000"), "Warning", "Flap", f"flap {index}")
    assert len(kube_api.api.store.objects_of(("", "events"))) == 3 and recorder.dropped == 7


async def test_event_storm_across_objects_is_folded_into_a_summary(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    lease = ObjectRef("Lease", "slurm-syncer", "default", "", "coordination.k8s.io/v1")
    recorder = EventRecorder(
        kube_client, WriteGate(always_leader=True), storm_burst=5, storm_rate_per_s=0.0, summary_ref=lease
    )
    for index in range(30):
        await recorder.record(
            ObjectRef.pod("default", f"slurmd-{index:02d}"), "Warning", "SlurmNodeDrained", f"drained {index}"
        )
    events = kube_api.api.store.objects_of(("", "events"))
    assert len(events) == 5 and recorder.folded == 25
    await recorder.flush()
    summaries = [
        e for e in kube_api.api.store.objects_of(("", "events")) if e["involvedObject"]["kind"] == "Lease"
    ]
    assert len(summaries) == 1
    message = summaries[0]["message"]
    assert summaries[0]["reason"] == "SlurmNodeDrained" and summaries[0]["type"] == "Warning"
    assert message.startswith("25 SlurmNodeDrained Events folded into this one")
    assert "pod/default/slurmd-05" in message and "pod/default/slurmd-04" not in message
    assert message.endswith("and 5 more")  # 20 objects named, the count says the rest
    await recorder.flush()  # nothing folded since: nothing written
    assert len(kube_api.api.store.objects_of(("", "events"))) == 6


async def test_summaries_folded_before_leadership_moved_are_dropped_not_fatal(
    kube_api: KubeApiEmulator, kube_client: KubeClient
):
    gate = WriteGate()
    gate.grant(60.0)
    lease = ObjectRef("Lease", "slurm-syncer", "default", "", "coordination.k8s.io/v1")
    recorder = EventRecorder(kube_client, gate, storm_burst=1, storm_rate_per_s=0.0, summary_ref=lease)
    for index in range(3):
        await recorder.record(ObjectRef.pod("default", f"slurmd-{index}"), "Warning", "SlurmNodeDrained", "x")
    assert recorder.folded == 2
    gate.revoke()  # another replica leads now
    await recorder.flush()  # no summary from a follower, and no error that would end its loop
    assert [e["involvedObject"]["kind"] for e in kube_api.api.store.objects_of(("", "events"))] == ["Pod"]
    with pytest.raises(NotLeader):  # a follower's own Event is refused like any write
        await recorder.record(ObjectRef.pod("default", "slurmd-9"), "Warning", "SlurmNodeDrained", "x")


async def test_leader_election_single_writer_and_takeover(kube_api: KubeApiEmulator, kubeconfig: Path):
    clients = [await KubeClient.from_config(str(kubeconfig)) for _ in range(2)]
    gates = [WriteGate(), WriteGate()]
    electors = [
        LeaderElector(
            clients[i],
            gates[i],
            namespace="default",
            name="slurm-syncer",
            identity=f"syncer-{i}",
            lease_duration_s=1.5,
            renew_deadline_s=1.0,
            retry_period_s=0.2,
        )
        for i in range(2)
    ]
    tasks = [asyncio.create_task(e.run()) for e in electors]
    overlap: list[float] = []

    async def watch_overlap() -> None:
        while True:
            if gates[0].leading and gates[1].leading:
                overlap.append(time.monotonic())
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_overlap())
    try:
        await wait_for(lambda: sum(e.is_leader for e in electors) == 1, deadline_s=5, what="one leader")
        leader = next(i for i in range(2) if electors[i].is_leader)
        follower = 1 - leader
        # the leader stops renewing (as if frozen): writes stop, and the other takes over in time
        kube_api.faults.pause()
        await wait_for(lambda: not gates[leader].leading, deadline_s=3, what="stale leader closes its gate")
        kube_api.faults.resume()
        tasks[leader].cancel()
        lost_at = time.monotonic()
        await wait_for(lambda: electors[follower].is_leader, deadline_s=5, what="takeover")
        assert time.monotonic() - lost_at <= 1.5 + 1.0  # within the lease duration plus a retry
        assert not overlap, "two writers at once"
    finally:
        watcher.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, watcher, return_exceptions=True)
        for client in clients:
            await client.close()


async def test_a_renewal_answered_late_does_not_stretch_the_write_window(
    kube_api: KubeApiEmulator, kubeconfig: Path
):
    """The leader's renewal is carried out at once but answered long after: the peer, counting the lease
    duration from when it saw the renewal, takes over meanwhile. The old leader's write window counts from
    when it sent the renewal, so none of its writes lands after the new leader acquired the lease (judged
    from the emulator's own request log)."""
    lease_s, deadline_s, retry_s = 2.0, 1.5, 0.2
    clients = [await KubeClient.from_config(str(kubeconfig)) for _ in range(2)]
    gates = [WriteGate(), WriteGate()]
    acquired_at: dict[str, float] = {}

    def elector(i: int) -> LeaderElector:
        identity = "ab"[i]

        def changed(leading: bool) -> None:
            if leading:
                acquired_at.setdefault(identity, time.monotonic())

        return LeaderElector(
            clients[i], gates[i], namespace="default", name="fence", identity=identity,
            lease_duration_s=lease_s, renew_deadline_s=deadline_s, retry_period_s=retry_s, on_change=changed,
        )  # fmt: skip

    for name in ("writer-a", "writer-b"):
        kube_api.create("", "v1", "nodes", {"metadata": {"name": name}})

    async def write_while_leading(i: int) -> None:
        """A writer behind gate i: a Node patch every 20 ms while the gate is open."""
        path = f"/api/v1/nodes/writer-{'ab'[i]}"
        for count in range(1000):  # bounded: 20 s at most
            if gates[i].leading:
                with contextlib.suppress(NotLeader):
                    gates[i].check()
                    await clients[i].patch(path, {"metadata": {"annotations": {"n": str(count)}}})
            await asyncio.sleep(0.02)  # the writer's pace, not a synchronisation

    leader = elector(0)
    first = asyncio.create_task(leader.run())
    writers = [asyncio.create_task(write_while_leading(i)) for i in range(2)]
    second: asyncio.Task[None] | None = None
    try:
        await wait_for(lambda: "a" in acquired_at, deadline_s=5, what="a to lead")
        kube_api.server.record_requests = True
        # a's next renewal lands at once and is answered after a full lease duration and more
        kube_api.faults.answer_late("PUT", "/leases/fence", seconds=lease_s + 2.0)
        second = asyncio.create_task(elector(1).run())
        await wait_for(lambda: "b" in acquired_at, deadline_s=10, what="b to take over")
        # a follower again only once its late answer has come back and been acted on
        await wait_for(lambda: not leader.is_leader, deadline_s=10, what="a's late answer")
        await cancel_and_wait(writers[:1])
        log = kube_api.server.requests
        renewal, takeover = [at for at, method, path in log if method == "PUT" and "/leases/fence" in path][
            :2
        ]
        writes = {
            who: [at for at, method, path in log if method == "PATCH" and path.endswith(f"writer-{who}")]
            for who in "ab"
        }
        assert writes["b"], "b never wrote"
        late = [round(at - takeover, 2) for at in writes["a"] if at >= takeover]
        assert not late, (
            f"a wrote {late} s after b acquired the lease ({takeover - renewal:.1f} s after a renewed)"
        )
    finally:
        await cancel_and_wait([first, *writers, *([second] if second else [])])
        for client in clients:
            await client.close()


async def test_clean_shutdown_releases_the_lease(kube_api: KubeApiEmulator, kubeconfig: Path):
    clients = [await KubeClient.from_config(str(kubeconfig)) for _ in range(2)]
    try:
        first = LeaderElector(clients[0], WriteGate(), namespace="default", name="l", identity="a",
                              lease_duration_s=30, renew_deadline_s=20, retry_period_s=0.2)  # fmt: skip
        second = LeaderElector(clients[1], WriteGate(), namespace="default", name="l", identity="b",
                               lease_duration_s=30, renew_deadline_s=20, retry_period_s=0.2)  # fmt: skip
        task_a = asyncio.create_task(first.run())
        await wait_for(lambda: first.is_leader, deadline_s=5, what="first leads")
        task_b = asyncio.create_task(second.run())
        task_a.cancel()
        await asyncio.gather(task_a, return_exceptions=True)
        started = time.monotonic()
        await wait_for(lambda: second.is_leader, deadline_s=5, what="second takes over at once")
        assert time.monotonic() - started < 3  # far less than the 30 s lease
        task_b.cancel()
        await asyncio.gather(task_b, return_exceptions=True)
    finally:
        for client in clients:
            await client.close()


async def test_a_held_watch_lags_the_api_server_and_a_lost_answer_still_did_the_write(
    kube_api: KubeApiEmulator, kube_client: KubeClient
) -> None:
    """The emulator's two faults behind the scheduler's bind race (tests/e2e/test_scheduler.py): a watch held
    back shows nothing the API server did until released, then all of it; a bind whose answer is lost (a
    gateway's 504) was made all the same."""
    kube_api.create("", "v1", "namespaces", {"metadata": {"name": "lag"}})
    kube_api.create("", "v1", "nodes", {"metadata": {"name": "k-lag"}})
    pod = {"metadata": {"name": "p"}, "spec": {"schedulerName": "lagging", "containers": [{"name": "c"}]}}
    uid = kube_api.create("", "v1", "pods", pod, namespace="lag")["metadata"]["uid"]
    pods = SchedulerPods(kube_client, "lagging", ("lag",))
    nodes: Informer[KubeNode] = Informer(kube_client, "/api/v1/nodes", "Node", lambda node: node.name)
    tasks = [asyncio.create_task(informer.run()) for informer in pods.informers.values()]
    tasks.append(asyncio.create_task(nodes.run()))
    try:
        await wait_for(lambda: pods.get("lag", "p") is not None, deadline_s=10, what="the pod listed")
        kube_api.faults.hold_watches("/namespaces/lag/pods", "spec.schedulerName=lagging")
        kube_api.faults.lose_answers("POST", "/pods/p/binding")
        writer = KubeWriter(kube_client, WriteGate(always_leader=True))
        with pytest.raises(KubeError) as lost:
            await writer.bind("lag", "p", uid, "k-lag")
        assert lost.value.status == 504
        assert must(kube_api.pod("lag", "p"))["spec"]["nodeName"] == "k-lag", "made, its answer lost"
        # a later change on another watch arrives: the held one, whose change came first, still shows none
        kube_api.create("", "v1", "nodes", {"metadata": {"name": "k-after"}})
        await wait_for(lambda: "k-after" in nodes.items, deadline_s=10, what="the Node watch's change")
        assert must(pods.get("lag", "p")).node_name == "", "the held watch shows the bind"
        kube_api.faults.release_watches()
        await wait_for(
            lambda: must(pods.get("lag", "p")).node_name == "k-lag", deadline_s=10, what="the bind shown"
        )
    finally:
        kube_api.faults.clear()
        await cancel_and_wait(tasks)
