"""SlurmPartition CRs -> Slurm partitions beside the operator path's reload, in one run: how soon a change
shows in Slurm each way, what each costs slurmctld, and a label change moving many nodes between partitions.

    python benchmarks/partitions.py --nodes 1000 --out benchmarks/results/partitions-1k-26.05
    python benchmarks/partitions.py --nodes 10000 --no-relabel --out benchmarks/results/partitions-10k-26.05

From a clean checkout after `scripts/bootstrap` (needs root, as the sandbox does). Real Slurm 26.05 sandbox
(N+1 CLOUD nodes, `ReconfigFlags=KeepPartInfo` added as the controller requires), the Kubernetes API emulator
with N+1 node-bound Nodes, and the syncer's service in this process with `--partitions-enabled`. In order:

1. idle, 5 s: slurmctld's and slurmrestd's CPU seconds a second (subtracted from the phases below);
2. the CR path, `--changes` times: the CR's `maxTime` patched -> `GET /partitions/` shows it (polled every
   10 ms from this process: each figure includes up to one poll), and its requests and CPU seconds;
3. the operator path, `--reloads` times: a new partition over the same nodes written to slurm.conf, then
   `scontrol reconfigure` -> `GET /partitions/` shows it, and its CPU seconds (what Slinky's reconfigure
   sidecar runs once the kubelet has synced the ConfigMap; the propagation before it is not simulated:
   RESULTS.md states it from its sources). A new one each time: with KeepPartInfo a reconfigure applies no
   change to an existing slurm.conf partition, which the run checks at its end (`unchanged_by_reconfigure`);
4. both again, `--probed` times each, with other clients' requests running throughout (`GET /ping/`,
   `/jobs/`, `/nodes/`, `/diag/`: benchmarks/slurmctld_load.py): their latency during CR changes, during
   reconfigures and idle;
5. unless `--no-relabel`: N Nodes relabelled from partition A's selector to B's (one node is in both
   throughout: a selector matching nothing is refused) -> both partitions as wanted in Slurm, seconds and
   partition requests.

Also recorded: the machine's load average before and after, memory (MemAvailable, RSS of slurmctld,
slurmrestd and this process), slurmctld's `/diag` around the phases. Prints the figures and writes
DIR/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.run import machine_reference_s, percentiles, progress
from benchmarks.service_bench import CONFIG as SERVICE_CONFIG
from benchmarks.service_bench import Bench, main, requests_to, service_bench
from benchmarks.slurmctld_load import (
    CpuMeter,
    Probes,
    diag_summary,
    latency_summary,
    machine_load,
    machine_memory,
    net_per_operation,
    per_second,
    rss_mb,
)
from syncer.controllers.partitions.options import PartitionOptions
from syncer.slurm.auth import TokenFile
from syncer.slurm.partitions import PartitionState
from syncer.testing.demo import wait
from syncer.testing.sandbox.config import sim_node_names

CONFIG = SERVICE_CONFIG.replace(partitions=PartitionOptions(enabled=True))  # the same service, one more
GROUP, VERSION, PLURAL = "slurm-syncer.dev", "v1alpha1", "slurmpartitions"
POLL_S = 0.01
OPERATOR_PREFIX = "op-bench-"  # the operator path's partitions, in slurm.conf
IDLE_S = 5.0
# after each operation: what it leaves running (nodes registering, the syncer's re-reads)
RELOAD_GAP_S = 1.0
SHOWN_WITHIN_S = 120.0  # a change not shown by then is a sample of infinity, never dropped
KEPT_WITHIN_S = 15.0  # an existing slurm.conf partition changed: how long to look for it (KeepPartInfo)


class Window(NamedTuple):
    start: float  # monotonic
    end: float  # when Slurm showed it, or when the benchmark stopped waiting
    shown: bool

    @property
    def seconds(self) -> float:
        return self.end - self.start if self.shown else math.inf


def figures(windows: list[Window] | list[float]) -> dict[str, Any]:
    """n, p50, max and p95/p99 where there are enough samples (benchmarks/run.py's rule), seconds."""
    values = [w.seconds if isinstance(w, Window) else w for w in windows]
    summary = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in percentiles(values).items()}
    return {**summary, "samples": [round(v, 4) if math.isfinite(v) else None for v in values]}  # in order


