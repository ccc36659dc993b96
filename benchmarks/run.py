"""End-to-end benchmark: propagation latency both ways, idle cost, snapshot cost, memory and storms,
for the syncer (conditional polling) side by side with the full-poll approach (a whole node list every
30 s), against the real Slurm sandbox and the Kubernetes API emulator.

    python benchmarks/run.py --nodes 1000 --out results/1k
    python benchmarks/run.py --quick --out results/quick        # 100 nodes, a few changes (CI)

The syncer runs as its own process (`slurm-syncer run`), so its CPU and RSS are its own; the emulator
runs in this process, so Kubernetes-side changes and their observation are timestamped on one clock.
Writes DIR/results.json and DIR/latency_cdf.png and prints a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from syncer.model.keys import Keys
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.metrics_hint import MetricsReader
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.store import Change
from syncer.testing.processes import stop_process
from syncer.testing.sandbox import RELEASES, Sandbox, up
from syncer.testing.sandbox.config import free_port, sim_node_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.slurm_snapshot import decode_and_diff, raw_list
from benchmarks.wire import WireCounter

NAMESPACE = "slurm"
CLI = str(Path(sys.executable).parent / "slurm-syncer")
FETCH_RESULT = re.compile(r'(?:result|path|endpoint|what|source)="([^"]+)"')
# (mode, --slurm-poll-strategy, --slurm-poll-interval): this syncer, and its full-poll mode as a baseline
# and last, the full poller at the interval where its bytes per minute equal the syncer's (issue 18)
MODES = (
    ("syncer", "conditional", "1s"),
    ("slinky", "slinky-like", ""),
    ("baseline", "full", "30s"),
    ("equal", "full", ""),
)
PREFIX = {"syncer": "", "slinky": "slinky_", "baseline": "baseline_", "equal": "equal_cost_"}  # result keys
TARGETS = {
    1000: {"k8s_to_slurm_p99": 0.25, "annotation_to_slurm_p99": 0.25, "slurm_to_k8s_p99": 2.0},
    10000: {"k8s_to_slurm_p99": 0.5, "slurm_to_k8s_p99": 4.0},
}


def progress(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


# a percentile is reported only from enough samples to be more than one of them: below these counts the
# figure is the maximum of the samples and is labelled so (p99 of 50 samples would be the maximum)
MIN_SAMPLES = {"p95": 100, "p99": 1000}


def percentiles(values: list[float]) -> dict[str, float | None]:
    """n, p50, max, and p95/p99 only from at least MIN_SAMPLES samples (None below)."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    figures: dict[str, float | None] = {
        "n": len(ordered), "p50": pick(0.5), "max": ordered[-1],
        "not_shown": sum(1 for v in ordered if math.isinf(v)),  # past the deadline: counted, never dropped
    }  # fmt: skip
    for name, minimum in MIN_SAMPLES.items():
        figures[name] = pick(int(name[1:]) / 100) if len(ordered) >= minimum else None
    return figures


def p50_text(figures: dict[str, float | None]) -> str:
    return "n/a" if figures.get("p50") is None else f"{figures['p50']:.3f} s"


def tail_text(figures: dict[str, float | None]) -> str:
    """The highest honest tail figure: `p99 X s (n=N)`, else `p95 ...`, else `max of N X s`."""
    if not figures.get("n"):
        return "no samples"
    for name in ("p99", "p95"):
        value = figures.get(name)
        if value is not None:
            return f"{name} {value:.3f} s (n={figures['n']})"
    return f"max of {figures['n']} {figures['max'] or float('nan'):.3f} s"


def seed(kube: KubeApiEmulator, names: list[str]) -> None:
    kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    for name in names:
        node = f"k8s-{name}"
        kube.create("", "v1", "nodes", {"metadata": {"name": node}, "status": {"conditions": [ready]}})
        pod = {
            "metadata": {"name": f"slurmd-{name}", "labels": {Keys.NODE_NAME_LABEL: name}},
            "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
        }
        kube.create("", "v1", "pods", pod, namespace=NAMESPACE)


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User plus system CPU seconds a process has used so far (/proc/<pid>/stat); `children`: with those of
    its children it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_reference_s() -> float:
    """Seconds this machine takes for a fixed pure-Python workload (median of 3), recorded with every run:
    a shared VM's speed varies from day to day (the same 10,000-node list cost slurmrestd 1.15 s on
    2026-11-24 and 2.2 s on 2026-11-25), and figures from two runs compare only beside it."""

    def once() -> float:
        started = time.perf_counter()
        total = 0
        for i in range(5_000_000):
            total += i * i % 7
        return time.perf_counter() - started

    return statistics.median(once() for _ in range(3))


