"""What a Prometheus scrape of the syncer's /metrics costs at 1,000 and 10,000 Slurm nodes, and how long it
holds the event loop (issue 47: at 10,000 nodes a scrape held it 0.5-0.85 s, no cordon or drain reconciled).

    python benchmarks/scrape_cost.py --nodes 1000 10000 [--baseline main] [--scrapes 5]

Per node count and code version, a process of its own: a SyncerService (never started, no Slurm I/O) whose
Kubernetes cache is synced from the emulator (`slurm-syncer kubeapi --slurmd-pods`: N Nodes, N slurmd pods)
and whose Slurm node cache holds N nodes, its HTTP server serving /metrics. The nodes are the client's own
decode (`NodeDecoder`, as the cache's lists) of slurmrestd's v0.0.42 node JSON as 26.05 lists it (states,
flags, reasons, partitions, gres), generated here: no slurmrestd runs, the objects are what the cache holds.
A ticker task on the loop wakes every 1 ms; `curl` (another process) scrapes. Per scrape: wall time, the
loop's longest gap between two ticks (its longest block, plus the 1 ms) in wall time and in the loop
thread's CPU time (the block itself, apart from the machine's load), the process's CPU seconds less the
ticker's own, and the body's bytes. Three kinds of scrape, `--scrapes` each:

- **all new**: every node object new since the last scrape (a fresh decode: the first scrape after a start);
- **10 % changed**: a list since the last scrape changed a tenth of the nodes (jobs started and ended);
- **unchanged**: no list since the last scrape.

`--baseline REV` measures that revision too, from a `git archive` with this file laid over it, before this
tree, for each node count: before and after in one run, and says whether both wrote the same text for the
same nodes (a last scrape each; only the process's own CPU, memory and start times and the counters'
creation times may differ).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("all new", "10 % changed", "unchanged")
STATES = (  # (state flags as slurmrestd lists them, share of the nodes)
    (["ALLOCATED"], 0.55),
    (["MIXED"], 0.2),
    (["IDLE"], 0.15),
    (["IDLE", "DRAIN"], 0.03),
    (["MIXED", "DRAIN"], 0.02),
    (["ALLOCATED", "COMPLETING"], 0.02),
    (["DOWN", "NOT_RESPONDING"], 0.01),
    (["IDLE", "CLOUD", "POWERED_DOWN"], 0.02),
)


def node_json(index: int, width: int, rng: random.Random, stamp: int) -> dict[str, Any]:
    """One node as slurmrestd 26.05 lists it (v0.0.42; the fields the syncer decodes and some it skips)."""
    state = rng.choices([s for s, _ in STATES], [w for _, w in STATES])[0]
    gpu = index % 4 != 0  # three nodes in four have GPUs
    cpus, used = 128, rng.choice((0, 32, 64, 128)) if "IDLE" not in state else 0
    number = {"set": True, "infinite": False, "number": stamp}
    return {
        "architecture": "x86_64", "burstbuffer_network_address": "", "boards": 1, "boot_time": number,
        "cluster_name": "", "cores": 32, "specialized_cores": 0, "cpu_binding": 0,
        "cpu_load": 1234, "free_mem": {"set": True, "infinite": False, "number": 900000},
        "cpus": cpus, "effective_cpus": cpus, "specialized_cpus": "", "energy": {}, "external_sensors": {},
        "extra": "", "power": {}, "features": ["ib", "h100" if gpu else "cpu"],
        "active_features": ["ib", "h100" if gpu else "cpu"],
        "gres": "gpu:h100:8(S:0-1)" if gpu else "",
        "gres_drained": "N/A",
        "gres_used": f"gpu:h100:{used // 16}(IDX:0-{max(used // 16 - 1, 0)})" if gpu else "",
        "instance_id": "", "instance_type": "", "last_busy": number, "mcs_label": "",
        "specialized_memory": 0, "name": f"sbx-{index:0{width}d}",
        "next_state_after_reboot": ["INVALID"], "address": f"10.0.{index // 256}.{index % 256}",
        "hostname": f"sbx-{index:0{width}d}", "state": state, "operating_system": "Linux 6.1.0",
        "owner": "", "partitions": ["batch", "gpu" if gpu else "cpu"], "port": 6818,
        "real_memory": 1031000, "res_cores_per_gpu": 0, "comment": "",
        "reason": "admin: bad dimm" if "DRAIN" in state else "",
        "reason_changed_at": number if "DRAIN" in state else {"set": True, "infinite": False, "number": 0},
        "reason_set_by_user": "root" if "DRAIN" in state else "",
        "resume_after": {"set": True, "infinite": False, "number": 0},
        "reservation": "", "alloc_memory": used * 8000, "alloc_cpus": used, "alloc_idle_cpus": cpus - used,
        "tres_used": f"cpu={used}", "tres_weighted": float(used), "slurmd_start_time": number,
        "sockets": 2, "threads": 2, "temporary_disk": 0, "weight": 1, "topology": "",
        "tres": f"cpu={cpus},mem=1031000M,billing={cpus}", "version": "26.05.5",
    }  # fmt: skip


def listing(nodes: int, seed: int, changed: float = 0.0, base: list[dict[str, Any]] | None = None) -> bytes:
    """A full list's body; with `base`, that list with a share `changed` of its nodes' allocations moved."""
    rng = random.Random(seed)
    width = max(5, len(str(nodes)))
    if base is None:
        items = [node_json(i, width, rng, 1_764_000_000) for i in range(nodes)]
    else:
        items = [dict(item) for item in base]
        for index in rng.sample(range(nodes), int(nodes * changed)):
            used = (items[index]["alloc_cpus"] + 16) % 128
            items[index].update(alloc_cpus=used, tres_used=f"cpu={used}")
    return json.dumps({"nodes": items, "last_update": {"set": True, "number": 1}}).encode()


class Ticker:
    """A task waking every 1 ms; the gaps between its wakings (wall and this thread's CPU), with when each
    ended. A wall gap counts the time the machine's load kept the process off a core too; the CPU gap is what
    the loop itself ran meanwhile, the same on a quiet and a busy machine."""

    def __init__(self) -> None:
        self.gaps: list[tuple[float, float, float]] = []

    async def run(self) -> None:
        last, last_cpu = time.perf_counter(), time.thread_time()
        while True:
            await asyncio.sleep(0.001)
            now, cpu = time.perf_counter(), time.thread_time()
            self.gaps.append((now, now - last, cpu - last_cpu))
            last, last_cpu = now, cpu

    def longest(self, start: float, end: float) -> tuple[float, float]:
        """The longest wall gap and the longest CPU gap among the wakings in [start, end] (and just after)."""
        during = [(wall, cpu) for at, wall, cpu in self.gaps if start < at <= end + 0.05]
        return max((w for w, _ in during), default=0.0), max((c for _, c in during), default=0.0)


async def scrape(url: str, body: Path | None = None) -> tuple[float, float, int, float]:
    """One scrape by curl (its body kept in `body`): (start, end, bytes, process CPU seconds meanwhile)."""
    process = await asyncio.create_subprocess_exec(
        "curl", "-s", "-o", str(body or "/dev/null"), "-w", "%{size_download}", url,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    start, cpu = time.perf_counter(), time.process_time()
    out, _ = await process.communicate()
    end, cpu = time.perf_counter(), time.process_time() - cpu
    return start, end, int(out or b"0"), cpu


def comparable(text: str) -> list[str]:
    """A scrape's lines but the values that differ from process to process: its own CPU, memory and start
    (process_*) and when each counter was created (*_created)."""
    return [
        line.rpartition(" ")[0] if line.startswith("process_") or "_created" in line.split(" ")[0] else line
        for line in text.splitlines()
    ]


async def measure(nodes: int, scrapes: int, keep: Path | None = None) -> dict[str, Any]:
    import msgspec

    from benchmarks.kube_cache import start_emulator
    from syncer.app.service import ServiceConfig, SyncerService
    from syncer.kube.client import KubeClient
    from syncer.slurm.auth import NoToken
    from syncer.slurm.client import NodeDecoder, SlurmClient
    from syncer.slurm.models import NodeListResponse

    def raw(body: bytes) -> list[msgspec.Raw]:
        return msgspec.json.decode(body, type=NodeListResponse).nodes

    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        emulator = await start_emulator(nodes, kubeconfig)
        try:
            kube = await KubeClient.from_config(str(kubeconfig), qps=1000, burst=1000)
            slurm = SlurmClient("http://127.0.0.1:9", NoToken())
            service = SyncerService(slurm, kube, ServiceConfig(listen_host="127.0.0.1", listen_port=0))
            try:
                service.kube_cache.start()
                await asyncio.wait_for(service.kube_cache.wait_synced(), 600)
                base = json.loads(listing(nodes, seed=1))["nodes"]
                decoder = NodeDecoder()
                service.slurm_cache.nodes = {n.name: n for n in await decoder.decode(raw(listing(nodes, 1)))}
                await service._serve_http()  # the daemon's own /metrics handler
                url = f"http://127.0.0.1:{service.http_port}/metrics"
                ticker = Ticker()
                task = asyncio.create_task(ticker.run())
                idle_cpu = time.process_time()
                await asyncio.sleep(1.0)
                ticker_cpu_per_s = time.process_time() - idle_cpu  # the ticker's own cost, taken off
                rows: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
                await scrape(url)  # warm: the handler's first call
                for round_ in range(scrapes):
                    for kind in KINDS:
                        if kind == "all new":
                            fresh = await NodeDecoder().decode(raw(listing(nodes, 1)))
                            service.slurm_cache.nodes = {n.name: n for n in fresh}
                        elif kind == "10 % changed":
                            body = listing(nodes, seed=100 + round_, changed=0.1, base=base)
                            service.slurm_cache.nodes = {n.name: n for n in await decoder.decode(raw(body))}
                        await asyncio.sleep(0.2)  # the decode's garbage and the ticker settle
                        start, end, size, cpu = await scrape(url)
                        wall = end - start
                        block, block_cpu = ticker.longest(start, end)
                        rows[kind].append(
                            {
                                "wall_s": wall,
                                "block_s": block,
                                "block_cpu_s": block_cpu,
                                "cpu_s": max(0.0, cpu - ticker_cpu_per_s * wall),
                                "bytes": size,
                            }
                        )
                task.cancel()
                await scrape(url, keep)  # the text after the last "unchanged": the same nodes for every code
            finally:
                await service.kube_cache.stop()
                await service.stop()
                await kube.close()
        finally:
            emulator.send_signal(signal.SIGINT)
            await emulator.wait()
    return {"nodes": nodes, "load": os.getloadavg()[0], "rows": rows}


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    return {
        "block_p50_ms": 1000 * statistics.median(r["block_s"] for r in rows),
        "block_max_ms": 1000 * max(r["block_s"] for r in rows),
        "block_cpu_p50_ms": 1000 * statistics.median(r["block_cpu_s"] for r in rows),
        "block_cpu_max_ms": 1000 * max(r["block_cpu_s"] for r in rows),
        "cpu_p50_ms": 1000 * statistics.median(r["cpu_s"] for r in rows),
        "wall_p50_ms": 1000 * statistics.median(r["wall_s"] for r in rows),
        "bytes": statistics.median(r["bytes"] for r in rows),
    }


def child(tree: Path, nodes: int, scrapes: int, body: Path) -> dict[str, Any]:
    """One measurement in a process of its own, the code of `tree` imported (its root first on the path)."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.scrape_cost",
        "--child",
        str(nodes),
        "--scrapes",
        str(scrapes),
        "--body",
        str(body),
    ]
    out = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the measurement failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--scrapes", type=int, default=5, help="scrapes of each kind")
    parser.add_argument("--baseline", default="", help="a revision measured before this tree (e.g. main)")
    parser.add_argument("--out", type=Path, default=None, help="write every scrape's figures here (JSON)")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--body", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.child, args.scrapes, args.body))))
        return 0
    sys.path.insert(0, str(ROOT))  # run as a script: the repo root
    from benchmarks.run import machine_reference_s

    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; uptime: {uptime()}", flush=True)
    print(f"machine reference: {machine_reference_s():.2f} s", flush=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("this tree", ROOT)]
        if args.baseline:
            base = Path(tmp) / "base"
            base.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline], capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
            shutil.copy(Path(__file__), base / "benchmarks" / "scrape_cost.py")  # measured the same way
            commit = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", args.baseline],
                capture_output=True,
                text=True,
            ).stdout.strip()
            trees.insert(0, (f"{args.baseline} ({commit})", base))
        for nodes in args.nodes:
            texts: list[list[str]] = []
            for index, (label, tree) in enumerate(trees):
                print(f"[{nodes} nodes, {label}] measuring ...", flush=True)
                body = Path(tmp) / f"body-{nodes}-{index}.txt"
                result = child(tree, nodes, args.scrapes, body)
                texts.append(comparable(body.read_text()))
                result["code"] = label
                results.append(result)
                for kind in KINDS:
                    s, n = summary(result["rows"][kind]), len(result["rows"][kind])
                    print(
                        f"  {kind:>13}: loop block wall p50 {s['block_p50_ms']:6.1f}"
                        f" max {s['block_max_ms']:6.1f} ms, CPU p50 {s['block_cpu_p50_ms']:6.1f}"
                        f" max {s['block_cpu_max_ms']:6.1f} ms;"
                        f" scrape CPU p50 {s['cpu_p50_ms']:6.1f} ms, wall p50 {s['wall_p50_ms']:6.1f} ms;"
                        f" {s['bytes'] / 1e3:7.1f} kB (n={n}, load {result['load']:.1f})",
                        flush=True,
                    )
            if len(texts) == 2:
                same = texts[0] == texts[1]
                print(f"  the same text as {trees[0][0]}: {'yes' if same else 'NO'} ({len(texts[1])} lines)")
    print(f"uptime after: {uptime()}")
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
