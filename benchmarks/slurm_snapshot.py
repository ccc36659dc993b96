"""Slurm snapshot cost against the real sandbox: slurmrestd time and bytes per full list, the
syncer's decode+diff time, their ratio, cache memory, and what polling costs on an idle cluster and on
one running jobs (how often the "changed since?" probe says "changed", and the bytes that follow).

    python benchmarks/slurm_snapshot.py --nodes 1000 10000 [--idle-seconds 60] [--slurm 24.11 26.05] [--hint]

--hint (releases whose slurmctld serves OpenMetrics, 26.05) measures both windows again with slurmctld's
node-state counts as the cache's change hint (`--slurm-metrics-url`, floor 30 s); its bytes include the
metrics reads.

--decode-only [--reasons TEXT ...] measures only the list and the syncer's decode of it, then again with every
node's reason set to each TEXT in the list's body (the sandbox's idle nodes have none).

"Busy" keeps short jobs starting and ending on the real node and three more real slurmd registered
(their pings and the job churn move slurmctld's one global node timestamp, as on a live cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import msgspec

from syncer.slurm.auth import TokenFile
from syncer.slurm.cache import NodeCache, diff
from syncer.slurm.client import NodeDecoder, SlurmClient, decode_nodes
from syncer.slurm.metrics_hint import MetricsReader
from syncer.slurm.models import NodeListResponse, NodesResponse
from syncer.testing.sandbox import RELEASE_ENV, RELEASES, Sandbox, up

T = TypeVar("T")
BUSY_SLURMD = ("bench-a", "bench-b", "bench-c")


async def raw_list(sandbox: Sandbox, version: str = "v0.0.42") -> tuple[float, bytes]:
    """One full node list as slurmrestd serves it: wall time to the last byte, and the body."""
    headers = {"X-SLURM-USER-TOKEN": sandbox.token_file.read_text().strip()}
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        async with session.get(f"{sandbox.rest_url}/slurm/{version}/nodes/", headers=headers) as response:
            body = await response.read()
        return time.perf_counter() - started, body


def slurm_cpu_seconds(sandbox: Sandbox) -> float:
    """slurmrestd's and slurmctld's CPU seconds so far (/proc/<pid>/stat: user and system, in clock ticks)."""
    total = 0.0
    for name in ("slurmrestd", "slurmctld"):
        if (pid := sandbox.pids.get(name)) is not None:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def decode_and_diff(body: bytes, previous: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    decoded = msgspec.json.decode(body, type=NodesResponse)
    nodes = {raw.name: raw.to_node() for raw in decoded.nodes}
    diff(previous, nodes)
    return time.perf_counter() - started, nodes


def _cpu(work: Callable[[], object]) -> float:
    started = time.thread_time()  # this thread's CPU: what the decode costs, apart from the machine's load
    work()
    return time.thread_time() - started


def _driven(coroutine: Coroutine[Any, Any, T]) -> T:
    """A coroutine whose only awaits are `asyncio.sleep(0)` (NodeDecoder.decode), run without an event loop:
    a loop's start and end would cost more than the work measured."""
    try:
        while True:
            coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def decode_costs(body: bytes, repeats: int) -> dict[str, float]:
    """CPU seconds (median of `repeats`) of the node cache's whole way from a list's body to its diff, as
    the client and cache do it (split into raw nodes, decoded a chunk at a time, diffed with the snapshot
    before): `before`, every node decoded and converted (`decode_nodes`, the code before issue 47);
    `after`, the NodeDecoder with the list before known (an unchanged node is its SlurmNode again);
    `after_all_changed`, a NodeDecoder that knows nothing (every node changed: the worst case)."""
    split = msgspec.json.Decoder(NodeListResponse)
    previous = {n.name: n for n in decode_nodes(split.decode(body).nodes)}
    warm = NodeDecoder()
    _driven(warm.decode(split.decode(body).nodes))

    def before() -> None:
        diff(previous, {n.name: n for n in decode_nodes(split.decode(body).nodes)})

    def after(decoder: NodeDecoder) -> None:
        nodes = _driven(decoder.decode(split.decode(body).nodes))
        diff(known, {n.name: n for n in nodes})

    known = {n.name: n for n in _driven(warm.decode(split.decode(body).nodes))}
    runs: dict[str, list[float]] = {"before": [], "after": [], "after_all_changed": []}
    for _ in range(repeats):  # interleaved: the machine's state weighs on each alike
        runs["before"].append(_cpu(before))
        runs["after"].append(_cpu(lambda: after(warm)))
        runs["after_all_changed"].append(_cpu(lambda: after(NodeDecoder())))
    return {kind: statistics.median(values) for kind, values in runs.items()}


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