@dataclass
class Syncer:
    process: asyncio.subprocess.Process
    port: int
    started_at: float = 0.0  # monotonic: the process was spawned
    ready_at: float = 0.0  # monotonic: /readyz first answered 200

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    def rss_mb(self, field: str = "VmRSS") -> float:
        """Resident memory now (VmRSS) or its peak since the process started (VmHWM), in MB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    async def metrics(self) -> dict[str, float]:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{self.port}/metrics") as response:
                text = await response.text()
        totals: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            head, value = line.rsplit(" ", 1)
            name = head.split("{", 1)[0]
            key = name
            result = FETCH_RESULT.findall(head)
            labelled = ("slurm_syncer_slurm_fetches_total", "slurm_syncer_slurm_cache_reads_total",
                        "slurm_syncer_slurm_cache_read_bytes_total",
                        "slurm_syncer_slurm_request_seconds_total",
                        "slurm_syncer_exporter_reads_total", "slurm_syncer_slurm_requests_total",
                        "slurm_syncer_kube_requests_total")  # fmt: skip
            if name in labelled and result:
                key = ":".join([name, *result])  # e.g. slurm_syncer_exporter_reads_total:jobs:slurmrestd
            totals[key] = totals.get(key, 0.0) + float(value)
        return totals


@contextlib.asynccontextmanager
async def syncer(
    sandbox: Sandbox,
    kubeconfig: Path,
    strategy: str,
    interval: str,
    log: Path,
    *,
    slurm_url: str = "",
    tuned: bool = True,
    metrics_hint: str = "",
) -> AsyncIterator[Syncer]:
    """`tuned`: the safety valve off (--max-drain-fraction 1.0) and 200 QPS to the API server, as the
    latency rounds and the labelled storm run; otherwise the defaults (10 % valve, 50 QPS)."""
    port = free_port()
    if strategy == "slinky-like":  # benchmarks/slinky_like.py: Slinky's reconcile timing
        argv = [
            sys.executable, str(Path(__file__).with_name("slinky_like.py")), "--slurm-url",
            slurm_url or sandbox.rest_url, "--slurm-token-file", str(sandbox.token_file),
            "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, "--listen-port", str(port),
        ]  # fmt: skip
        async with _process(argv, port, log) as handle:
            yield handle
        return
    argv = [
        CLI, "--log-level", "warning", "--log-format", "json", "run",
        "--slurm-url", slurm_url or sandbox.rest_url, "--slurm-token-file", str(sandbox.token_file),
        "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, "--no-leader-election",
        "--listen-address", f"127.0.0.1:{port}", "--slurm-poll-strategy", strategy,
        "--slurm-poll-interval", interval, "--slurm-stale-after", "120s", "--no-nodeset-enabled",
    ]  # fmt: skip
    if metrics_hint and strategy == "conditional":
        # where slurmctld serves OpenMetrics (25.11+) an admin may turn the change hint on (issue 18)
        argv += ["--slurm-metrics-url", metrics_hint]
    if tuned:
        argv += ["--max-drain-fraction", "1.0", "--kube-qps", "200", "--kube-burst", "400"]
    async with _process(argv, port, log) as handle:
        yield handle


@contextlib.asynccontextmanager
async def _process(
    argv: list[str], port: int, log: Path, env: dict[str, str] | None = None
) -> AsyncIterator[Syncer]:
    """The syncer process until /readyz answers; `env`: variables on top of this process's environment."""
    out = await asyncio.to_thread(log.open, "ab")
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=out, stderr=out, env={**os.environ, **env} if env is not None else None
    )
    out.close()
    handle = Syncer(process, port, started_at=started)
    try:
        deadline = time.monotonic() + 300
        async with aiohttp.ClientSession() as http:
            while True:
                if process.returncode is not None:
                    raise RuntimeError(f"slurm-syncer exited ({process.returncode}); see {log}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                        if response.status == 200:
                            handle.ready_at = time.monotonic()
                            break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"slurm-syncer not ready within 300 s; see {log}")
                await asyncio.sleep(0.1)  # readiness poll
        yield handle
    finally:
        await stop_process(process)


@dataclass
class Bench:
    sandbox: Sandbox
    kube: KubeApiEmulator
    reader: SlurmClient
    names: list[str]
    metrics: MetricsReader | None = None  # slurmctld's OpenMetrics where the release serves them (26.05)
    cursor: int = 0
    seen: dict[str, float] = field(default_factory=dict)  # pod name -> time a watched change showed

    def take(self, count: int) -> list[str]:
        picked = [self.names[(self.cursor + i) % len(self.names)] for i in range(count)]
        self.cursor += count
        return picked

    async def slurm_shows(self, name: str, drained: bool, deadline_s: float) -> float:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            node = await self.reader.get_node(name)
            if node.drain_flag == drained:
                return time.monotonic()
            await asyncio.sleep(0.02)  # read-back poll of one node (adds at most 20 ms)
        raise TimeoutError(f"Slurm never showed {name} {'drained' if drained else 'undrained'}")

    async def drained_count(self) -> int | None:
        """Nodes with the drain flag as slurmctld's own metrics count them (26.05: 12 KB, no list, so a
        storm's end is seen within 50 ms, not within one 1.2 s list at 10,000 nodes); None on 24.11."""
        if self.metrics is None:
            return None
        reading = await self.metrics.read()
        return sum(count for _, state, count in reading.fingerprint if state == "drain")

    async def kube_shows(self, pod: str, check: Callable[[dict[str, Any]], bool], deadline_s: float) -> float:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            obj = self.kube.pod(NAMESPACE, pod) or {}
            if check(obj):
                return self.seen.get(pod, time.monotonic())
            await asyncio.sleep(0.005)  # the store listener stamps the exact moment
        raise TimeoutError(f"Kubernetes never showed the change on {pod}")


# (direction, wall-clock start, seconds) of every sample, to be read beside the syncer's log
STAMPED: list[tuple[str, float, float, str]] = []