class Paths:
    """One change each way, timed until `GET /partitions/` shows it.

    The operator path adds a partition to slurm.conf each time: with `ReconfigFlags=KeepPartInfo` (which the
    syncer requires) a reconfigure or restart keeps every existing partition as slurmctld has it, so a
    changed or removed slurm.conf line never shows (measured: `unchanged_by_reconfigure`)."""

    def __init__(self, bench: Bench, nodes: int, http: aiohttp.ClientSession) -> None:
        self.bench = bench
        self.http = http  # the poll's raw reads: decoding every hostlist here would slow the syncer beside it
        self.url = f"{bench.sandbox.rest_url}/slurm/v0.0.45/partitions/"
        self.hosts = f"node[00001-{nodes:05d}]"
        self.cr_value = 61
        self.added = 0
        self.poll_errors = 0
        self.scontrol_s: list[float] = []

    async def partitions(self) -> dict[str, PartitionState]:
        return {p.name: p for p in await self.bench.reader.partition_states()}

    async def max_time(self, name: str) -> Any:
        """Partition `name`'s MaxTime in minutes as `GET /partitions/` shows it (None: no such partition)."""
        async with self.http.get(self.url) as response:
            response.raise_for_status()
            listed = (await response.json())["partitions"]
        found = [p for p in listed if p.get("name") == name]
        return found[0].get("maximums", {}).get("time", {}).get("number") if found else None

    async def until(self, name: str, max_time: int, within_s: float = SHOWN_WITHIN_S) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            try:
                shown = await self.max_time(name)
            except (aiohttp.ClientError, KeyError):  # slurmctld may not answer while it reloads: polled again
                self.poll_errors += 1
                shown = None
            if shown == max_time:
                return True
            await asyncio.sleep(POLL_S)
        return False

    async def cr_change(self) -> Window:
        """The CR's maxTime patched, until Slurm shows it."""
        self.cr_value = 61 + (self.cr_value - 60) % 2  # 61, 62, 61, ...: each a change
        started = time.monotonic()
        self.bench.kube.patch(GROUP, VERSION, PLURAL, "bench-a", {"spec": {"maxTime": self.cr_value}})
        shown = await self.until("bench-a", self.cr_value)
        return Window(started, time.monotonic(), shown)

    def write_conf(self, name: str, max_time: int) -> None:
        """slurm.conf with partition `name` over the benchmark's nodes (its earlier line replaced)."""
        conf = self.bench.sandbox.slurm_conf
        lines = [ln for ln in conf.read_text().splitlines() if not ln.startswith(f"PartitionName={name} ")]
        lines.append(f"PartitionName={name} Nodes={self.hosts} MaxTime={max_time} State=UP")
        conf.write_text("\n".join(lines) + "\n")

    def _reconfigure(self) -> float:
        """`scontrol reconfigure` (a process in the sandbox, as the sidecar runs one): when it returned."""
        self.bench.sandbox.scontrol("reconfigure")
        return time.monotonic()

    async def reconfigure(
        self, name: str | None = None, max_time: int = 61, within_s: float = SHOWN_WITHIN_S
    ) -> Window:
        """A partition line written to slurm.conf (a new one unless `name`), then `scontrol reconfigure` (as
        Slinky's sidecar runs it), until Slurm shows it; `scontrol_s` gets the call's own seconds."""
        if name is None:
            name = f"{OPERATOR_PREFIX}{self.added}"
            self.added += 1
        started = time.monotonic()
        await asyncio.to_thread(self.write_conf, name, max_time)
        scontrol = asyncio.create_task(asyncio.to_thread(self._reconfigure))
        shown = await self.until(name, max_time, within_s)
        ended = time.monotonic()
        self.scontrol_s.append(await scontrol - started)
        return Window(started, ended, shown)


def after(windows: list[Window]) -> list[tuple[float, float]]:
    """Each window with the gap after it: what the operation leaves running once Slurm shows it."""
    return [(w.start, w.end + RELOAD_GAP_S) for w in windows]


async def timed(step: Callable[[], Awaitable[Window]], count: int, gap_s: float = 0.0) -> list[Window]:
    windows = []
    for _ in range(count):
        windows.append(await step())
        if gap_s:
            await asyncio.sleep(gap_s)  # spacing, not synchronisation: the next step waits on Slurm itself
    return windows


