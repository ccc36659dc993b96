"""Kubernetes cache cost against the emulator: time to the first full sync of N Nodes + N slurmd
pods, and the memory the syncer's caches hold (targets at 10,000 + 10,000: <= 10 s, <= 60 MB).

    python benchmarks/kube_cache.py --nodes 1000 10000

The emulator runs in its own process (`slurm-syncer kubeapi`), so the figures are the syncer's only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from syncer.kube import KubeCache, KubeClient

TARGET_SYNC_S = 10.0
TARGET_MB = 60.0


def rss_mb() -> float:
    text = Path("/proc/self/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(match.group(1)) / 1024 if match else 0.0


async def start_emulator(nodes: int, kubeconfig: Path) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "syncer", "kubeapi", "--nodes", str(nodes), "--slurmd-pods",
        "--kubeconfig-out", str(kubeconfig),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = (await asyncio.wait_for(process.stdout.readline(), 600)).decode()
        if not line:
            err = await process.stderr.read() if process.stderr else b""
            raise RuntimeError(f"emulator exited: {err.decode()[-2000:]}")
        if "kubeconfig written" in line:
            return process
    raise RuntimeError("emulator did not become ready")


async def measure(nodes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        print(f"[{nodes}] seeding the emulator with {nodes} Nodes and {nodes} slurmd pods ...", flush=True)
        seeded = time.perf_counter()
        emulator = await start_emulator(nodes, kubeconfig)
        print(f"[{nodes}] emulator ready in {time.perf_counter() - seeded:.1f} s", flush=True)
        try:
            client = await KubeClient.from_config(str(kubeconfig), qps=1000, burst=1000)
            gc.collect()
            rss_before = rss_mb()
            tracemalloc.start()
            cache = KubeCache(client)
            started = time.perf_counter()
            cache.start()
            await asyncio.wait_for(cache.wait_synced(), 300)
            sync_s = time.perf_counter() - started
            gc.collect()
            held_mb = tracemalloc.get_traced_memory()[0] / 1e6
            tracemalloc.stop()
            rss_after = rss_mb()
            counts = (len(cache.nodes.items), len(cache.pods.items))
            assert counts == (nodes, nodes), f"cache holds {counts}, expected {nodes} of each"
            await cache.stop()
            await client.close()
        finally:
            emulator.send_signal(signal.SIGINT)
            await emulator.wait()
    return {"nodes": nodes, "sync_s": sync_s, "held_mb": held_mb, "rss_growth_mb": rss_after - rss_before}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    rows = [asyncio.run(measure(n)) for n in args.nodes]
    print()
    header = ("nodes+pods", "first sync s", "vs 10 s", "cache MB", "vs 60 MB", "RSS growth MB")
    print(f"{header[0]:>12} {header[1]:>13} {header[2]:>8} {header[3]:>9} {header[4]:>9} {header[5]:>14}")
    for row in rows:
        print(
            f"{int(row['nodes']):>6}+{int(row['nodes']):<5} {row['sync_s']:>13.2f}"
            f" {row['sync_s'] / TARGET_SYNC_S:>8.2f} {row['held_mb']:>9.1f}"
            f" {row['held_mb'] / TARGET_MB:>9.2f} {row['rss_growth_mb']:>14.1f}"
        )
    print("(ratios below 1.00 meet the target; cache MB = Python memory held by the caches, traced)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