async def latency_round(
    bench: Bench,
    changes: int,
    spacing_s: float,
    deadline_s: float,
    *,
    annotations: bool = True,
    phase_s: float = 0.0,
) -> dict[str, list[float]]:
    """`changes` changes per direction, one every `spacing_s` on distinct nodes, measured concurrently.
    `annotations=False` leaves out the drain annotation (a Slinky-like baseline has no such input);
    `phase_s`: a random wait up to that long before the Slurm-side changes (the baselines' cycle)."""
    out: dict[str, list[float]] = {"k8s_to_slurm": [], "annotation_to_slurm": [], "slurm_to_k8s": []}

    async def measured(direction: str, shown: Awaitable[float], started: float, name: str = "") -> None:
        """One sample; a change not shown within the deadline is a sample too (infinite), not a crash."""
        wall = time.time() - (time.monotonic() - started)
        try:
            out[direction].append(await shown - started)
            STAMPED.append((direction, round(wall, 3), round(out[direction][-1], 4), name))
        except TimeoutError as exc:
            progress(f"{direction}: {exc} within {deadline_s:.0f} s (counted as not shown)")
            out[direction].append(math.inf)

    async def settle(shown: Awaitable[float]) -> None:
        try:
            await shown
        except TimeoutError as exc:
            progress(f"clean-up: {exc}")

    async def cordon(name: str) -> None:
        node = f"k8s-{name}"
        started = time.monotonic()
        bench.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": True}})
        await measured("k8s_to_slurm", bench.slurm_shows(name, True, deadline_s), started, name)
        bench.kube.patch("", "v1", "nodes", node, {"spec": {"unschedulable": None}})
        await settle(bench.slurm_shows(name, False, deadline_s))

    async def annotate(name: str) -> None:
        pod = f"slurmd-{name}"
        started = time.monotonic()
        bench.kube.patch(
            "",
            "v1",
            "pods",
            pod,
            {"metadata": {"annotations": {Keys.DRAIN_REQUEST: "bench"}}},
            namespace=NAMESPACE,
        )
        await measured("annotation_to_slurm", bench.slurm_shows(name, True, deadline_s), started)
        bench.kube.patch(
            "",
            "v1",
            "pods",
            pod,
            {"metadata": {"annotations": {Keys.DRAIN_REQUEST: None}}},
            namespace=NAMESPACE,
        )
        await settle(bench.slurm_shows(name, False, deadline_s))

    async def slurm_drain(name: str) -> None:
        pod = f"slurmd-{name}"
        reason = f"bench {name} {time.monotonic():.3f}"
        bench.seen.pop(pod, None)
        started = time.monotonic()
        await bench.reader.update_node(name, state=["DRAIN"], reason=reason)

        def shown(obj: dict[str, Any]) -> bool:
            return bool(((obj.get("metadata") or {}).get("annotations") or {}).get(Keys.REASON) == reason)

        await measured("slurm_to_k8s", bench.kube_shows(pod, shown, deadline_s), started, name)
        await bench.reader.update_node(name, state=["UNDRAIN"])

    # one direction at a time: the syncer reads Slurm back right after its own writes, which would
    # otherwise speed up the other direction's observation (and flatter the full-poll baseline)
    for change in (cordon, annotate, slurm_drain) if annotations else (cordon, slurm_drain):
        if change is slurm_drain and phase_s:
            # a baseline's 30 s cycle restarts at its last reconcile or poll, which the changes before just
            # set: a random wait gives the Slurm-side changes a random phase against it (else ~28 s, locked)
            await asyncio.sleep(random.uniform(0.0, phase_s))
        tasks = []
        for name in bench.take(changes):
            tasks.append(asyncio.create_task(change(name)))
            await asyncio.sleep(spacing_s)  # spacing between changes, by design of the measurement
        await asyncio.gather(*tasks)
        await asyncio.sleep(spacing_s)  # let the last read-back settle before the next direction
    if not annotations:
        del out["annotation_to_slurm"]  # not measured: no samples, not a latency of zero
    return out


async def settled(handle: Syncer, deadline_s: float = 900.0) -> float:
    """Until the syncer's first pass over every bound node is done (work queue empty twice in a row):
    measuring before would time the initial sync, not a change."""
    started = time.monotonic()
    quiet = 0
    while quiet < 2:
        if time.monotonic() - started > deadline_s:
            raise TimeoutError(f"the syncer's work queue did not drain within {deadline_s:.0f} s")
        figures = await handle.metrics()
        busy = figures.get("slurm_syncer_queue_depth", 1) + figures.get("slurm_syncer_queue_in_flight", 1)
        quiet = quiet + 1 if busy == 0 else 0
        await asyncio.sleep(0.5)  # metrics poll
    return time.monotonic() - started


async def idle_cost(handle: Syncer, wire: WireCounter, seconds: float) -> dict[str, float]:
    """Per minute over `seconds` of no change: what crossed the wire to slurmrestd (requests, bytes
    both ways with headers, as the relay counted them), full lists (the syncer's counter) and CPU."""
    before, cpu0, t0 = await handle.metrics(), handle.cpu_seconds(), time.monotonic()
    wire_before = wire.snapshot()
    await asyncio.sleep(seconds)  # the measured idle period
    after, cpu1, elapsed = await handle.metrics(), handle.cpu_seconds(), time.monotonic() - t0
    crossed = wire.snapshot() - wire_before
    per_min = 60.0 / elapsed

    def delta(key: str) -> float:
        return grew(before, after, key) * per_min

    return {
        "seconds": round(elapsed, 1),
        "slurm_requests": crossed["requests"] * per_min,
        "slurm_bytes": (crossed["bytes_up"] + crossed["bytes_down"]) * per_min,
        "full_fetches": delta("slurm_syncer_slurm_fetches_total:full"),
        "syncer_cpu_percent": 100.0 * (cpu1 - cpu0) / elapsed,
    }


def equal_cost_interval(results: dict[str, Any]) -> str:
    """The full poller's interval at which its lists cost slurmrestd the bytes per minute the syncer's
    idle window measured (both at the wire; one list's bytes from the 30 s poller's window)."""
    base = results["baseline_idle_per_minute"]
    per_list = base["slurm_bytes"] / max(base["full_fetches"], 1e-9)
    syncer_bytes = max(results["idle_per_minute"]["slurm_bytes"], 1.0)
    return f"{max(60.0 * per_list / syncer_bytes, 1.0):.1f}s"


def grew(before: dict[str, float], after: dict[str, float], key: str) -> float:
    """How much one of the syncer's counters grew between two reads of its /metrics."""
    return after.get(key, 0.0) - before.get(key, 0.0)


def round_record(
    number: int,
    samples: dict[str, list[float]],
    before: dict[str, float],
    after: dict[str, float],
    took_s: float,
) -> dict[str, Any]:
    """One latency round of the syncer: its Slurm -> Kubernetes figures beside the lists it read meanwhile,
    so a slow round can be told from a slow run (a p99 over 1,000 samples pools 20 rounds)."""

    shown = [v for v in samples["slurm_to_k8s"] if not math.isinf(v)]
    return {
        "round": number, "seconds": took_s,
        "slurm_to_k8s_p50": statistics.median(shown) if shown else None,
        "slurm_to_k8s_max": max(samples["slurm_to_k8s"], default=None),
        "lists": grew(before, after, "slurm_syncer_slurm_cache_reads_total:list"),
        "early_lists": grew(before, after, "slurm_syncer_slurm_early_lists_total"),
        "probes": grew(before, after, "slurm_syncer_slurm_cache_reads_total:probe"),
        # time spent in /nodes requests (lists and probes) and in single-node fresh reads
        "nodes_request_s": grew(before, after, "slurm_syncer_slurm_request_seconds_total:nodes"),
        "fresh_reads_s": grew(before, after, "slurm_syncer_slurm_request_seconds_total:node"),
    }  # fmt: skip


