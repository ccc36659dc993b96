"""Supervision: a background task that dies stops the whole syncer with a non-zero status within a
second, with nothing written after the failure; a new syncer then converges (real Slurm, emulator)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import replace

import pytest

from syncer.app.run_cmd import serve
from syncer.app.service import SyncerService
from syncer.control.gate import NotLeader
from syncer.kube.client import KubeClient
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from tests.e2e.rig import FAST, Rig, fresh_slurm_nodes, running_syncer
from tests.e2e.test_commands import environment
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]

CONFIG = replace(FAST, leader_election=True, lease_duration_s=6.0, renew_deadline_s=4.0, retry_period_s=0.5)


def fail_inside(obj: object, attr: str, trigger: asyncio.Event) -> None:
    """Replaces the loop `obj.attr` with one that runs the real loop and raises inside the task as
    soon as `trigger` is set."""
    original = getattr(obj, attr)

    async def loop() -> None:
        real = asyncio.create_task(original())
        try:
            await trigger.wait()
            raise RuntimeError(f"injected fault in {attr}")
        finally:
            real.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await real

    setattr(obj, attr, loop)


def raise_when(obj: object, attr: str, trigger: asyncio.Event, error: Exception) -> None:
    """Makes a call the loop itself makes raise once `trigger` is set (a fault deep inside it)."""
    original = getattr(obj, attr)

    def call(*args: object, **kwargs: object) -> object:
        if trigger.is_set():
            raise error
        return original(*args, **kwargs)

    setattr(obj, attr, call)


Inject = Callable[[SyncerService, asyncio.Event], None]
TASKS: dict[str, Inject] = {
    "informer-pods": lambda s, t: fail_inside(s.kube_cache.pods, "run", t),
    "informer-nodes": lambda s, t: fail_inside(s.kube_cache.nodes, "run", t),
    "slurm-cache": lambda s, t: fail_inside(s.slurm_cache, "run", t),
    "leader-election": lambda s, t: fail_inside(s.elector, "run", t),
    "sync": lambda s, t: fail_inside(s.engine.runner, "serve", t),
    "nodeset": lambda s, t: fail_inside(s.nodesets.runner, "serve", t),  # type: ignore[union-attr]
    "informer-nodesets": lambda s, t: fail_inside(s.nodesets.informer, "run", t),  # type: ignore[union-attr]
    # NodeSets no release has labelled yet (--adopt-unlabelled)
    "informer-nodesets-unlabelled": lambda s, t: fail_inside(
        s.nodesets.scope.unlabelled,  # type: ignore[union-attr]
        "run",
        t,
    ),
    "heartbeat": lambda s, t: fail_inside(s, "_heartbeat", t),
    "jobs-poller": lambda s, t: fail_inside(s, "_poll_jobs", t),
    "event-summaries": lambda s, t: fail_inside(s.events, "run_folding", t),
    "maintenance": lambda s, t: fail_inside(s.maintenance.runner, "serve", t),
    # the defects as found: a bad Lease body ended the elector (a silent follower for ever), and the
    # engine's housekeeping died while the probes stayed green
    "leader-election/bad-lease-body": lambda s, t: raise_when(
        s.elector, "_try_acquire_or_renew", t, ValueError("bad Lease body")
    ),
    "sync/housekeeping": lambda s, t: raise_when(s.engine.valve, "tick", t, ValueError("bad tick")),
}


async def build(rig: Rig) -> SyncerService:
    slurm = SlurmClient(rig.sandbox.rest_url, TokenFile(rig.sandbox.token_file))
    kube = await KubeClient.from_config(str(rig.kubeconfig), qps=200, burst=400)
    return SyncerService(slurm, kube, CONFIG)


def test_every_background_task_is_covered() -> None:
    covered = {name.split("/")[0] for name in TASKS}
    # the tasks a fully configured syncer runs (the HTTP server is a resource, not a loop)
    assert covered == {
        "informer-pods", "informer-nodes", "slurm-cache", "leader-election", "sync", "nodeset",
        "informer-nodesets", "informer-nodesets-unlabelled", "heartbeat", "jobs-poller", "event-summaries",
        "maintenance",
    }  # fmt: skip


@pytest.mark.parametrize("task", sorted(TASKS))
async def test_a_dying_task_stops_the_syncer_and_a_restart_converges(rig: Rig, task: str) -> None:
    (name,) = fresh_slurm_nodes(1)
    kube_node, _ = rig.bind_pod(name)
    service = await build(rig)
    trigger = asyncio.Event()
    TASKS[task](service, trigger)
    stop = asyncio.Event()
    try:
        await service.start()
        assert sorted(service.manager.names) == sorted({n.split("/")[0] for n in TASKS})
        await service.wait_ready(30)
        await wait_for(lambda: service.gate.leading, deadline_s=15, what="leadership")
        failed_at: list[float] = []
        service.manager.on_failure(lambda _failure: failed_at.append(time.monotonic()))
        exit_code = asyncio.create_task(serve(service, stop))
        trigger.set()  # a loop notices at its next turn: the heartbeat and housekeeping tick each second
        failure = await asyncio.wait_for(service.wait(), 10.0)
        assert failure is not None and failure.name == task.split("/")[0], failure
        # every loop has stopped within a second of the failure
        assert time.monotonic() - failed_at[0] < 1.0
        # from the moment of the failure no write passes the gate (leader or not)
        assert not service.gate.leading
        with pytest.raises(NotLeader):
            service.gate.check()
        assert not service.readiness()[0]  # the probes say so while the process stops
        # the process exits non-zero (Kubernetes restarts it); typically well under a second
        assert await asyncio.wait_for(exit_code, 10.0) == 1
        assert time.monotonic() - failed_at[0] < 5.0, "generous on a loaded machine"
    finally:
        stop.set()
        await service.stop()
    # nothing written after the failure: a cordon now stays a Kubernetes fact only
    rig.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})
    rv = rig.kube.api.store.rv
    assert not (await rig.slurm(name)).drain_flag
    assert rig.kube.api.store.rv == rv
    # restarted, it converges
    async with running_syncer(rig, CONFIG):

        async def drained() -> bool:
            return (await rig.slurm(name)).drain_flag

        await wait_for(drained, deadline_s=30, what="the restarted syncer drains the cordoned node")


async def test_run_exits_1_when_a_bad_lease_body_kills_leader_election(rig: Rig) -> None:
    """The defect as found, end to end: `slurm-syncer run` as a process; a Lease whose body the elector
    cannot read (a ValueError, not a KubeError) used to leave it a silent follower for ever."""
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "syncer", "--log-format", "json", "run",
        env=environment(rig), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:

        def holder() -> str:
            lease = rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", namespace="default")
            return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

        await wait_for(lambda: bool(holder()), deadline_s=30, what="the daemon leads")
        rig.kube.patch(
            "coordination.k8s.io", "v1", "leases", "slurm-syncer",
            {"spec": {"leaseDurationSeconds": "soon"}}, namespace="default",
        )  # fmt: skip
        assert await asyncio.wait_for(daemon.wait(), 30) == 1
        assert daemon.stderr is not None
        err = (await daemon.stderr.read()).decode()
        assert "background task 'leader-election' failed: ValueError" in err, err[-3000:]
    finally:
        if daemon.returncode is None:
            daemon.kill()
            await daemon.wait()
