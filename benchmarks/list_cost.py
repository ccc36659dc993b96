"""What a full node list costs slurmrestd, where in it the node states are taken, and what it does to the
single-node requests beside it (issue 47, the 10,000-node latencies).

    python benchmarks/list_cost.py --slurm 26.05 --nodes 10000 --lists 4 --out DIR

Real Slurm sandbox with `--nodes` CLOUD nodes. Three parts, one after another:

- **variants**: `GET /slurm/<v>/nodes/` for every REST version the release serves and each `flags` value,
  `--lists` times each, taking turns (so a slower moment of the machine falls on every variant alike). Per
  variant: the client's wall time, the time to the first byte of the answer, its bytes, slurmrestd's CPU
  seconds (/proc of its process, every thread) and slurmctld's own time for the RPCs the list made
  (`sdiag`'s REQUEST_NODE_INFO and REQUEST_PARTITION_INFO, before and after).
- **when**: a list is asked for, and a node is drained `delay` seconds later (its POST answered): is the drain
  in that list? Tells which drains a list in flight can still bring.
- **single**: `GET /node/{name}` and a node update (a comment) one after another, alone, then while one list
  and while two lists run back to back: p50 / p99 / max of each.

`--relay` sends every request through the wire relay the other benchmarks put in front of slurmrestd
(benchmarks/wire.py, in this process); `--parts single` runs only the last part.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.power import percentile, uptime
from benchmarks.run import cpu_seconds, machine_reference_s
from benchmarks.wire import WireCounter
from syncer.testing.sandbox import Sandbox, up

RPC = re.compile(r"^\s*(REQUEST_\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)", re.M)
WATCHED = ("REQUEST_NODE_INFO", "REQUEST_PARTITION_INFO")
FLAGS = ("", "ALL", "DETAIL", "MIXED")  # "" = slurmrestd's default (ALL, DETAIL and MIXED together)


def rpc_table(sandbox: Sandbox) -> dict[str, tuple[int, int]]:
    """sdiag's RPC table: type -> (count, total microseconds)."""
    out = sandbox.run("sdiag", check=True).stdout
    return {name: (int(count), int(total)) for name, count, total in RPC.findall(out)}


@dataclass(frozen=True)
class Got:
    wall: float
    first_byte: float  # the answer's headers arrived: slurmrestd had the whole body by then
    body: bytes


class Rest:
    def __init__(self, sandbox: Sandbox, base: str = "") -> None:
        self.sandbox = sandbox
        self.base = base or sandbox.rest_url  # slurmrestd, or the benchmarks' wire relay in front of it
        self.headers = {"X-SLURM-USER-TOKEN": sandbox.token_file.read_text().strip()}
        self.newest = sandbox.release.newest_api_version
        self.sessions: list[aiohttp.ClientSession] = []

    def session(self) -> aiohttp.ClientSession:
        """A session of its own (its own connections): lists and single requests never share one."""
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300))
        self.sessions.append(session)
        return session

    def url(self, path: str, version: str | None = None) -> str:
        return f"{self.base}/slurm/{version or self.newest}{path}"

    async def timed_get(self, session: aiohttp.ClientSession, url: str) -> Got:
        started = time.perf_counter()
        async with session.get(url, headers=self.headers) as response:
            first = time.perf_counter()
            body = await response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {url}: HTTP {response.status} {body[:200]!r}")
        return Got(time.perf_counter() - started, first - started, body)

    async def update(self, session: aiohttp.ClientSession, node: str, body: dict[str, Any]) -> float:
        started = time.perf_counter()
        async with session.post(self.url(f"/node/{node}"), headers=self.headers, json=body) as response:
            text = await response.read()
            if response.status != 200:
                raise RuntimeError(f"POST node {node}: HTTP {response.status} {text[:200]!r}")
        return time.perf_counter() - started

    async def close(self) -> None:
        for session in self.sessions:
            await session.close()


def ms(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 0.5) * 1000, 1),
        "p99": round(percentile(values, 0.99) * 1000, 1),
        "max": round(max(values) * 1000, 1),
        "n": len(values),
    }


async def variants(rest: Rest, lists: int) -> list[dict[str, Any]]:
    sandbox = rest.sandbox
    pid = sandbox.pids["slurmrestd"]
    session = rest.session()
    kinds = [(v, f) for v in sandbox.api_versions if v >= "v0.0.42" for f in FLAGS]
    rows: dict[tuple[str, str], dict[str, list[float]]] = {k: {} for k in kinds}
    for _ in range(lists):
        for version, flags in kinds:
            url = rest.url("/nodes/", version) + (f"?flags={flags}" if flags else "")
            before_rpc = await asyncio.to_thread(rpc_table, sandbox)
            cpu0 = cpu_seconds(pid)
            got = await rest.timed_get(session, url)
            cpu = cpu_seconds(pid) - cpu0
            after_rpc = await asyncio.to_thread(rpc_table, sandbox)
            row = rows[(version, flags)]
            row.setdefault("wall", []).append(got.wall)
            row.setdefault("first_byte", []).append(got.first_byte)
            row.setdefault("bytes", []).append(len(got.body))
            row.setdefault("slurmrestd_cpu", []).append(cpu)
            for rpc in WATCHED:
                micros = after_rpc.get(rpc, (0, 0))[1] - before_rpc.get(rpc, (0, 0))[1]
                row.setdefault(rpc, []).append(micros / 1e6)
    out = []
    for (version, flags), row in rows.items():
        out.append(
            {
                "version": version,
                "flags": flags or "(default: ALL, DETAIL, MIXED)",
                "n": lists,
                "wall_s": round(statistics.median(row["wall"]), 3),
                "first_byte_s": round(statistics.median(row["first_byte"]), 3),
                "bytes": int(statistics.median(row["bytes"])),
                "slurmrestd_cpu_s": round(statistics.median(row["slurmrestd_cpu"]), 3),
                **{f"{rpc}_s": round(statistics.median(row[rpc]), 4) for rpc in WATCHED},
            }
        )
    return out