def round_text(record: dict[str, Any]) -> str:
    worst = record["slurm_to_k8s_max"]
    worst_text = "n/a" if worst is None else f"{worst:.2f} s"
    reads = record["lists"] + record["probes"]
    per_read = f" ({record['nodes_request_s'] / reads:.2f} s each)" if reads else ""
    return (
        f"Slurm -> Kubernetes max {worst_text}; {record['lists']:.0f} lists ({record['early_lists']:.0f} "
        f"early), {record['probes']:.0f} probes, {record['nodes_request_s']:.1f} s in /nodes requests"
        + per_read
    )


async def read_paths(handle: Syncer) -> dict[str, float]:
    """What each of the syncer's Slurm read paths cost over the whole run: reads and bytes per path."""
    figures = await handle.metrics()
    paths = ("probe", "list", "metrics")
    return {
        **{
            f"{path}_reads": figures.get(f"slurm_syncer_slurm_cache_reads_total:{path}", 0.0)
            for path in paths
        },
        **{
            f"{path}_bytes": figures.get(f"slurm_syncer_slurm_cache_read_bytes_total:{path}", 0.0)
            for path in paths
        },
    }


async def shown_undrained(bench: Bench, deadline_s: float) -> None:
    """Until Kubernetes shows every node undrained again (the running syncer caught up with the last
    undrains), so that a restart after it has, rightly, nothing to write."""

    def drained(name: str) -> bool:
        pod = bench.kube.pod(NAMESPACE, f"slurmd-{name}") or {}
        state = ((pod.get("metadata") or {}).get("annotations") or {}).get(Keys.STATE, "")
        return "DRAIN" in state.split("+")

    end = time.monotonic() + deadline_s
    while any(drained(name) for name in bench.names):
        if time.monotonic() > end:
            progress(f"pods still shown drained after {deadline_s:.0f} s: the restart has work to do")
            return
        await asyncio.sleep(0.5)  # observation poll


def restart_figures(bench: Bench, handle: Syncer) -> dict[str, Any]:
    """A syncer started over objects that are all in agreement: how soon it was ready and caught up
    (first pass done), from the process's start, and what it wrote meanwhile (the goal: nothing)."""
    return {
        "ready_s": handle.ready_at - handle.started_at,
        "caught_up_s": time.monotonic() - handle.started_at,
        "kube_writes": len(write_paths(bench)),
    }


async def snapshot(sandbox: Sandbox) -> dict[str, float]:
    rest: list[float] = []
    syncer_s: list[float] = []
    previous: dict[str, object] = {}
    for _ in range(3):
        seconds, body = await raw_list(sandbox)
        took, previous = decode_and_diff(body, previous)
        rest.append(seconds)
        syncer_s.append(took)
    r, s = statistics.median(rest), statistics.median(syncer_s)
    return {"slurmrestd_s": r, "syncer_s": s, "ratio": s / r}


CHURN_JOB = "slurm-syncer-churn"
CHURN_MAX_PENDING = 4  # a steady queue: the run's late phases meet the same scheduler load as its early ones


@contextlib.asynccontextmanager
async def job_churn(sandbox: Sandbox, interval_s: float) -> AsyncIterator[dict[str, int]]:
    """Real jobs through the whole run: a one-second job on the real slurmd every `interval_s` (0: none),
    so job starts and ends move slurmctld's node timestamp as on a production cluster. At most
    CHURN_MAX_PENDING wait at once (one real node runs them one by one; an ever longer queue would make
    each backfill cycle, which holds slurmctld's node lock, longer as the run goes on)."""
    counts = {"submitted": 0, "refused": 0, "skipped_queue_full": 0}
    if interval_s <= 0:
        yield counts
        return

    async def churn() -> None:
        while True:
            queue = await asyncio.to_thread(
                sandbox.run, "squeue", "-h", "-t", "PENDING", "-n", CHURN_JOB, "-o", "%i", timeout=30
            )
            if len(queue.stdout.split()) >= CHURN_MAX_PENDING:
                counts["skipped_queue_full"] += 1
            else:
                result = await asyncio.to_thread(
                    sandbox.run,
                    "sbatch",
                    "-J",
                    CHURN_JOB,
                    "-w",
                    sandbox.real_node,
                    "--wrap",
                    "sleep 1",
                    timeout=30,
                )
                counts["submitted" if result.returncode == 0 else "refused"] += 1
            await asyncio.sleep(interval_s)  # the churn's pace

    task = asyncio.create_task(churn())
    try:
        yield counts
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.to_thread(sandbox.run, "scancel", "-u", "root", timeout=30)


SDIAG_FIGURE = re.compile(
    r"^\s*(Jobs submitted|Jobs started|Total cycles|Last cycle|Max cycle|Mean cycle):\s+(\d+)\s*$"
)


def scheduler_load(sandbox: Sandbox) -> dict[str, float]:
    """slurmctld's own scheduler figures (`sdiag`) at the end of the run: its main scheduler and backfill
    cycles hold the node lock that every list, read and update waits for."""
    section, figures = "", {}
    for line in sandbox.run("sdiag", timeout=30).stdout.splitlines():
        if line.startswith("Main schedule statistics"):
            section = "main_"
        elif line.startswith("Backfilling stats"):
            section = "backfill_"
        elif line and not line[0].isspace():
            section = ""
        match = SDIAG_FIGURE.match(line)
        if match is None:
            continue
        name = match.group(1).lower().replace(" ", "_")
        if name.startswith("jobs_"):
            figures[name] = float(match.group(2))
        elif section:
            microseconds = name.endswith("_cycle") and name != "total_cycles"
            figures[section + name + ("_s" if microseconds else "")] = (
                float(match.group(2)) / 1e6 if microseconds else float(match.group(2))
            )
    return figures


def write_paths(bench: Bench) -> list[str]:
    """Paths of the write requests the emulator served since recording started."""
    return [
        path for _, method, path in bench.kube.server.requests if method in ("POST", "PUT", "PATCH", "DELETE")
    ]


def kube_writes(bench: Bench, objects: set[str]) -> int:
    """Write requests the emulator served since recording started to these pods and Nodes, and every
    Event written meanwhile (some may be about other nodes: the figure errs high, never low)."""

    def counted(path: str) -> bool:
        parts = path.split("?")[0].split("/")
        if "events" in parts:
            return True
        for kind in ("pods", "nodes"):
            if kind in parts and parts.index(kind) + 1 < len(parts):
                return parts[parts.index(kind) + 1] in objects
        return False

    return sum(1 for path in write_paths(bench) if counted(path))


