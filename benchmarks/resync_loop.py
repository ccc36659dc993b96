"""An event key's latency beside a periodic resync of 10,000 keys in agreement (issue 47, branch resync).

    python benchmarks/resync_loop.py --compare /work/main            # main's runtime, then this checkout's
    python benchmarks/resync_loop.py --cost-ms 0.2 --seconds 30      # this checkout's only

No Slurm, no Kubernetes: the runtime alone (ControllerRunner and its WorkQueue), as the sync engine uses it:
8 workers and 256 FIRST-only ones, a resync every `--resync-s` (8 s, so a 30 s run holds three) of 10,000
keys whose reconciles take `--cost-ms` of CPU and never suspend (a node in agreement: the caches read, the
pure decision), and an event every 25 ms from a watch in the FIRST lane (a cordon) whose reconcile suspends
four times for 1 ms (its read and its write). An event's latency runs from when it was due (the socket had
it), not from when the loop got to it: a loop held by the resync holds the event's arrival too.
`--compare DIR` runs the same in a child process with `PYTHONPATH=DIR` first (another checkout's runtime).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from syncer.runtime.controller import DONE, Controller, ControllerRunner, Result
from syncer.runtime.queue import Lane
from syncer.runtime.tasks import cancel_and_wait
from syncer.runtime.watch import Watch, Watches

EVENT_EVERY_S = 0.025
KEYS = 10_000


class Source:
    def __init__(self) -> None:
        self.handlers: list[Callable[[str], None]] = []

    def subscribe(self, handler: Callable[[str], None]) -> None:
        self.handlers.append(handler)

    def emit(self, name: str) -> None:
        for handler in self.handlers:
            handler(name)


class Resynced(Controller):
    name = "resync-loop"

    def __init__(self, source: Source, cost_s: float) -> None:
        self.source = source
        self.cost_s = cost_s
        self.due: dict[str, float] = {}
        self.latencies: list[float] = []
        self.all_done = asyncio.Event()  # every event emitted reconciled
        self.emitting = True
        self.calls = 0

    def watches(self) -> Watches:
        return (Watch(self.source.subscribe, lambda name: [name], lane=Lane.FIRST),)

    async def keys(self) -> list[str]:
        self.calls += 1  # none at the start: the periodic resyncs only
        return [f"n{i:05d}" for i in range(KEYS)] if self.calls > 1 else []

    async def reconcile(self, key: str) -> Result:
        if key.startswith("event"):
            for _ in range(4):
                await asyncio.sleep(0.001)  # its read and its write
            self.latencies.append(time.monotonic() - self.due[key])
            if not self.emitting and len(self.latencies) == len(self.due):
                self.all_done.set()
            return DONE
        end = time.perf_counter() + self.cost_s
        while time.perf_counter() < end:  # a reconcile in agreement: CPU only, never suspends
            pass
        return DONE


async def measure(seconds: float, cost_s: float, resync_s: float) -> list[float]:
    source = Source()
    controller = Resynced(source, cost_s)
    runner = ControllerRunner(controller, workers=8, first_workers=256, resync_s=resync_s)
    serving = asyncio.create_task(runner.serve())
    started = time.monotonic()
    try:
        for index in range(int(seconds / EVENT_EVERY_S)):
            due = started + (index + 1) * EVENT_EVERY_S
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            controller.due[f"event-{index}"] = due
            source.emit(f"event-{index}")
        controller.emitting = False
        if len(controller.latencies) < len(controller.due):
            await controller.all_done.wait()  # the last events' reconciles  # the last events' reconciles
    finally:
        await cancel_and_wait([serving])
    return sorted(controller.latencies)


def line(label: str, latencies: list[float]) -> str:
    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    over = sum(x > 0.05 for x in latencies)
    return (
        f"{label}: n={len(latencies)} p50 {q(0.5):.1f} / p95 {q(0.95):.1f} / p99 {q(0.99):.1f} / "
        f"max {latencies[-1] * 1000:.1f} ms; over 50 ms: {over}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--cost-ms", type=float, default=0.2, help="CPU of one resync reconcile")
    parser.add_argument("--resync-s", type=float, default=8.0)
    parser.add_argument("--compare", metavar="DIR", help="first the runtime of the checkout in DIR")
    parser.add_argument("--label", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    if args.compare:
        argv = [sys.executable, str(Path(__file__).resolve()), "--seconds", str(args.seconds)]
        argv += ["--cost-ms", str(args.cost_ms), "--resync-s", str(args.resync_s), "--label", args.compare]
        env = {**os.environ, "PYTHONPATH": args.compare}
        subprocess.run(argv, env=env, check=True, cwd="/")  # cwd: not this checkout's syncer first
    latencies = asyncio.run(measure(args.seconds, args.cost_ms / 1000, args.resync_s))
    print(line(args.label, latencies), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