async def phase(
    bench: Bench,
    meter: CpuMeter,
    idle_per_s: dict[str, float],
    step: Callable[[], Awaitable[Window]],
    count: int,
    gap_s: float = 0.0,
) -> dict[str, Any]:
    """`count` steps: their latency, slurmctld's/slurmrestd's CPU per step (less idle), the syncer's Slurm
    requests, and /diag before and after."""
    diag_before = diag_summary(await bench.reader.diag())
    requests_before = requests_to(bench.service, "")
    before = meter.read()
    windows = await timed(step, count, gap_s)
    spent = CpuMeter.spent(before, meter.read())
    requests_after = requests_to(bench.service, "")
    result = {
        "to_slurm_s": figures(windows),
        "cpu_s_spent": spent,
        "cpu_s_per_operation_less_idle": net_per_operation(spent, idle_per_s, count),
        "syncer_requests": {
            k: v - requests_before.get(k, 0)
            for k, v in requests_after.items()
            if v != requests_before.get(k, 0)
        },
        "diag_before": diag_before,
        "diag_after": diag_summary(await bench.reader.diag()),
    }
    return result


def memory(bench: Bench) -> dict[str, Any]:
    pids = bench.sandbox.pids
    return {
        **machine_memory(),
        "rss_mb": {name: rss_mb(pids[name]) for name in ("slurmctld", "slurmrestd") if name in pids},
        "rss_mb_this_process": rss_mb(os.getpid()),  # the emulator, the syncer and this harness
    }


async def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    nodes, changes = args.nodes, args.changes
    names = sim_node_names(nodes + 1)
    results: dict[str, Any] = {
        "nodes": nodes, "changes": changes, "reloads": args.reloads, "probed": args.probed,
        "load_before": machine_load(), "memory_before": machine_memory(),
        "machine_reference_s": round(machine_reference_s(), 3),
    }  # fmt: skip

    def labels(name: str) -> dict[str, str]:
        # names[0] is in both partitions throughout: a selector matching no Node is refused
        return {"bench-pool": "a", "bench-b": str(name == names[0]).lower()}

    keep = "ReconfigFlags=KeepPartInfo\n"
    async with (
        service_bench(directory, nodes + 1, CONFIG, labels=labels, ready=True, slurm_conf=keep) as bench,
        aiohttp.ClientSession(headers=TokenFile(bench.sandbox.token_file).headers()) as http,
    ):
        results["slurm"] = bench.sandbox.slurm_version
        results["memory_ready"] = memory(bench)
        paths = Paths(bench, nodes + 1, http)
        conf = await bench.reader.slurmctld_conf()
        assert conf is not None and conf.keeps_partitions, "KeepPartInfo not in effect"
        selector = {"matchLabels": {"bench-pool": "a"}}
        spec = {"nodes": {"selector": selector}, "maxTime": 60}
        bench.kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": "bench-a"}, "spec": spec})

        async def a_made() -> bool:
            found = (await paths.partitions()).get("bench-a")
            return found is not None and len(found.nodes) == nodes + 1

        results["create_s"] = round(await wait(a_made, "partition bench-a over every node", 300), 3)
        controller = bench.service.partitions
        assert controller is not None
        await wait(lambda: getattr(controller.outcomes.get("bench-a"), "ready", False), "bench-a Ready", 60)
        progress("operator path: a first partition added to slurm.conf, reconfigure")
        results["operator_first_added_s"] = round((await paths.reconfigure()).seconds, 3)
        await bench.service.engine.queue.wait_idle()

        meter = CpuMeter(bench.sandbox)
        progress(f"idle {IDLE_S:.0f} s: CPU a second")
        before = meter.read()
        await asyncio.sleep(IDLE_S)  # a measured interval, not synchronisation
        idle_per_s = per_second(CpuMeter.spent(before, meter.read()))
        results["idle_cpu_s_per_s"] = idle_per_s

        progress(f"CR path: {changes} changes (maxTime), each until Slurm shows it")
        cr = await phase(bench, meter, idle_per_s, paths.cr_change, changes)
        cr["requests_per_change"] = {k: v / changes for k, v in cr["syncer_requests"].items()}
        results["cr_path"] = cr

        progress(f"operator path: {args.reloads} slurm.conf changes + scontrol reconfigure")
        pid_before = bench.sandbox.pids.get("slurmctld")
        paths.scontrol_s.clear()
        operator = await phase(bench, meter, idle_per_s, paths.reconfigure, args.reloads, RELOAD_GAP_S)
        operator["scontrol_reconfigure_returned_s"] = figures(paths.scontrol_s)
        operator["slurmctld_pid_same"] = bench.sandbox.pids.get("slurmctld") == pid_before
        operator["gap_after_each_s"] = RELOAD_GAP_S
        results["operator_path"] = operator

        probed = args.probed
        progress(
            f"side by side with other clients' requests: idle, {probed} CR changes, {probed} reconfigures"
        )
        async with Probes(bench.sandbox) as probes:
            idle_start = time.monotonic()
            await asyncio.sleep(2 * IDLE_S)  # a measured interval, not synchronisation
            idle_window = [(idle_start, time.monotonic())]
            idle_samples = probes.within(idle_window)
            cr_windows = await timed(paths.cr_change, probed, RELOAD_GAP_S)
            reload_windows = await timed(paths.reconfigure, probed, RELOAD_GAP_S)
        results["side_by_side"] = {
            "idle": latency_summary(idle_samples),
            "cr_changes": {
                "to_slurm_s": figures(cr_windows),
                **latency_summary(probes.within([(w.start, w.end) for w in cr_windows])),
                "with_the_gap_after": latency_summary(probes.within(after(cr_windows))),
            },
            "reconfigures": {
                "to_slurm_s": figures(reload_windows),
                **latency_summary(probes.within([(w.start, w.end) for w in reload_windows])),
                "with_the_gap_after": latency_summary(probes.within(after(reload_windows))),
            },
        }
        results["poll_errors_while_reloading"] = paths.poll_errors
        results["operator_partitions_added"] = paths.added
        progress(f"KeepPartInfo: {OPERATOR_PREFIX}0's MaxTime changed in slurm.conf, reconfigure")
        changed = await paths.reconfigure(f"{OPERATOR_PREFIX}0", 62, within_s=KEPT_WITHIN_S)
        results["unchanged_by_reconfigure"] = {
            "shown": changed.shown,
            "waited_s": round(changed.end - changed.start, 1),
        }
        results["memory_after"] = memory(bench)
        if args.relabel:
            results.update(await relabel(bench, paths, nodes))
    results["load_after"] = machine_load()
    return results