async def storm(bench: Bench, handle: Syncer, size: int, deadline_s: float) -> dict[str, Any]:
    """Each half starts once the syncer is quiet: else it would also time the writes still owed to the
    phase before (the cordons' undrains mirrored back to 2,000 objects take 10 s at 200 QPS). Quiet means
    Kubernetes shows the last undrains too: an empty work queue alone passed while the list bringing them
    was still on its way, and 2,000 mirror writes then ran inside the next cordon storm (10 s, not 2-4 s)."""
    server = bench.kube.server
    names = bench.take(size)
    await shown_undrained(bench, deadline_s)
    await settled(handle)
    server.requests.clear()
    server.record_requests = True
    before = await bench.drained_count()
    figures_before = await handle.metrics()
    started = time.monotonic()
    for name in names:
        bench.kube.patch("", "v1", "nodes", f"k8s-{name}", {"spec": {"unschedulable": True}})
    pending = set(names)
    while before is not None and time.monotonic() - started < deadline_s:
        count = await bench.drained_count()
        if count is not None and count >= before + size:
            break
        await asyncio.sleep(0.05)  # read-back poll of slurmctld's counts
    counted_at = time.monotonic()
    while pending and time.monotonic() - started < deadline_s:  # by name: the count could hide a wrong node
        listing = await bench.reader.list_all_nodes()
        pending -= {n.name for n in listing.nodes if n.drain_flag}
        if pending:
            await asyncio.sleep(0.1)  # read-back poll
    ended = counted_at if before is not None else time.monotonic()
    k8s_to_slurm = ended - started if not pending else float("inf")
    figures_after = await handle.metrics()
    # what the syncer's node cache did meanwhile: lists compete with the storm's fresh reads and writes
    during_cordons = {
        key: grew(figures_before, figures_after, metric)
        for key, metric in (
            ("lists", "slurm_syncer_slurm_cache_reads_total:list"),
            ("own_work_waits", "slurm_syncer_slurm_own_work_waits_total"),
        )
    }
    drained = size - len(pending)
    for name in names:
        bench.kube.patch("", "v1", "nodes", f"k8s-{name}", {"spec": {"unschedulable": None}})
    await all_undrained(bench, set(names), deadline_s)
    await shown_undrained(bench, deadline_s)
    await settled(handle)
    others = bench.take(size)
    for name in others:
        bench.seen.pop(f"slurmd-{name}", None)
    server.requests.clear()
    started = time.monotonic()
    bench.sandbox.scontrol("update", f"nodename={','.join(others)}", "state=drain", "reason=storm")

    def shows_it(name: str) -> bool:
        pod = bench.kube.pod(NAMESPACE, f"slurmd-{name}") or {}
        node = bench.kube.node(f"k8s-{name}") or {}
        drained_condition = [
            c
            for c in (node.get("status") or {}).get("conditions") or []
            if c.get("type") == Keys.CONDITION_DRAINED
        ]
        return ((pod.get("metadata") or {}).get("annotations") or {}).get(Keys.REASON) == "storm" and any(
            c.get("status") == "True" for c in drained_condition
        )

    waiting = set(others)
    while waiting and time.monotonic() - started < deadline_s:
        waiting = {n for n in waiting if not shows_it(n)}
        if waiting:
            await asyncio.sleep(0.1)  # observation poll
    slurm_to_k8s = time.monotonic() - started if not waiting else float("inf")
    writes = kube_writes(bench, {f"slurmd-{n}" for n in others} | {f"k8s-{n}" for n in others})
    server.record_requests = False
    bench.sandbox.scontrol("update", f"nodename={','.join(others)}", "state=undrain")
    await all_undrained(bench, set(names) | set(others), deadline_s)  # the next phase starts clean
    return {
        "nodes": size, "of": len(bench.names), "drained_within_deadline": drained,
        "k8s_to_slurm_s": k8s_to_slurm, "slurm_to_k8s_s": slurm_to_k8s,
        "read_back": "slurmctld metrics, every 50 ms" if before is not None else "full lists",
        # every write the syncer made until each pod and Node showed the drain, per drained node
        "kube_writes_per_node": writes / size,
        "cache_during_cordons": during_cordons,  # lists and waits for our own calls, until read back
    }  # fmt: skip


