"""The informer's reconnect rule against the real API server (apiextensions-apiserver on etcd) and the
emulator, the same code for both, with a proxy between the informer and the server that breaks watches as
a network would (tests/fixtures/watch_proxy.py). A watch the server ends at its timeout starts the backoff
anew and is reopened at once from the same version; watches dropped soon after their first event keep
doubling the wait; once the drops stop the informer is back within the wait's ceiling; a 410 re-lists."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from syncer.controllers.nodeset import manifests
from syncer.kube import KubeClient
from syncer.kube.client import MERGE_PATCH
from syncer.kube.informer import Informer
from syncer.model.kube import KubeNodeSet
from syncer.runtime.backoff import Backoff
from syncer.runtime.tasks import cancel_and_wait
from syncer.testing.kubeapi.emulator import nodeset_manifest
from tests.fixtures.kube_targets import KubeTarget
from tests.fixtures.watch_proxy import WatchProxy
from tests.helpers import wait_for

pytestmark = pytest.mark.kube

FAILED = "kubernetes watch failed, retrying"


@dataclass
class Rig:
    target: KubeTarget
    proxy: WatchProxy
    direct: KubeClient  # the test's own writes, straight to the server
    proxied: KubeClient  # the informer's, through the proxy

    def informer(self, backoff: Backoff, **options: Any) -> Informer[KubeNodeSet]:
        path = manifests.nodesets_path(self.target.namespace)
        inf: Informer[KubeNodeSet] = Informer(
            self.proxied, path, "NodeSet", lambda n: n.name, inactivity_timeout_s=30.0, **options
        )
        inf.backoff = backoff
        return inf

    async def create(self, name: str, replicas: int = 0) -> None:
        await self.direct.create(
            manifests.nodesets_path(self.target.namespace), nodeset_manifest(name, replicas)
        )

    async def scale(self, name: str, replicas: int) -> None:
        path = manifests.nodeset_path(self.target.namespace, name)
        await self.direct.patch(path, {"spec": {"replicas": replicas}}, MERGE_PATCH)

    async def server_state(self) -> dict[str, str]:
        listed = await self.direct.get(manifests.nodesets_path(self.target.namespace))
        return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}

    def lists(self) -> int:
        """List requests that reached the proxy (the informer's first list and any re-list)."""
        return sum(1 for _, method, path in self.proxy.requests if method == "GET" and "watch=" not in path)


async def _rig(target: KubeTarget, tmp_path: Path) -> AsyncIterator[Rig]:
    async with WatchProxy(target.url) as proxy:
        kubeconfig = proxy.write_kubeconfig(target.kubeconfig, tmp_path / "kubeconfig.proxied")
        direct = await KubeClient.from_config(str(target.kubeconfig), qps=500, burst=500)
        proxied = await KubeClient.from_config(str(kubeconfig), qps=500, burst=500)
        try:
            yield Rig(target, proxy, direct, proxied)
        finally:
            await proxied.close()
            await direct.close()


@pytest.fixture
async def rig(kube_target: KubeTarget, tmp_path: Path) -> AsyncIterator[Rig]:
    async for made in _rig(kube_target, tmp_path):
        yield made


@pytest.fixture
async def compacting_rig(compacting_target: KubeTarget, tmp_path: Path) -> AsyncIterator[Rig]:
    async for made in _rig(compacting_target, tmp_path):
        yield made


@contextlib.asynccontextmanager
async def running(inf: Informer[KubeNodeSet]) -> AsyncIterator[None]:
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 30)
        yield
    finally:
        await cancel_and_wait([task])


def delays_in(logs: list[MutableMapping[str, Any]]) -> Callable[[], list[float]]:
    return lambda: [e["delay_s"] for e in logs if e["event"] == FAILED]