async def relabel(bench: Bench, paths: Paths, nodes: int) -> dict[str, Any]:
    progress(f"relabelling {nodes} Nodes from bench-a's selector to bench-b's")
    kube, service, names = bench.kube, bench.service, bench.names
    results: dict[str, Any] = {}
    kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": "bench-b"}, "spec": {
        "nodes": {"selector": {"matchLabels": {"bench-b": "true"}}}}})  # fmt: skip

    async def b_made() -> bool:
        found = (await paths.partitions()).get("bench-b")
        return found is not None and len(found.nodes) == 1

    await wait(b_made, "bench-b over its one host", 60)
    before = requests_to(service, "partition")
    started = time.monotonic()
    for name in names[1:]:
        moved_labels = {"bench-pool": "b", "bench-b": "true"}
        kube.patch("", "v1", "nodes", f"host-{name}", {"metadata": {"labels": moved_labels}})
    results["relabel_patches_s"] = round(time.monotonic() - started, 3)

    async def moved() -> bool:
        found = await paths.partitions()
        return len(found["bench-a"].nodes) == 1 and len(found["bench-b"].nodes) == nodes + 1

    await wait(moved, f"{nodes} nodes moved", 300)
    results["relabel_to_slurm_s"] = round(time.monotonic() - started, 3)
    after = requests_to(service, "partition")
    results["relabel_requests"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return results


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--changes", type=int, default=100, help="CR changes timed (the CR path)")
    parser.add_argument("--reloads", type=int, default=20, help="slurm.conf changes + reconfigures timed")
    parser.add_argument("--probed", type=int, default=20, help="of each, again with other clients' requests")
    parser.add_argument("--relabel", action=argparse.BooleanOptionalAction, default=True,
                        help="also move N nodes between two partitions by a label change")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(__doc__ or "", run, arguments))