async def all_undrained(bench: Bench, names: set[str], deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        listing = await bench.reader.list_all_nodes()
        if not any(n.drain_flag for n in listing.nodes if n.name in names):
            return
        await asyncio.sleep(0.2)  # read-back poll
    progress(f"storm nodes still drained after {deadline_s:.0f} s")


def plot(results: dict[str, Any], samples: dict[str, dict[str, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, direction in zip(axes, ("k8s_to_slurm", "annotation_to_slurm", "slurm_to_k8s"), strict=True):
        for label, values in (
            ("syncer", samples["syncer"][direction]),
            ("Slinky-like", samples["slinky"].get(direction, [])),
            ("our full-poll mode, 30 s", samples["baseline"][direction]),
        ):
            if values:
                # changes never shown stay out of the curve but in the fraction: it ends below 1
                ordered = sorted(v for v in values if math.isfinite(v))
                ax.step(
                    ordered, [(i + 1) / len(values) for i in range(len(ordered))], where="post", label=label
                )
        ax.set_xscale("log")
        ax.set_xlabel("seconds")
        ax.set_title(f"{direction} ({results['nodes']} nodes)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("fraction of changes")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def cancel_on_sigterm() -> None:
    """SIGTERM (e.g. from `timeout`) cancels the running main task, so its `finally` blocks still stop the
    sandbox and the syncers."""
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)


async def main_async(args: argparse.Namespace) -> int:
    cancel_on_sigterm()
    out = Path(args.out)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    nodes = 100 if args.quick else args.nodes
    changes = 5 if args.quick else args.changes
    repeats = 1 if args.quick else args.repeats
    baseline_repeats = 1 if args.quick else (args.baseline_repeats or args.repeats)
    idle_s = 31.0 if args.quick else args.idle_seconds  # the baseline polls every 30 s
    storm_size = min(nodes // 2, 1000)  # that many cordoned, as many others drained (issue 18: 1,000 at 10k)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        progress(f"sandbox with {nodes} simulated nodes")
        sandbox = await asyncio.to_thread(up, Path(tmp) / "sandbox", nodes, slurm=args.slurm)
        hint = sandbox.metrics_url if args.metrics_hint else ""
        if args.metrics_hint and not hint:
            progress(
                f"--metrics-hint: Slurm {sandbox.release.name}'s slurmctld serves no OpenMetrics: hint off"
            )
        kube = KubeApiEmulator(bookmark_interval_s=5.0)
        await kube.start()
        reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
        try:
            await reader.start()
            names = sim_node_names(nodes)
            progress(f"emulator with {nodes} Nodes and slurmd pods")
            seed(kube, names)
            kubeconfig = kube.write_kubeconfig(Path(tmp) / "kubeconfig")
            bench = Bench(
                sandbox,
                kube,
                reader,
                names,
                MetricsReader(sandbox.metrics_url) if sandbox.metrics_url else None,
            )

            def stamp(change: Change) -> None:
                if change.resource == ("", "pods") and change.type == "MODIFIED":
                    bench.seen[change.obj["metadata"]["name"]] = time.monotonic()

            kube.api.store.listeners.append(stamp)
            results: dict[str, Any] = {
                "nodes": nodes,
                "date": time.strftime("%Y-%m-%d"),
                "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
                "machine_reference_s": machine_reference_s(),
                "slurm_release": reader.release or sandbox.slurm_version,
                "api_version": reader.version.name if reader.version else "",
                "changes_per_direction": changes * repeats,
                # the baselines' Slurm -> Kubernetes samples of one round share one random phase of their
                # 30 s cycle: as many independent phases as rounds
                "phases_per_baseline": baseline_repeats,
                "idle_seconds": idle_s,
                "metrics_hint": hint,  # the syncer's --slurm-metrics-url ("" = off, the default)
            }
            samples: dict[str, dict[str, list[float]]] = {}
            async with (
                WireCounter(sandbox.rest_url) as wire,  # every syncer talks to slurmrestd through it
                job_churn(sandbox, args.job_churn) as jobs,
            ):
                for mode, strategy, interval in MODES:
                    if mode == "equal":  # the full poller at the syncer's bytes per minute
                        interval = equal_cost_interval(results)
                    progress(f"{mode}: --slurm-poll-strategy {strategy} --slurm-poll-interval {interval}")
                    async with syncer(
                        sandbox,
                        kubeconfig,
                        strategy,
                        interval,
                        out / f"syncer-{mode}.log",
                        slurm_url=wire.url,
                        metrics_hint=hint,
                    ) as handle:
                        took = await settled(handle)
                        progress(f"{mode}: initial sync done after {took:.0f} s; idle for {idle_s:.0f} s")
                        idle = await idle_cost(handle, wire, idle_s)
                        steady_rss = handle.rss_mb("VmRSS")
                        profiler = (
                            await start_profiler(handle, out) if args.profile and mode == "syncer" else None
                        )
                        rounds_here = repeats if mode == "syncer" else baseline_repeats
                        progress(f"{mode}: {changes} changes per direction, {rounds_here} round(s)")
                        # at 10,000 nodes a full list takes ~2 s and is duty-limited: room to measure
                        deadline = (10.0 if nodes < 5000 else 60.0) if mode == "syncer" else 90.0
                        spacing = 0.25 if mode == "syncer" else 0.5
                        cycle = float(interval.removesuffix("s")) if strategy == "full" else 30.0
                        if mode == "equal":
                            results["equal_cost_interval_s"] = cycle
                        samples[mode] = {}
                        for number in range(1, rounds_here + 1):  # pooled: a p99 needs 1,000 samples
                            before = await handle.metrics() if mode == "syncer" else None
                            round_started = time.monotonic()
                            rounds = await latency_round(
                                bench,
                                changes,
                                spacing,
                                deadline,
                                annotations=mode != "slinky",
                                phase_s=0.0 if mode == "syncer" else cycle,
                            )
                            for direction, values in rounds.items():
                                samples[mode].setdefault(direction, []).extend(values)
                            if before is not None:
                                record = round_record(
                                    number, rounds, before, await handle.metrics(),
                                    time.monotonic() - round_started,
                                )  # fmt: skip
                                results.setdefault("rounds", []).append(record)
                                progress(f"{mode}: round {number}/{rounds_here}: {round_text(record)}")
                        key = PREFIX[mode]
                        results[f"{key}latency_s"] = {d: percentiles(v) for d, v in samples[mode].items()}
                        results[f"{key}idle_per_minute"] = idle
                        if mode == "syncer":
                            progress(f"storm of {storm_size} drains each way (valve off, 200 QPS)")
                            results["storm_valve_off_200qps"] = await storm(bench, handle, storm_size, 60.0)
                            results["rss_mb"] = {"steady": steady_rss, "peak": handle.rss_mb("VmHWM")}
                            results["slurm_reads"] = await read_paths(handle)
                        if profiler is not None:
                            results["profile_top"] = await stop_profiler(profiler, out)
                        if mode == MODES[-1][0]:
                            await shown_undrained(bench, 2 * cycle + 30.0)
                progress(
                    f"restart over the settled objects, then a storm of {storm_size} drains each way at the "
                    "default settings (10 % valve, 50 QPS)"
                )
                bench.kube.server.requests.clear()
                bench.kube.server.record_requests = True
                async with syncer(
                    sandbox, kubeconfig, "conditional", "1s", out / "syncer-defaults.log", slurm_url=wire.url,
                    tuned=False, metrics_hint=hint,
                ) as handle:  # fmt: skip
                    await settled(handle)
                    bench.kube.server.record_requests = False
                    results["restart"] = restart_figures(bench, handle)
                    results["storm_defaults"] = await storm(
                        bench, handle, storm_size, 20.0 if args.quick else 60.0
                    )
                    figures = await handle.metrics()
                    results["storm_defaults"]["valve_refusals"] = figures.get(
                        "slurm_syncer_safety_valve_refusals_total", 0.0
                    )
                results["job_churn"] = {"interval_s": args.job_churn, **jobs}
            results["samples"] = samples
            progress("snapshot cost")
            results["snapshot"] = await snapshot(sandbox)
            results["slurmctld_scheduler"] = await asyncio.to_thread(scheduler_load, sandbox)
        finally:
            await reader.close()
            if bench.metrics is not None:
                await bench.metrics.close()
            await kube.stop()
            await asyncio.to_thread(sandbox.down)
    base_bytes = results["baseline_idle_per_minute"]["slurm_bytes"] or 1.0
    results["idle_bytes_ratio_to_baseline"] = results["idle_per_minute"]["slurm_bytes"] / base_bytes
    results["targets"] = TARGETS.get(nodes, {})
    await asyncio.to_thread(write_outputs, out, results, samples)
    print(summary(results))
    return 0


async def start_profiler(handle: Syncer, out: Path) -> asyncio.subprocess.Process:
    """py-spy samples the syncer through the latency rounds and the storm (collapsed stacks)."""
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(handle.process.pid),
        "--rate", "100", "--nonblocking", "--format", "raw", "-o", str(out / "profile.txt"),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def stop_profiler(profiler: asyncio.subprocess.Process, out: Path) -> list[dict[str, Any]]:
    """Stop py-spy (it writes on SIGINT) and name the functions with the most samples on top of stack."""
    profiler.send_signal(signal.SIGINT)
    await asyncio.wait_for(profiler.wait(), 60)
    text = await asyncio.to_thread((out / "profile.txt").read_text)
    own: dict[str, int] = {}
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        own[leaf] = own.get(leaf, 0) + int(count)
        total += int(count)
    top = sorted(own.items(), key=lambda kv: -kv[1])[:10]
    return [{"frame": frame, "share": round(n / max(total, 1), 4)} for frame, n in top]


def write_outputs(out: Path, results: dict[str, Any], samples: dict[str, dict[str, list[float]]]) -> None:
    (out / "results.json").write_text(json.dumps(results, indent=2))
    plot(results, samples, out / "latency_cdf.png")


def summary(r: dict[str, Any]) -> str:
    lines = [
        f"{r['nodes']} nodes, Slurm {r['slurm_release']} ({r['api_version']}), {r['date']}, "
        f"metrics hint {'on' if r.get('metrics_hint') else 'off'}"
    ]
    for direction in ("k8s_to_slurm", "annotation_to_slurm", "slurm_to_k8s"):
        mine, base = r["latency_s"][direction], r["baseline_latency_s"][direction]
        slinky = r["slinky_latency_s"].get(direction, percentiles([]))
        equal = r["equal_cost_latency_s"][direction]
        lines.append(
            f"  {direction:20s} p50 {p50_text(mine)}  {tail_text(mine)}   "
            f"Slinky-like p50 {p50_text(slinky)}  {tail_text(slinky)}   "
            f"full-poll p50 {p50_text(base)}  {tail_text(base)}   "
            f"full-poll at equal cost p50 {p50_text(equal)}  {tail_text(equal)}"
        )
    idle, base = r["idle_per_minute"], r["baseline_idle_per_minute"]
    lines.append(
        f"  idle/min at the wire over {idle['seconds']:.0f} s: {idle['slurm_requests']:.0f} requests, "
        f"{idle['slurm_bytes'] / 1e6:.3f} MB, {idle['full_fetches']:.1f} full lists, "
        f"CPU {idle['syncer_cpu_percent']:.1f} %   full-poll: {base['slurm_requests']:.0f} requests, "
        f"{base['slurm_bytes'] / 1e6:.3f} MB (ratio {r['idle_bytes_ratio_to_baseline']:.3f})"
    )
    slinky, equal = r["slinky_idle_per_minute"], r["equal_cost_idle_per_minute"]
    lines.append(
        f"  Slinky-like idle/min: {slinky['slurm_requests']:.0f} requests, "
        f"{slinky['slurm_bytes'] / 1e6:.3f} MB, {slinky['full_fetches']:.1f} full lists"
    )
    lines.append(
        f"  full-poll every {r['equal_cost_interval_s']:.1f} s (equal cost) idle/min: "
        f"{equal['slurm_requests']:.0f} requests, {equal['slurm_bytes'] / 1e6:.3f} MB"
    )
    lines.append(f"  job churn: {r['job_churn']}; syncer's Slurm reads by path: {r['slurm_reads']}")
    lines.append(f"  restart over settled objects: {r['restart']}")
    lines.append(f"  slurmctld's scheduler at the end (sdiag): {r['slurmctld_scheduler']}")
    snap = r["snapshot"]
    lines.append(
        f"  snapshot: slurmrestd {snap['slurmrestd_s']:.3f} s, syncer {snap['syncer_s']:.4f} s, "
        f"ratio {snap['ratio']:.3f}"
    )
    lines.append(f"  RSS {r['rss_mb']['steady']:.0f} MB steady, {r['rss_mb']['peak']:.0f} MB peak")
    lines.append(f"  storm, valve off and 200 QPS: {r['storm_valve_off_200qps']}")
    lines.append(f"  storm, default settings: {r['storm_defaults']}")
    return "\n".join(lines)


def cell(figures: dict[str, float | None]) -> str:
    """`p50 X s, p99 Y s (n=N)` or `p50 X s, max of N Y s`: the honest tail beside its sample count."""
    if not figures.get("n"):
        return "no samples"
    missed = f"; {figures['not_shown']:.0f} not shown within the deadline" if figures.get("not_shown") else ""
    return f"p50 {p50_text(figures)}, {tail_text(figures)}{missed}"


def scheduler_text(figures: dict[str, float]) -> str:
    parts = [
        f"{label} {figures[f'{key}_total_cycles']:.0f} cycles, mean {figures[f'{key}_mean_cycle_s']:.2f} s, "
        f"max {figures[f'{key}_max_cycle_s']:.2f} s"
        for label, key in (("main", "main"), ("backfill", "backfill"))
        if f"{key}_total_cycles" in figures and f"{key}_mean_cycle_s" in figures
    ]
    submitted, started = figures.get("jobs_submitted", 0), figures.get("jobs_started", 0)
    jobs = f"; jobs submitted {submitted:.0f}, started {started:.0f}"
    return ("; ".join(parts) or "no figures") + jobs


def markdown(r: dict[str, Any]) -> str:
    """The figures as benchmarks/RESULTS.md shows them (`python benchmarks/run.py --table results.json`)."""
    modes = (
        ("syncer", ""),
        ("Slinky-like", "slinky_"),
        ("our full-poll mode, 30 s", "baseline_"),
        (f"full poll every {r['equal_cost_interval_s']:.1f} s (the syncer's bytes)", "equal_cost_"),
    )
    churn = r["job_churn"]
    rows = [
        f"| {r['nodes']:,} nodes, Slurm {r['slurm_release']} ({r['api_version']}), "
        f"metrics hint {'on' if r.get('metrics_hint') else 'off'}, "
        + (f"a job every {churn['interval_s']:.0f} s" if churn["interval_s"] else "no jobs")
        + " | "
        + " | ".join(m for m, _ in modes)
        + " |",
        "|---|---|---|---|---|",
    ]
    names = {
        "k8s_to_slurm": "cordon -> Slurm drain",
        "annotation_to_slurm": "drain annotation -> Slurm drain",
        "slurm_to_k8s": "Slurm drain -> pod annotation",
    }
    for direction, label in names.items():
        cells = [cell(r[f"{key}latency_s"].get(direction) or {}) for _, key in modes]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    idle = [r[f"{key}idle_per_minute"] for _, key in modes]
    rows.append(
        f"| idle at the wire per minute (over {idle[0]['seconds']:.0f} s) | "
        + " | ".join(
            f"{i['slurm_requests']:.0f} requests, {i['slurm_bytes'] / 1e6:.2f} MB, "
            f"{i['full_fetches']:.1f} full lists"
            for i in idle
        )
        + " |"
    )
    rows.append(
        "| idle CPU of the process | " + " | ".join(f"{i['syncer_cpu_percent']:.1f} %" for i in idle) + " |"
    )
    lines = ["\n".join(rows), ""]
    snap, rss, restart, reads = r["snapshot"], r["rss_mb"], r["restart"], r["slurm_reads"]
    off, defaults = r["storm_valve_off_200qps"], r["storm_defaults"]

    def cache_text(during: dict[str, float] | None) -> str:
        if during is None:  # runs before this was recorded
            return ""
        lists, waits = during["lists"], during["own_work_waits"]
        return f"; meanwhile {lists:.0f} lists, {waits:.0f} waits for its own calls"

    def storm_rows(label: str, storm: dict[str, Any]) -> list[str]:
        k8s = storm["k8s_to_slurm_s"]
        return [
            f"| storm, {storm['nodes']:.0f} cordons -> Slurm drained ({label}; read back by "
            f"{storm.get('read_back', 'full lists')}) | "
            + (
                f"{k8s:.2f} s"
                if k8s != float("inf")
                else f"{storm['drained_within_deadline']:.0f} drained within the deadline"
            )
            + cache_text(storm.get("cache_during_cordons"))
            + " |",
            f"| storm, {storm['nodes']:.0f} Slurm drains -> every pod and Node shows it ({label}) | "
            + (
                f"{storm['slurm_to_k8s_s']:.2f} s"
                if storm["slurm_to_k8s_s"] != float("inf")
                else "not within the deadline"
            )
            + f"; {storm.get('kube_writes_per_node', float('nan')):.2f} Kubernetes writes per node |",
        ]

    rows = [
        "| figure | measured |",
        "|---|---|",
        *storm_rows("valve off, 200 QPS", off),
        *storm_rows(
            f"default settings: 10 % valve, 50 QPS; valve refusals {defaults.get('valve_refusals', 0):.0f}",
            defaults,
        ),
        f"| restart over objects in agreement: ready / caught up (first pass done) / writes | "
        f"{restart['ready_s']:.1f} s / {restart['caught_up_s']:.1f} s / {restart['kube_writes']:.0f} |",
        "| the syncer's Slurm reads over the run, by path | "
        + ", ".join(
            f"{path}: {reads[f'{path}_reads']:.0f} reads, {reads[f'{path}_bytes'] / 1e6:.1f} MB"
            for path in ("probe", "list", "metrics")
        )
        + " |",
        "| slurmctld's scheduler cycles (sdiag at the end; they hold the node lock requests wait for) | "
        + scheduler_text(r["slurmctld_scheduler"])
        + " |",
        f"| RSS of the syncer | {rss['steady']:.0f} MB steady (after the idle window), "
        f"{rss['peak']:.0f} MB peak (VmHWM after the storm) |",
        f"| snapshot: slurmrestd full list / syncer decode+diff | {snap['slurmrestd_s']:.3f} s / "
        f"{snap['syncer_s']:.4f} s (ratio {snap['ratio']:.3f}) |",
    ]
    lines.append("\n".join(rows))
    return "\n".join(lines)


def main() -> int:
    if sys.argv[1:2] == ["--table"]:  # python benchmarks/run.py --table DIR/results.json
        print(markdown(json.loads(Path(sys.argv[2]).read_text())))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--out", required=True)
    parser.add_argument("--changes", type=int, default=50, help="changes per direction (default 50)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="latency rounds pooled (e.g. 20 x 50 changes: a p99 of 1,000)"
    )
    parser.add_argument(
        "--baseline-repeats", type=int, default=0,
        help="latency rounds for the two baselines (default: --repeats); their 30 s cycle makes a round long",
    )  # fmt: skip
    parser.add_argument("--idle-seconds", type=float, default=300.0, help="idle window (default 300 s)")
    parser.add_argument("--quick", action="store_true", help="100 nodes, 5 changes, 31 s idle (CI)")
    parser.add_argument(
        "--slurm", choices=sorted(RELEASES), default=None,
        help="Slurm release of the sandbox (default: $SLURM_SYNCER_SLURM_RELEASE, else 26.05)",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="py-spy the syncer: DIR/profile.txt")
    parser.add_argument(
        "--job-churn", type=float, default=2.0, metavar="SECONDS",
        help="a one-second job on the real slurmd every SECONDS through the whole run (default 2; 0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--metrics-hint", action="store_true",
        help="the syncer with --slurm-metrics-url (slurmctld's OpenMetrics, 26.05 sandbox); off by default",
    )  # fmt: skip
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
