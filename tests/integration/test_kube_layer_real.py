"""The syncer's generic Kubernetes layer (syncer/kube: informer and writer) against NodeSets served by
the real API server: list, paged re-lists, watch, bookmarks, 410 after real etcd compaction, the
inactivity timeout, merge and JSON patches, 409 retried from fresh state, status patches."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from syncer.control.gate import WriteGate
from syncer.controllers.nodeset import manifests
from syncer.kube import KubeClient, KubeWriter
from syncer.kube.client import MERGE_PATCH
from syncer.kube.errors import KubeError
from syncer.kube.informer import Informer, WatchEventError
from syncer.model.kube import KubeNodeSet
from syncer.testing.kubeapi.emulator import nodeset_manifest
from syncer.testing.kubeapi_real import RealKubeApi
from tests.helpers import wait_for

pytestmark = pytest.mark.kube

JSON_PATCH = "application/json-patch+json"


async def _client(real: RealKubeApi, directory: Path) -> KubeClient:
    return await KubeClient.from_config(
        str(real.write_kubeconfig(directory / "kubeconfig")), qps=500, burst=500
    )


@pytest.fixture
async def uncached(real_kube_api_uncached: RealKubeApi, tmp_path: Path) -> AsyncIterator[KubeClient]:
    client = await _client(real_kube_api_uncached, tmp_path)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def cached(real_kube_api: RealKubeApi, tmp_path: Path) -> AsyncIterator[KubeClient]:
    client = await _client(real_kube_api, tmp_path)
    try:
        yield client
    finally:
        await client.close()


def namespace() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def informer(client: KubeClient, ns: str, **options: Any) -> Informer[KubeNodeSet]:
    return Informer(client, manifests.nodesets_path(ns), "NodeSet", lambda n: n.name, **options)


async def server_state(client: KubeClient, ns: str) -> dict[str, str]:
    listed = await client.get(manifests.nodesets_path(ns))
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}


@contextlib.asynccontextmanager
async def running(inf: Informer[KubeNodeSet]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(inf.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_informer_loses_no_event_through_compaction_and_relists(
    uncached: KubeClient, real_kube_api_uncached: RealKubeApi
):
    """Writes and real etcd compactions interleaved; short watches resume from compacted versions and
    get 410, so the informer re-lists (paged, 2 a page). It must end equal to the server, and every
    change it reported must be in order per object."""
    ns, elsewhere = namespace(), namespace()
    inf = informer(uncached, ns, page_size=2, watch_timeout_s=1.0, inactivity_timeout_s=10.0)
    seen: dict[str, list[int]] = {}

    def record(old: KubeNodeSet | None, new: KubeNodeSet | None) -> None:
        obj = new or old
        assert obj is not None
        seen.setdefault(obj.name, []).append(int(obj.resource_version) if new else -1)

    inf.subscribe(record)
    rng = random.Random(19)
    for i in range(5):
        await uncached.create(manifests.nodesets_path(ns), nodeset_manifest(f"ns{i}", i))
    async with running(inf):
        await asyncio.wait_for(inf.synced.wait(), 30)
        for round_ in range(6):
            for _ in range(4):
                name = f"ns{rng.randrange(8)}"
                path = manifests.nodeset_path(ns, name)
                try:
                    if rng.random() < 0.2:
                        await uncached.delete(path)
                    else:
                        await uncached.patch(path, {"spec": {"replicas": rng.randrange(50)}}, MERGE_PATCH)
                except KubeError as exc:
                    assert exc.status == 404
                    await uncached.create(manifests.nodesets_path(ns), nodeset_manifest(name, 1))
            # writes the informer does not watch move etcd's revision past its resume point (two, so the
            # compaction point is beyond the version it resumes from)
            for copy in ("a", "b"):
                await uncached.create(
                    manifests.nodesets_path(elsewhere), nodeset_manifest(f"o{round_}{copy}", 0)
                )
            real_kube_api_uncached.compact()
            restarts = inf.stats.watch_restarts + inf.stats.errors

            def restarted(before: int = restarts) -> bool:
                return inf.stats.watch_restarts + inf.stats.errors > before

            await wait_for(restarted, 20, "a watch restart")
        expected = await server_state(uncached, ns)

        async def in_step() -> bool:
            return {k: v.resource_version for k, v in inf.items.items()} == expected

        await wait_for(in_step, 30, "the informer equal to the server")
    assert inf.stats.relists_after_gone >= 1, inf.stats
    assert inf.stats.lists >= 2
    for name, versions in seen.items():
        live = [v for v in versions if v != -1]
        assert live == sorted(live), f"{name}: versions went backwards: {versions}"


async def test_a_watch_from_just_before_compaction_is_a_500_and_means_relist(
    uncached: KubeClient, real_kube_api_uncached: RealKubeApi
):
    """Without a watch cache, resuming one version before etcd's compaction point, when the change at
    that point modified an object, ends the watch with an ERROR 500 (etcd has no previous value to
    give), not a 410. Resuming from the same version again would fail forever: the informer re-lists."""
    ns = namespace()
    await uncached.create(manifests.nodesets_path(ns), nodeset_manifest("a", 1))
    inf = informer(uncached, ns)
    await inf.list_once()
    await uncached.patch(manifests.nodeset_path(ns, "a"), {"spec": {"replicas": 3}}, MERGE_PATCH)
    real_kube_api_uncached.compact()
    with pytest.raises(WatchEventError) as ended:
        await inf.watch_once()
    assert ended.value.status == 500 and "PrevKv=nil" in str(ended.value)
    assert not ended.value.gone
    # the informer's run loop re-lists after such an event (WatchEventError), so it recovers
    async with running(inf):
        await wait_for(lambda: inf.items["a"].spec.get("replicas") == 3, 20, "the change after a re-list")


async def test_informer_takes_bookmarks_before_the_watch_timeout(cached: KubeClient):
    """Bookmarks come 2 s before a watch's timeout when NodeSets elsewhere moved the version on; the
    informer resumes from them without a re-list."""
    ns, elsewhere = namespace(), namespace()
    await cached.create(manifests.nodesets_path(ns), nodeset_manifest("a", 1))
    await cached.create(manifests.nodesets_path(elsewhere), nodeset_manifest("busy", 0))
    inf = informer(cached, ns, watch_timeout_s=3.0, inactivity_timeout_s=30.0)

    async def churn() -> None:  # changes this informer does not watch, so bookmarks have news
        for replicas in range(200):
            await cached.patch(
                manifests.nodeset_path(elsewhere, "busy"), {"spec": {"replicas": replicas}}, MERGE_PATCH
            )
            await asyncio.sleep(0.5)  # pacing of the background writes, not synchronisation

    writer = asyncio.create_task(churn())
    try:
        async with running(inf):
            await wait_for(lambda: inf.stats.bookmarks >= 1, 30, "a bookmark (2 s before the watch timeout)")
            await wait_for(lambda: inf.stats.watch_restarts >= 1, 30, "the watch to end and resume")
            await cached.patch(manifests.nodeset_path(ns, "a"), {"spec": {"replicas": 4}}, MERGE_PATCH)
            await wait_for(lambda: inf.items["a"].spec.get("replicas") == 4, 20, "the change after resuming")
    finally:
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer
    assert inf.stats.errors == 0 and inf.stats.lists == 1


async def test_a_silent_watch_is_abandoned_after_the_inactivity_timeout(cached: KubeClient):
    """The real server sends nothing on an idle watch for about a minute: the informer must give up on
    the stream after its inactivity timeout and carry on (no bookmarks to lean on), as a normal end: no
    error counted, no backoff."""
    ns = namespace()
    inf = informer(cached, ns, watch_timeout_s=300.0, inactivity_timeout_s=1.5, max_backoff_s=0.5)
    async with running(inf):
        await wait_for(lambda: inf.stats.watch_restarts >= 1, 20, "the silent stream abandoned")
        assert inf.stats.errors == 0
        await cached.create(manifests.nodesets_path(ns), nodeset_manifest("late", 2))
        await wait_for(lambda: "late" in inf.items, 20, "an object created after the restart")


async def test_writer_retries_409_from_fresh_state_and_never_writes_stale(cached: KubeClient):
    ns = namespace()
    path = manifests.nodeset_path(ns, "gpu")
    created = await cached.create(manifests.nodesets_path(ns), nodeset_manifest("gpu", 2))
    await cached.patch(
        path, {"metadata": {"labels": {"other": "writer"}}}, MERGE_PATCH
    )  # created is stale now
    writer = KubeWriter(cached, WriteGate(always_leader=True))
    builds: list[str] = []

    def build(current: dict[str, Any]) -> dict[str, Any] | None:
        builds.append(current["metadata"]["resourceVersion"])
        labels = current["metadata"].get("labels") or {}
        return {"metadata": {"labels": {"count": str(len(labels))}}}

    written = await writer.patch_from_current(path, build, current=created)
    assert written is not None and writer.stats.conflicts == 1 and len(builds) == 2
    assert written["metadata"]["labels"] == {"other": "writer", "count": "1"}, "built from the fresh read"
    # status through /status with the same precondition; spec untouched
    status = await writer.patch_from_current(
        path, lambda cur: {"status": {"replicas": 2, "readyReplicas": 1}}, subresource="status"
    )
    assert status is not None and status["status"] == {"replicas": 2, "readyReplicas": 1}
    assert status["spec"]["replicas"] == 2
    # a JSON patch whose `test` fails is refused (422) and changes nothing
    ops = [
        {"op": "test", "path": "/spec/replicas", "value": 9},
        {"op": "replace", "path": "/spec/replicas", "value": 1},
    ]
    with pytest.raises(KubeError) as refused:
        await cached.patch(path, ops, JSON_PATCH)
    assert refused.value.status == 422
    assert (await cached.get(path))["spec"]["replicas"] == 2