@contextlib.contextmanager
def job_churn(sandbox: Sandbox, seconds: float) -> Iterator[None]:
    """Short jobs start and end on the real node until the block ends (bounded by `seconds` + 60)."""
    stop = threading.Event()

    def churn() -> None:
        deadline = time.monotonic() + seconds + 60
        while not stop.is_set() and time.monotonic() < deadline:
            sandbox.run("sbatch", "-w", sandbox.real_node, "--wrap", "sleep 1", timeout=30)
            stop.wait(2.0)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)
        sandbox.run("scancel", "-u", "root", timeout=30)


async def polling_cost(sandbox: Sandbox, seconds: float, hint: bool = False) -> dict[str, Any]:
    reader = MetricsReader(sandbox.metrics_url) if hint else None
    try:
        return await _polling_cost(sandbox, seconds, reader)
    finally:
        if reader is not None:
            await reader.close()


async def _polling_cost(sandbox: Sandbox, seconds: float, reader: MetricsReader | None) -> dict[str, Any]:
    async with SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file)) as client:
        cache = NodeCache(client, poll_interval_s=1.0, hint=reader, hint_floor_s=30.0)
        await cache.poll_once()  # first full list, not counted
        quiet_deadline = time.monotonic() + 30
        while time.monotonic() < quiet_deadline:  # let a fresh slurmctld settle first
            await cache.poll_once()
            if cache.stats.not_modified or cache.stats.hint_unchanged:
                break
        requests_before = sum(client.stats.requests.values())
        bytes_before = sum(client.stats.body_bytes.values()) + cache.stats.read_bytes["metrics"]
        hint_reads_before = cache.stats.reads["metrics"]
        fulls_before = cache.stats.full_fetches
        probes_before = cache.stats.probes
        changed_before = cache.stats.changed_as_500 + cache.stats.changed_as_200
        task = asyncio.create_task(cache.run())
        await asyncio.sleep(seconds)  # the measured window itself
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        per_minute = 60 / seconds
        return {
            "requests": (sum(client.stats.requests.values()) - requests_before) * per_minute,
            "bytes": (
                sum(client.stats.body_bytes.values()) + cache.stats.read_bytes["metrics"] - bytes_before
            )
            * per_minute,
            "hint_reads": (cache.stats.reads["metrics"] - hint_reads_before) * per_minute,
            "hint_errors": cache.stats.hint_errors,
            "full_fetches": (cache.stats.full_fetches - fulls_before) * per_minute,
            "probes": (cache.stats.probes - probes_before) * per_minute,
            "changed": (cache.stats.changed_as_500 + cache.stats.changed_as_200 - changed_before)
            * per_minute,
            "probe_answers": cache.stats.probe_answers,  # a word, not per minute
        }


def with_reason(body: bytes, reason: str) -> bytes:
    """The list `body` with every node's reason set to `reason` (the sandbox's idle nodes have none)."""
    listed = json.loads(body)
    for node in listed["nodes"]:
        node["reason"] = reason
    return json.dumps(listed).encode()