def report(what: str, **figures: Any) -> None:
    """Measured figures, shown with -s (and in the report of this work)."""
    print(f"\n{what}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


async def test_a_watch_the_server_ends_at_its_timeout_starts_the_backoff_anew(rig: Rig):
    """Watches broken in a row (cut as they open) back off longer each time; one the server itself ends at
    its `timeoutSeconds` is a normal end: the next watch is asked for at once, from the same
    resourceVersion (still valid: no re-list), and the next failure waits only the first wait."""
    await rig.create("a")
    backoff = Backoff(0.05, 1.6)  # ceilings 0.05, 0.1, 0.2, 0.4, 0.8, 1.6
    inf = rig.informer(backoff, watch_timeout_s=1.0)  # timeoutSeconds=1
    # four watches cut as they open, one left to the server (ended at its timeout), one more cut
    rig.proxy.plan = [0, 0, 0, 0, None, 0]
    with capture_logs() as logs:
        delays = delays_in(logs)
        async with running(inf):
            await wait_for(lambda: len(delays()) >= 5, 20, "five failed watches and the server's end")
    assert [w.how for w in rig.proxy.watches[:6]] == ["cut"] * 4 + ["server", "cut"]
    timed_out, following = rig.proxy.watches[4:6]
    assert timed_out.ended is not None
    open_s = timed_out.ended - timed_out.asked  # the server's clock starts after the proxy's
    assert open_s >= 0.95, f"the server ended the watch after {open_s:.2f} s, not at its timeout (1 s)"
    assert following.resource_version == timed_out.resource_version == inf.resource_version
    assert rig.lists() == 1 and inf.stats.lists == 1, "no re-list: the version was still valid"
    assert inf.stats.watch_restarts >= 1 and inf.stats.relists_after_gone == 0
    assert len(delays()) == 5, "a wait for each cut watch, none for the server's end"
    # the run kept doubling, and ended with the server's end: the failure after it is the first of a new run
    assert delays()[3] >= backoff.ceiling(4) / 2 and delays()[4] <= backoff.ceiling(1), delays()
    report(
        f"{rig.target.name}: server timeout",
        open_s=round(open_s, 3),
        reconnect_s=round(following.asked - timed_out.ended, 4),
        delays=delays(),
    )


async def test_watches_dropped_after_their_first_event_keep_doubling_the_wait(rig: Rig):
    """A connection that drops every watch right after its first event: each watch worked (it delivered),
    but was open far less than the wait its failure adds, so the failures stay one run and the wait keeps
    doubling up to its cap; no re-list (each resumes from the event it got)."""
    await rig.create("a")
    backoff = Backoff(0.2, 1.6)  # ceilings 0.2, 0.4, 0.8, 1.6, 1.6
    inf = rig.informer(backoff, watch_timeout_s=60.0)
    drops = 5
    with capture_logs() as logs:
        delays = delays_in(logs)
        async with running(inf):
            rig.proxy.cut_after = 1
            for n in range(1, drops + 1):
                # written while the informer waits (after the previous drop): its next watch opens with
                # this change to replay, delivers it, and is dropped
                await rig.scale("a", n)
                await wait_for(lambda n=n: len(delays()) >= n, 20, f"drop {n}")  # type: ignore[misc]
            await wait_for(lambda: inf.items["a"].spec.get("replicas") == drops, 10, "the last change")
    got = delays()[:drops]
    for n, delay in enumerate(got, start=1):
        assert backoff.ceiling(n) / 2 <= delay <= backoff.ceiling(n), (n, got)
    cut = rig.proxy.ended("cut")
    assert len(cut) >= drops and all(w.lines == 1 for w in cut), [(w.how, w.lines) for w in cut]
    assert rig.lists() == 1 and inf.stats.lists == 1
    open_s = [round((w.ended or 0) - (w.opened or 0), 3) for w in cut[:drops]]
    report(f"{rig.target.name}: dropped after the first event", delays=got, open_s=open_s)


async def test_once_the_drops_stop_the_informer_is_back_within_the_backoff_ceiling(rig: Rig):
    """Watches dropped as they open until the wait reached its cap, changes made meanwhile; once the drops
    stop the informer holds the server's state within the cap (plus a reconnect), from the same version
    (no re-list). A drop after that, of a watch that worked longer than the next wait, is the first
    failure of a new run."""
    await rig.create("a")
    backoff = Backoff(0.1, 0.8)  # ceilings 0.1, 0.2, 0.4, 0.8, 0.8
    inf = rig.informer(backoff, watch_timeout_s=60.0)
    with capture_logs() as logs:
        delays = delays_in(logs)
        async with running(inf):
            rig.proxy.cut_after = 0
            rig.proxy.cut_open()
            await wait_for(lambda: len(delays()) >= 4, 20, "the wait at its cap")
            await rig.scale("a", 7)  # missed while the watches fail
            await rig.create("b", 2)
            expected = await rig.server_state()
            stopped = time.monotonic()
            rig.proxy.cut_after = None

            def in_step() -> bool:
                return {k: v.resource_version for k, v in inf.items.items()} == expected

            await wait_for(in_step, 20, "the informer equal to the server")
            converged_s = time.monotonic() - stopped
            failed = len(delays())
            # what was left of the wait (at most the cap), then one reconnect and the replay
            assert converged_s <= backoff.max_s + 1.5, f"{converged_s:.2f} s"
            assert inf.current and rig.lists() == 1 and inf.stats.lists == 1
            # the healthy watch delivered the missed changes; open longer than the next wait, then dropped
            healthy = rig.proxy.watches[-1]
            await wait_for(
                lambda: healthy.opened is not None and time.monotonic() - healthy.opened > backoff.max_s,
                10,
                "the healthy watch open past the cap",
            )
            assert rig.proxy.cut_open() == 1
            await wait_for(lambda: len(delays()) > failed, 10, "the drop after the healthy watch")
    assert delays()[failed] <= backoff.ceiling(1), delays()
    report(f"{rig.target.name}: after the faults", converged_s=round(converged_s, 3), delays=delays())


async def test_a_watch_resumed_after_compaction_gets_410_and_relists_at_once(compacting_rig: Rig):
    """The server ends a watch at its timeout; the next one is held back (a slow network) while an object
    is created and history is compacted (real etcd compaction, no watch cache); released, it is 410
    Expired, and the informer re-lists at once (no wait) and has the object."""
    rig = compacting_rig
    await rig.create("a")
    inf = rig.informer(Backoff(0.2, 1.6), watch_timeout_s=1.0)
    with capture_logs() as logs:
        async with running(inf):
            rig.proxy.hold()
            await wait_for(lambda: rig.proxy.waiting == 1, 20, "the watch after the timeout held back")
            for name in ("late", "later", "latest"):  # compacted well past the version it resumes from
                await rig.create(name)
            await rig.target.compact()
            released = time.monotonic()
            rig.proxy.release()
            await wait_for(lambda: "latest" in inf.items, 20, "the objects created while the watch was held")
            relisted_s = time.monotonic() - released
    assert inf.stats.relists_after_gone == 1 and inf.stats.lists == 2 and rig.lists() == 2
    assert inf.stats.errors == 1 and not delays_in(logs)(), "a 410 re-lists without a wait"
    carried = [w.lines for w in rig.proxy.watches]
    assert carried.count(1) == 1 and sum(carried) == 1, "the 410: the held watch's one line, an ERROR event"
    report(f"{rig.target.name}: 410", relisted_s=round(relisted_s, 3))
