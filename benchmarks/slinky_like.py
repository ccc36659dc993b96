"""A baseline that behaves like Slinky's slurm-operator NodeSet controller, for benchmarks/run.py.

What it copies is the timing, read from SlinkyProject/slurm-operator at commit
f2ed3fc5325271cef6311c1f92c6c75efe122bb1 (2026-08-20), internal/controller/nodeset/:
- a Node cordon or uncordon (or any Node/pod change of the NodeSet) queues one reconcile of the
  NodeSet; one worker (`nodeset-workers` defaults to 1), so changes arriving meanwhile coalesce into the
  next reconcile;
- every reconcile first forces a full Slurm node list (step "RefreshNodeCache", `ListOptions{RefreshCache:
  true}`, StopOnError) and only then drains or undrains (step "Cordon", per pod on a cordoned Node);
- every reconcile ends with a requeue after 30 s (`durationStore.Push(key, 30*time.Second)`): Slurm-side
  changes reach Kubernetes at the next reconcile, with a phase that is random against them;
- no conditional reads: each list is a whole list.
What it shows in Kubernetes (the state and reason annotations) follows this repository's contract, so
the same harness measures both; Slinky itself writes other fields. No code of Slinky is used.

    python benchmarks/slinky_like.py --slurm-url URL --slurm-token-file F --kubeconfig K \\
        --namespace NS --listen-port P
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root

from syncer.control.gate import WriteGate
from syncer.kube.cache import KubeCache
from syncer.kube.client import KubeClient
from syncer.kube.writer import KubeWriter, pod_path
from syncer.model.keys import Keys
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmError

REQUEUE_S = 30.0
REASON = "Node ({node}) was cordoned"  # the shape of Slinky's default drain reason


class SlinkyLike:
    def __init__(self, slurm: SlurmClient, kube: KubeClient, namespace: str) -> None:
        self.slurm = slurm
        self.cache = KubeCache(kube, namespace=namespace)
        self.writer = KubeWriter(kube, WriteGate(always_leader=True))
        self.dirty = asyncio.Event()
        self.reconciles = 0
        self.full_lists = 0
        self.in_flight = 0

    async def run(self) -> None:
        self.cache.subscribe(lambda _keys: self.dirty.set())
        self.cache.start()
        await self.cache.wait_synced()
        self.dirty.set()
        next_requeue = asyncio.get_running_loop().time() + random.uniform(0, REQUEUE_S)  # random phase
        while True:
            timeout = max(0.0, next_requeue - asyncio.get_running_loop().time())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.dirty.wait()
            self.dirty.clear()
            self.in_flight = 1
            try:
                await self.reconcile()
            except SlurmError as exc:
                print(f"slinky-like: reconcile failed: {exc}", file=sys.stderr, flush=True)
            finally:
                self.in_flight = 0
            next_requeue = asyncio.get_running_loop().time() + REQUEUE_S

    async def reconcile(self) -> None:
        self.reconciles += 1
        listing = await self.slurm.list_all_nodes()  # RefreshNodeCache: a full list before anything
        self.full_lists += 1
        slurm = {node.name: node for node in listing.nodes}
        for name in sorted(self.cache.slurm_names()):
            pods = self.cache.pods_for(name)
            node = slurm.get(name)
            if len(pods) != 1 or node is None:
                continue
            pod = pods[0]
            kube_node = self.cache.node(pod.node_name) if pod.node_name else None
            cordoned = kube_node is not None and kube_node.unschedulable
            ours = node.reason.startswith("Node (")
            if cordoned and not node.drain_flag:
                await self.slurm.update_node(name, state=["DRAIN"], reason=REASON.format(node=pod.node_name))
            elif not cordoned and node.drain_flag and ours:
                await self.slurm.update_node(name, state=["UNDRAIN"])
            wanted: dict[str, str | None] = {Keys.STATE: node.state_text, Keys.REASON: node.reason or None}
            if any(pod.annotations.get(k) != v for k, v in wanted.items()):
                await self.writer.set_annotations(pod_path(pod.namespace, pod.name), wanted, current=None)


async def serve(app_state: SlinkyLike, port: int) -> web.AppRunner:
    """/readyz and the few /metrics lines benchmarks/run.py reads (queue, in flight, full lists)."""

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n") if app_state.cache.synced else web.Response(status=503)

    async def metrics(_request: web.Request) -> web.Response:
        lines = [
            f"slurm_syncer_queue_depth {int(app_state.dirty.is_set())}",
            f"slurm_syncer_queue_in_flight {app_state.in_flight}",
            f'slurm_syncer_slurm_fetches_total{{result="full"}} {app_state.full_lists}',
            f"slinky_like_reconciles_total {app_state.reconciles}",
        ]
        return web.Response(text="\n".join(lines) + "\n")

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def main_async(args: argparse.Namespace) -> int:
    slurm = SlurmClient(args.slurm_url, TokenFile(Path(args.slurm_token_file)))
    kube = await KubeClient.from_config(args.kubeconfig, qps=50, burst=100)
    await slurm.start()
    baseline = SlinkyLike(slurm, kube, args.namespace)
    runner = await serve(baseline, args.listen_port)
    try:
        await baseline.run()
    finally:
        await runner.cleanup()
        await baseline.cache.stop()
        await slurm.close()
        await kube.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slurm-url", required=True)
    parser.add_argument("--slurm-token-file", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", default="")
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--seed", type=int, default=None, help="seed of the requeue phase")
    args = parser.parse_args()
    random.seed(args.seed)
    try:
        return asyncio.run(main_async(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