async def measure(
    nodes: int,
    idle_seconds: float,
    repeats: int,
    release: str,
    hint: bool,
    decode_only: bool = False,
    reasons: tuple[str, ...] = (),
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="slurm-bench-") as tmp:
        sandbox = up(Path(tmp) / "sbx", nodes=nodes, slurm=release)
        try:
            rest_times, syncer_times, newest_times = [], [], []
            previous: dict[str, Any] = {}
            body = b""
            slurm_cpu = 0.0
            for _ in range(repeats):
                before = slurm_cpu_seconds(sandbox)
                seconds, body = await raw_list(sandbox)
                slurm_cpu += slurm_cpu_seconds(sandbox) - before
                rest_times.append(seconds)
                spent, previous = decode_and_diff(body, previous)
                syncer_times.append(spent)
                newest_times.append((await raw_list(sandbox, sandbox.release.newest_api_version))[0])
            rest_s, syncer_s = statistics.median(rest_times), statistics.median(syncer_times)
            result: dict[str, Any] = {
                "release": sandbox.slurm_version.split("-")[0],
                "nodes": nodes,
                "slurmrestd_s": rest_s,
                "newest_version": sandbox.release.newest_api_version,
                "slurmrestd_newest_s": statistics.median(newest_times),
                "bytes": len(body),
                "syncer_s": syncer_s,
                "ratio": syncer_s / rest_s,
                "cache_mb": cache_memory_mb(body),
                # slurmrestd's and slurmctld's CPU per list (clock ticks, summed over the repeats): what the
                # list costs them whatever the machine's load, beside the decode's CPU
                "slurm_cpu_s": slurm_cpu / repeats,
            }
            costs = decode_costs(body, max(15, repeats))
            result.update({f"decode_cpu_{kind}_s": value for kind, value in costs.items()})
            for number, reason in enumerate(reasons):
                reasoned = with_reason(body, reason)
                costs = decode_costs(reasoned, max(15, repeats))
                result[f"reason_{number}"] = {
                    "reason": reason,
                    "cache_mb": cache_memory_mb(reasoned),
                    **{f"decode_cpu_{kind}_s": value for kind, value in costs.items()},
                }
            result["load_decode"] = os.getloadavg()
            if decode_only:
                return result
            hinted = hint and bool(sandbox.metrics_url)
            windows = [("idle", False), ("idle_hint", True)] if hinted else [("idle", False)]
            for kind, with_hint in windows:
                idle = await polling_cost(sandbox, idle_seconds, with_hint)
                result[f"{kind}_probe_answers"] = idle.pop("probe_answers")
                result[f"{kind}_hint_errors"] = idle.pop("hint_errors")
                result.update({f"{kind}_{k}_per_min": v for k, v in idle.items()})
            for name in BUSY_SLURMD:
                await asyncio.to_thread(sandbox.start_slurmd, name)
            for kind, with_hint in [("busy", False), ("busy_hint", True)] if hinted else [("busy", False)]:
                with job_churn(sandbox, idle_seconds):
                    busy = await polling_cost(sandbox, idle_seconds, with_hint)
                result[f"{kind}_probe_answers"] = busy.pop("probe_answers")
                result[f"{kind}_hint_errors"] = busy.pop("hint_errors")
                result.update({f"{kind}_{k}_per_min": v for k, v in busy.items()})
            result["load"] = os.getloadavg()
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
    parser.add_argument(
        "--slurm",
        nargs="+",
        choices=sorted(RELEASES),
        default=[os.environ.get(RELEASE_ENV) or "26.05"],
        help=f"Slurm releases to measure (default: ${RELEASE_ENV}, else 26.05)",
    )
    parser.add_argument("--hint", action="store_true", help="also measure with the slurmctld metrics hint")
    parser.add_argument(
        "--decode-only",
        action="store_true",
        help="slurmrestd's list time and the decode's CPU, no polling windows",
    )
    parser.add_argument(
        "--reasons",
        nargs="+",
        default=[],
        help="with --decode-only: the decode's CPU and the cache's memory again with every node's reason "
        "set to each of these texts in the list's body",
    )
    parser.add_argument("--out", type=Path, default=None, help="write DIR/results.json")
    args = parser.parse_args()
    if args.decode_only:
        return decode_only(args)
    print(
        "slurm    nodes  list_s(v42)  list_s(newest)  MB/list  syncer_s  ratio  cache_MB  "
        "| per min idle: probes changed full MB | busy: probes changed full MB"
    )
    for release in args.slurm:
        for count in args.nodes:
            r = asyncio.run(measure(count, args.idle_seconds, args.repeats, release, args.hint))

            def row(kind: str, r: dict[str, Any] = r) -> str:
                return (
                    f"{r[kind + '_probes_per_min']:>6.0f} {r[kind + '_changed_per_min']:>7.0f} "
                    f"{r[kind + '_full_fetches_per_min']:>4.0f} {r[kind + '_bytes_per_min'] / 1e6:>6.1f}"
                )

            print(
                f"{r['release']:<8} {count:>5}  {r['slurmrestd_s']:>11.3f}  "
                f"{r['slurmrestd_newest_s']:>14.3f}  {r['bytes'] / 1e6:>7.1f}  {r['syncer_s']:>8.4f}  "
                f"{r['ratio']:>5.3f}  "
                f"{r['cache_mb']:>8.1f}  | {row('idle')} | {row('busy')}  "
                f"(changed answered as HTTP {r['busy_probe_answers'] or '-'})",
                flush=True,
            )
            if "busy_hint_probes_per_min" in r:

                def hinted(kind: str, r: dict[str, Any] = r) -> str:
                    return (
                        f"{r[kind + '_hint_reads_per_min']:>6.0f} {r[kind + '_probes_per_min']:>6.0f} "
                        f"{r[kind + '_full_fetches_per_min']:>4.0f} {r[kind + '_bytes_per_min'] / 1e6:>6.1f} "
                        f"(hint errors {r[kind + '_hint_errors']})"
                    )

                print(
                    f"{'':<8} {'':>5}  with the metrics hint (floor 30 s), per min: hint reads, probes, "
                    f"full lists, MB | idle {hinted('idle_hint')} | busy {hinted('busy_hint')}  "
                    f"load {' '.join(f'{x:.2f}' for x in r['load'])}",
                    flush=True,
                )


