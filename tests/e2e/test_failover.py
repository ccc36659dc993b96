"""Leader failover with two real syncer processes: the leader is frozen (SIGSTOP) in the middle of a
stream of cordons, then the new leader is killed (SIGKILL). Every Slurm write is recorded with its writer
(each syncer talks to slurmrestd through its own proxy): the two never write in overlapping periods, the
takeover comes within the lease duration, every cordon is drained and nothing else is."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from benchmarks import faults
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.sandbox.config import free_port
from tests.e2e.rig import NAMESPACE, Rig, fresh_slurm_nodes
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")
LEASE_S = 4.0
RETRY_S = 0.5
# docs/reliability.md promises this bound: the new leader observes the last renewal up to one retry
# period late, takes the lease at its next attempt after a full lease duration, then needs up to 1 s to
# reconcile and write (client-go's timing rules, syncer/kube/leader.py)
TAKEOVER_S = LEASE_S + 2 * RETRY_S + 1.0


@asynccontextmanager
async def syncer_process(
    rig: Rig, identity: str, slurm_url: str, log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    port = free_port()
    argv = [
        CLI, "--log-level", "info", "--log-format", "json", "run",
        "--slurm-url", slurm_url, "--slurm-token-file", str(rig.sandbox.token_file),
        "--kubeconfig", str(rig.kubeconfig), "--namespace", NAMESPACE, "--identity", identity,
        "--lease-namespace", NAMESPACE, "--lease-duration", f"{LEASE_S:.0f}s", "--renew-deadline", "3s",
        "--retry-period", f"{RETRY_S * 1000:.0f}ms", "--listen-address", f"127.0.0.1:{port}",
        "--slurm-poll-interval", "200ms",
        "--max-drain-fraction", "1.0", "--no-nodeset-enabled",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(*argv, stdout=out, stderr=out)
    try:

        async def answering() -> bool:
            try:
                async with aiohttp.ClientSession() as http:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                        return response.status == 200
            except aiohttp.ClientError:
                return False

        await wait_for(answering, deadline_s=60, what=f"syncer {identity} up")
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            await process.wait()


def holder(rig: Rig) -> str:
    lease = rig.kube.get("coordination.k8s.io", "v1", "leases", "slurm-syncer", namespace=NAMESPACE) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def node_writes(proxy: FaultProxy) -> list[float]:
    """When each Slurm node write arrived, single-node and bulk alike (the fault harness's reading)."""
    return [at for at, _node, _state, _body in faults.node_writes(proxy.writes)]


async def test_failover_never_has_two_writers(rig: Rig, tmp_path: Path):
    names = fresh_slurm_nodes(16)
    kube_nodes = [rig.bind_pod(name)[0] for name in names]

    async def drained(name: str) -> bool:
        return (await rig.slurm(name)).drain_flag

    async def all_drained(batch: list[str]) -> bool:
        return all([await drained(n) for n in batch])

    async with FaultProxy(rig.sandbox.rest_url) as proxy_a, FaultProxy(rig.sandbox.rest_url) as proxy_b:
        async with syncer_process(rig, "a", proxy_a.url, tmp_path / "a.log") as a:
            await wait_for(lambda: holder(rig) == "a", deadline_s=20, what="a to lead")
            async with syncer_process(rig, "b", proxy_b.url, tmp_path / "b.log") as b:
                for node in kube_nodes[:4]:  # a leads: a drains
                    rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})
                await wait_for(lambda: all_drained(names[:4]), deadline_s=15, what="a's drains")
                a.send_signal(signal.SIGSTOP)
                frozen_at = time.monotonic()
                for node in kube_nodes[4:10]:  # nobody can write until b takes over
                    rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})
                await wait_for(
                    lambda: all_drained(names[4:10]), deadline_s=30, what="b's drains after takeover"
                )
                assert holder(rig) == "b"
                takeover_s = min(node_writes(proxy_b)) - frozen_at
                assert takeover_s <= TAKEOVER_S, f"takeover took {takeover_s:.1f} s, promised {TAKEOVER_S} s"
                a.send_signal(signal.SIGCONT)  # a wakes up believing nothing: its term has expired
                resumed_at = time.monotonic()
                await wait_for(
                    lambda: any(
                        '"leading": false' in line or '"leading":false' in line
                        for line in (tmp_path / "a.log").read_text().splitlines()[-50:]
                    ),
                    deadline_s=20,
                    what="a to notice it is a follower",
                )
                a_writes_after_freeze = [t for t in node_writes(proxy_a) if t > frozen_at]
                assert not a_writes_after_freeze, "the frozen leader wrote after waking up"
                b.send_signal(signal.SIGKILL)
                await b.wait()
                killed_at = time.monotonic()
            for node in kube_nodes[10:14]:  # b is dead: a takes over again
                rig.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})
            await wait_for(lambda: all_drained(names[10:14]), deadline_s=30, what="a's drains after b died")
            assert holder(rig) == "a"
    a_times, b_times = node_writes(proxy_a), node_writes(proxy_b)
    # periods of writing never overlap: a before the freeze, b between takeover and its death, a again after
    assert all(t < frozen_at or t > killed_at for t in a_times)
    assert all(frozen_at < t < killed_at for t in b_times)
    assert resumed_at < killed_at
    # no wrong action: the two nodes never cordoned were never drained
    for name in names[14:]:
        assert not await drained(name)
    for name in names[:14]:
        assert (await rig.slurm(name)).reason.startswith("k8s: ")
