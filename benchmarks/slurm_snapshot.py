"""Slurm snapshot cost against the real sandbox: slurmrestd time and bytes per full list, the
syncer's decode+diff time, their ratio, cache memory, and the cost of idle polling.

    python benchmarks/slurm_snapshot.py --nodes 1000 10000 [--idle-seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import aiohttp
import msgspec

from syncer.slurm.auth import TokenFile
from syncer.slurm.cache import NodeCache, diff
from syncer.slurm.client import SlurmClient
from syncer.slurm.models import NodesResponse
from syncer.testing.sandbox import Sandbox, up


async def raw_list(sandbox: Sandbox) -> tuple[float, bytes]:
    """One full node list as slurmrestd serves it: wall time to the last byte, and the body."""
    headers = {"X-SLURM-USER-TOKEN": sandbox.token_file.read_text().strip()}
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        async with session.get(f"{sandbox.rest_url}/slurm/v0.0.42/nodes/", headers=headers) as response:
            body = await response.read()
        return time.perf_counter() - started, body


def decode_and_diff(body: bytes, previous: dict[str, object]) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    decoded = msgspec.json.decode(body, type=NodesResponse)
    nodes = {raw.name: raw.to_node() for raw in decoded.nodes}
    diff(previous, nodes)  # type: ignore[arg-type]
    return time.perf_counter() - started, nodes  # type: ignore[return-value]


def cache_memory_mb(body: bytes) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    decoded = msgspec.json.decode(body, type=NodesResponse)
    nodes = {raw.name: raw.to_node() for raw in decoded.nodes}
    del decoded
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert nodes
    return size / 1e6


async def idle_cost(sandbox: Sandbox, seconds: float) -> dict[str, float]:
    async with SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file)) as client:
        cache = NodeCache(client, poll_interval_s=1.0)
        await cache.poll_once()  # first full list, not counted
        quiet_deadline = time.monotonic() + 30
        while time.monotonic() < quiet_deadline:  # let a fresh slurmctld settle first
            await cache.poll_once()
            if cache.stats.not_modified:
                break
        requests_before = sum(client.stats.requests.values())
        bytes_before = sum(client.stats.body_bytes.values())
        fulls_before = cache.stats.full_fetches
        task = asyncio.create_task(cache.run())
        await asyncio.sleep(seconds)  # the measured idle window itself
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        per_minute = 60 / seconds
        return {
            "requests": (sum(client.stats.requests.values()) - requests_before) * per_minute,
            "bytes": (sum(client.stats.body_bytes.values()) - bytes_before) * per_minute,
            "full_fetches": (cache.stats.full_fetches - fulls_before) * per_minute,
        }


async def measure(nodes: int, idle_seconds: float, repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="slurm-bench-") as tmp:
        sandbox = up(Path(tmp) / "sbx", nodes=nodes)
        try:
            rest_times, syncer_times = [], []
            previous: dict[str, object] = {}
            body = b""
            for _ in range(repeats):
                seconds, body = await raw_list(sandbox)
                rest_times.append(seconds)
                spent, previous = decode_and_diff(body, previous)
                syncer_times.append(spent)
            rest_s, syncer_s = statistics.median(rest_times), statistics.median(syncer_times)
            result = {
                "nodes": nodes,
                "slurmrestd_s": rest_s,
                "bytes": len(body),
                "syncer_s": syncer_s,
                "ratio": syncer_s / rest_s,
                "cache_mb": cache_memory_mb(body),
            }
            result.update(
                {f"idle_{k}_per_min": v for k, v in (await idle_cost(sandbox, idle_seconds)).items()}
            )
            return result
        finally:
            sandbox.down()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(
        "nodes  slurmrestd_s  MB/list  syncer_s  ratio(<=0.05)  cache_MB(<=15@10k)  idle/min: req bytes full"
    )
    for count in args.nodes:
        r = asyncio.run(measure(count, args.idle_seconds, args.repeats))
        print(
            f"{count:>5}  {r['slurmrestd_s']:>12.3f}  {r['bytes'] / 1e6:>7.1f}  {r['syncer_s']:>8.4f}  "
            f"{r['ratio']:>13.3f}  {r['cache_mb']:>18.1f}  {r['idle_requests_per_min']:>13.0f}  "
            f"{r['idle_bytes_per_min']:>5.0f}  {r['idle_full_fetches_per_min']:>4.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
