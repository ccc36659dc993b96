"""A SlurmPartition CR change -> Slurm, each change's way through the syncer timed (issue 47: p99 <= 0.25 s).

    python benchmarks/partition_latency.py --nodes 1000 --changes 400 --compare [--out DIR]

--compare: changes take turns between the code before (a CR change planned 50 ms after it arrives, and
waiting for the reconcile before to re-read Slurm and write its statuses) and this code (planned at once; a
reconcile that sees a CR change arrive while it writes leaves its re-read and statuses to the next one).

The sandbox and service of benchmarks/partitions.py (Slurm 26.05, N+1 CLOUD nodes with KeepPartInfo, N+1
node-bound Nodes, the syncer's service with --partitions-enabled in this process), partition `bench-a` over
every node, then `--changes` patches of its `maxTime`, one after another, each until `GET /partitions/`
(polled every 10 ms) shows it. Per change, on one clock (this process's monotonic), from the patch: the
controller's mapper seeing the CR event, each reconcile's start and end, each `POST /partitions/` sent and
answered, Slurm showing it. Prints p50/p99 of each part and the slowest changes' timelines.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.partitions import CONFIG, GROUP, PLURAL, VERSION, Paths
from benchmarks.power import percentile
from benchmarks.run import machine_reference_s, progress
from benchmarks.service_bench import main, service_bench
from benchmarks.slurmctld_load import machine_load
from syncer.slurm.auth import TokenFile
from syncer.testing.demo import wait
from syncer.testing.sandbox.config import sim_node_names


class Trace:
    """What the syncer did since the last patch, stamped on the monotonic clock."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []

    def __call__(self, what: str) -> None:
        self.events.append((time.monotonic(), what))


def instrument(bench: Any, trace: Trace) -> None:
    controller, slurm = bench.service.partitions, bench.service.slurm
    reconcile = controller.reconcile

    async def timed_reconcile(key: str) -> Any:
        trace("reconcile start")
        try:
            return await reconcile(key)
        finally:
            trace("reconcile end")

    def seen(old: Any, new: Any) -> None:  # beside the controller's own mapper, on the same informer
        trace("CR event" if controller._cr_moved(old, new) else "CR event (status only)")

    def timed(name: str, call: Any) -> Any:
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            trace(f"{name} sent")
            try:
                return await call(*args, **kwargs)
            finally:
                trace(f"{name} answered")

        return wrapped

    for method, name in (
        ("partition_states", "GET /partitions/"), ("put_partition", "POST"), ("put_partitions", "POST"),
        ("slurmctld_conf", "GET /conf"),
    ):  # fmt: skip
        setattr(slurm, method, timed(name, getattr(slurm, method)))

    controller.reconcile = timed_reconcile
    controller.scope.subscribe(seen)


BEFORE_CR_BATCH_S = 0.05  # the code before: a CR's change planned this long after it arrived


def as_before(controller: Any, before: Callable[[], bool]) -> None:
    """While `before()`: the code before this change, in the same process. The runner's CR watch (which now
    queues the key at once) queues it after BEFORE_CR_BATCH_S as `Watch(after_s=...)` did, and a reconcile
    never leaves its re-read and statuses to the next one."""
    queue, informer = controller.runner.queue, controller.informer
    [notify] = [h for h in informer.handlers if "_connect" in getattr(h, "__qualname__", "")]

    def cr_event(old: Any, new: Any) -> None:
        if not before():
            notify(old, new)
            return
        for key in controller._cr_moved(old, new):
            queue.add_after(key, BEFORE_CR_BATCH_S)

    informer.handlers[informer.handlers.index(notify)] = cr_event
    changed_since = controller._cr_changed_since
    controller._cr_changed_since = lambda mark: False if before() else changed_since(mark)


async def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    nodes = args.nodes
    names = sim_node_names(nodes + 1)
    results: dict[str, Any] = {
        "nodes": nodes,
        "changes": args.changes,
        "load_before": machine_load(),
        "machine_reference_s": round(machine_reference_s(), 3),
    }
    keep = "ReconfigFlags=KeepPartInfo\n"
    labels = {"bench-pool": "a"}
    async with (
        service_bench(
            directory, nodes + 1, CONFIG, labels=lambda _: labels, ready=True, slurm_conf=keep
        ) as bench,
        aiohttp.ClientSession(headers=TokenFile(bench.sandbox.token_file).headers()) as http,
    ):
        results["slurm"] = bench.sandbox.slurm_version
        paths = Paths(bench, nodes + 1, http)
        spec = {"nodes": {"selector": {"matchLabels": labels}}, "maxTime": 60}
        bench.kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": "bench-a"}, "spec": spec})

        async def a_made() -> bool:
            found = (await paths.partitions()).get("bench-a")
            return found is not None and len(found.nodes) == len(names)

        await wait(a_made, "partition bench-a over every node", 300)
        await bench.service.engine.queue.wait_idle()
        trace = Trace()
        instrument(bench, trace)
        progress(f"{args.changes} CR changes (maxTime), each until Slurm shows it")
        samples: list[dict[str, Any]] = []
        controller = bench.service.partitions
        assert controller is not None
        mode = ["after"]
        as_before(controller, lambda: mode[0] == "before")
        for index in range(args.changes):
            # changes take turns (--compare): the code before, then this code, so both meet the same load
            mode[0] = "before" if args.compare and index % 2 == 0 else "after"
            trace.events.clear()
            window = await paths.cr_change()
            events = [(round(at - window.start, 4), what) for at, what in trace.events]
            samples.append({"seconds": round(window.seconds, 4), "events": events, "code": mode[0]})
        results["load_after"] = machine_load()
    parts: dict[str, list[float]] = {}
    for code in sorted({s["code"] for s in samples}):
        parts[f"patch -> Slurm shows it ({code})"] = [s["seconds"] for s in samples if s["code"] == code]
    for label in ("CR event", "reconcile start", "POST sent", "POST answered"):
        parts[f"patch -> first {label}"] = [
            next((at for at, what in s["events"] if what == label), float("nan")) for s in samples
        ]
    results["parts"] = {
        label: {
            "n": len(values),
            "p50": round(percentile(values, 0.5), 4),
            "p99": round(percentile(values, 0.99), 4),
        }
        for label, values in parts.items()
    }
    results["slowest"] = sorted(samples, key=lambda s: -s["seconds"])[:8]
    results["samples"] = samples
    for label, figures in results["parts"].items():
        print(f"{label:<32} {figures}")
    for sample in results["slowest"]:
        print(sample["seconds"], sample["events"])
    return results


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument(
        "--compare",
        action="store_true",
        help="changes take turns: the code before (a CR change planned after 50 ms, behind the statuses)",
    )


if __name__ == "__main__":
    sys.exit(main(__doc__ or "", run, arguments))