def decode_only(args: argparse.Namespace) -> None:
    """slurmrestd's time per full list (wall, median) beside the syncer's decode CPU before and after."""
    rows = []
    print("slurm    nodes  list_s  decode CPU ms: before  after  all changed  | share of list: before  after")
    for release in args.slurm:
        for count in args.nodes:
            r = asyncio.run(
                measure(count, 0, args.repeats, release, False, decode_only=True, reasons=tuple(args.reasons))
            )
            rows.append(r)
            before, after, cpu = r["decode_cpu_before_s"], r["decode_cpu_after_s"], r["slurm_cpu_s"]
            print(
                f"{r['release']:<8} {count:>5}  {r['slurmrestd_s']:.3f}  "
                f"{before * 1000:>8.2f} {after * 1000:>6.2f} "
                f"{r['decode_cpu_after_all_changed_s'] * 1000:>8.2f}  | {before / r['slurmrestd_s']:.3f} "
                f"{after / r['slurmrestd_s']:.3f} | of its CPU ({cpu:.3f} s): "
                f"{before / cpu:.3f} {after / cpu:.3f}  "
                f"load {' '.join(f'{x:.2f}' for x in r['load_decode'])}",
                flush=True,
            )
            print(f"{'':<8} {'':>5}  cache MB {r['cache_mb']:.2f} (reason as listed)", flush=True)
            for number in range(len(args.reasons)):
                v = r[f"reason_{number}"]
                print(
                    f"{'':<8} {'':>5}  every reason {v['reason'][:40]!r} ({len(v['reason'].encode())} B): "
                    f"decode CPU ms {v['decode_cpu_before_s'] * 1000:.2f} "
                    f"{v['decode_cpu_after_s'] * 1000:.2f} {v['decode_cpu_after_all_changed_s'] * 1000:.2f}, "
                    f"cache MB {v['cache_mb']:.2f}",
                    flush=True,
                )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
