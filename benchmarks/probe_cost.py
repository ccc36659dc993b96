"""What one "changed since?" probe of the node list costs, beside a full list (issue 47: how often the node
cache may probe where slurmctld serves no metrics hint, 24.11).

    python benchmarks/probe_cost.py --slurm 24.11 --nodes 1000 --probes 200 --lists 20 [--out DIR]

Real Slurm sandbox with `--nodes` CLOUD nodes. Three kinds of request, one after another, each `n` times:
`GET /nodes/?update_time=<last_update>` answered 304 (nothing changed), the same once a node has changed and
the partitions have not (24.11 answers HTTP 500 "Unable to query partitions", 26.05.3+ the whole list), and
the full list. Per kind: the client's wall time (p50/p99), the body bytes, and slurmctld's own time
serving it from `sdiag`'s RPC table (REQUEST_NODE_INFO and REQUEST_PARTITION_INFO: count and total
microseconds, before and after), per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.power import percentile, uptime
from syncer.testing.sandbox import Sandbox, up

RPC = re.compile(r"^\s*(REQUEST_\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)", re.M)
WATCHED = ("REQUEST_NODE_INFO", "REQUEST_PARTITION_INFO")


def summary_ms(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 0.5) * 1000, 2), "p99": round(percentile(values, 0.99) * 1000, 2)}


def rpc_table(sandbox: Sandbox) -> dict[str, tuple[int, int]]:
    """sdiag's RPC table: type -> (count, total microseconds)."""
    out = sandbox.run("sdiag", check=True).stdout
    return {name: (int(count), int(total)) for name, count, total in RPC.findall(out)}


async def timed(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> tuple[float, int, int]:
    started = time.perf_counter()
    async with session.get(url, headers=headers) as response:
        body = await response.read()
        return time.perf_counter() - started, response.status, len(body)


async def kind(sandbox: Sandbox, label: str, url: str, count: int) -> dict[str, Any]:
    headers = {"X-SLURM-USER-TOKEN": sandbox.token_file.read_text().strip()}
    before = await asyncio.to_thread(rpc_table, sandbox)
    took, statuses, sizes = [], set(), []
    async with aiohttp.ClientSession() as session:
        for _ in range(count):
            seconds, status, size = await timed(session, url, headers)
            took.append(seconds)
            statuses.add(status)
            sizes.append(size)
    after = await asyncio.to_thread(rpc_table, sandbox)
    slurmctld = {}
    for rpc in WATCHED:
        calls = after.get(rpc, (0, 0))[0] - before.get(rpc, (0, 0))[0]
        micros = after.get(rpc, (0, 0))[1] - before.get(rpc, (0, 0))[1]
        slurmctld[rpc] = {"calls_per_request": calls / count, "us_per_request": micros / count}
    return {
        "kind": label,
        "n": count,
        "status": sorted(statuses),
        "bytes": max(sizes),
        "client_ms": summary_ms(took),
        "slurmctld": slurmctld,
    }


async def quiet_update_time(base: str, headers: dict[str, str]) -> int:
    """The node list's `last_update` once a probe at it answers 304 (a fresh slurmctld settles first)."""
    deadline = time.monotonic() + 300
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(base, headers=headers) as response:
                last = json.loads(await response.read())["last_update"]
            last_update = last["number"] if isinstance(last, dict) else int(last)
            await asyncio.sleep(2)
            async with session.get(f"{base}?update_time={last_update}", headers=headers) as response:
                if response.status == 304:
                    return last_update
            if time.monotonic() > deadline:
                raise RuntimeError("slurmctld's node list never stood still for 2 s")


async def run(release: str, nodes: int, probes: int, lists: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        sandbox = up(Path(tmp) / "slurm", nodes=nodes, slurm=release)
        try:
            base = f"{sandbox.rest_url}/slurm/{sandbox.release.newest_api_version}/nodes/"
            headers = {"X-SLURM-USER-TOKEN": sandbox.token_file.read_text().strip()}
            last_update = await quiet_update_time(base, headers)
            results: dict[str, Any] = {"slurm": sandbox.slurm_version, "nodes": nodes}
            results["load_before"] = uptime()
            results["kinds"] = [
                await kind(sandbox, "probe, nothing changed", f"{base}?update_time={last_update}", probes),
            ]
            # a node changes after `last_update`, the partitions do not (what a power-up looks like)
            node = f"nodename={sandbox.real_node}"
            await asyncio.to_thread(sandbox.scontrol, "update", node, "comment=probe")
            results["kinds"] += [
                await kind(sandbox, "probe, a node changed", f"{base}?update_time={last_update}", probes),
                await kind(sandbox, "full list", base, lists),
            ]
            results["load_after"] = uptime()
            return results
        finally:
            sandbox.down()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slurm", choices=("26.05", "24.11"), default="24.11")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--lists", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = asyncio.run(run(args.slurm, args.nodes, args.probes, args.lists))
    print(f"Slurm {results['slurm']}, {results['nodes']} nodes; load {results['load_before']} -> "
          f"{results['load_after']}; pid {os.getpid()}")  # fmt: skip
    for row in results["kinds"]:
        ctld = ", ".join(
            f"{rpc} {v['calls_per_request']:.2f} calls {v['us_per_request']:.0f} us"
            for rpc, v in row["slurmctld"].items()
        )
        client = row["client_ms"]
        print(
            f"{row['kind']:<24} n={row['n']:<4} HTTP {row['status']} {row['bytes']:>9} B  "
            f"client p50 {client['p50']:.1f} ms p99 {client['p99']:.1f} ms | slurmctld {ctld}"
        )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