def drained_in(body: bytes, node: str) -> bool:
    for entry in json.loads(body)["nodes"]:
        if entry["name"] == node:
            return "DRAIN" in entry["state"]
    raise RuntimeError(f"{node} not in the list")


async def when(rest: Rest, nodes: list[str], delays: list[float]) -> list[dict[str, Any]]:
    """Is a drain whose POST answered `delay` s after the list was asked for in that list?"""
    lister, writer = rest.session(), rest.session()
    out = []
    for i, delay in enumerate(delays):
        node = nodes[i % len(nodes)]
        listed = asyncio.create_task(rest.timed_get(lister, rest.url("/nodes/")))
        asked = time.perf_counter()
        await asyncio.sleep(delay)
        await rest.update(writer, node, {"state": ["DRAIN"], "reason": "list_cost when"})
        answered = time.perf_counter() - asked
        got = await listed
        out.append(
            {
                "delay_s": delay,
                "drain_answered_s": round(answered, 4),
                "list_s": round(got.wall, 3),
                "in_list": drained_in(got.body, node),
            }
        )
        await rest.update(writer, node, {"state": ["UNDRAIN"]})
    return out


async def single(rest: Rest, node: str, count: int, lists_in_flight: int) -> dict[str, Any]:
    """`count` single reads and updates one after another while `lists_in_flight` lists run back to back."""
    stop = asyncio.Event()
    listed = 0

    async def lister() -> None:
        nonlocal listed
        session = rest.session()
        while not stop.is_set():
            await rest.timed_get(session, rest.url("/nodes/"))
            listed += 1

    listers = [asyncio.create_task(lister()) for _ in range(lists_in_flight)]
    if lists_in_flight:
        await asyncio.sleep(0.5)  # the lists are under way
    session = rest.session()
    reads: list[float] = []
    writes: list[float] = []
    pid = rest.sandbox.pids["slurmrestd"]
    cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
    try:
        for i in range(count):
            reads.append((await rest.timed_get(session, rest.url(f"/node/{node}"))).wall)
            writes.append(await rest.update(session, node, {"comment": f"list_cost {i}"}))
            await asyncio.sleep(random.uniform(0.0, 0.05))  # not in step with the lists
    finally:
        stop.set()
        busy = (cpu_seconds(pid) - cpu0) / (time.perf_counter() - wall0)
        await asyncio.gather(*listers)
    return {
        "lists_in_flight": lists_in_flight,
        "lists_done": listed,
        "slurmrestd_cores": round(busy, 2),
        "read_ms": ms(reads),
        "update_ms": ms(writes),
    }


async def timed(label: str, step: Callable[[], Awaitable[Any]]) -> Any:
    started = time.monotonic()
    result = await step()
    print(f"  {label}: {time.monotonic() - started:.0f} s, load {uptime()}", flush=True)
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-listcost-") as tmp:
        sandbox = up(Path(tmp) / "slurm", nodes=args.nodes, slurm=args.slurm)
        try:
            async with WireCounter(sandbox.rest_url) as wire:
                return await measure(args, Rest(sandbox, wire.url if args.relay else ""))
        finally:
            sandbox.down()


async def measure(args: argparse.Namespace, rest: Rest) -> dict[str, Any]:
    try:
        results: dict[str, Any] = {
            "slurm": rest.sandbox.slurm_version,
            "nodes": args.nodes,
            "through_the_wire_relay": args.relay,
            "load_before": uptime(),
            "machine_reference_s": round(machine_reference_s(), 3),
        }
        names = rest.sandbox.node_names[1:]
        await rest.timed_get(rest.session(), rest.url("/nodes/"))  # warm: the first list loads plugins
        if "variants" in args.parts:
            results["variants"] = await timed("variants", lambda: variants(rest, args.lists))
        if "when" in args.parts:
            delays = [d for d in (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.3) for _ in range(args.repeats)]
            results["when"] = await timed("when", lambda: when(rest, names[:50], delays))
        if "single" in args.parts:
            results["single"] = []
            for flights in (0, 1, 2):
                step = functools.partial(single, rest, names[-1], args.singles, flights)
                results["single"].append(await timed(f"single, {flights} lists", step))
        results["load_after"] = uptime()
        return results
    finally:
        await rest.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slurm", choices=("26.05", "24.11"), default="26.05")
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--lists", type=int, default=4, help="lists per variant")
    parser.add_argument("--repeats", type=int, default=3, help="drains per delay")
    parser.add_argument("--singles", type=int, default=200, help="single reads and updates per case")
    parser.add_argument("--relay", action="store_true", help="through the wire relay of benchmarks/run.py")
    parser.add_argument("--parts", nargs="+", default=["variants", "when", "single"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = asyncio.run(run(args))
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
