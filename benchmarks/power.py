"""Power-managed NodeSets (issue 39): from a job's submission to its member's pod and to the job running;
a burst of jobs needing many members at once; power-downs of many members.

    python benchmarks/power.py --samples 100 --batch 10 --burst 200 --downs 1000 --out DIR

Real Slurm 26.05 sandbox (no slurm.conf nodes; SuspendTime 5 s, SuspendTimeout 5 s), the Kubernetes API
emulator (its kubelet runs a scheduled pod at once: start delay 0 s) and the syncer's service in this
process (benchmarks/maintenance.py's settings: Slurm polled every 1 s; its log JSON at info into the run's
temporary directory, as deployed). SuspendRate and ResumeRate are unlimited: Slurm's defaults would bound
the figures (benchmarks/RESULTS.md). Three NodeSets, floor 0:

1. `lat` (`--samples` members): batches of `--batch` one-node jobs, each naming a member of its own
   (`-w`) so that each one powers a member up; a real slurmd (`-b`) starts for every pod the kubelet runs.
   Per job: submission -> its pod created (the emulator's store, exact), and -> RUNNING (squeue every
   0.25 s). Slurm starts a job on a powered-up node only at its 30 s periodic check (docs/slurm-releases.md).
2. `idle` (`--downs` members, no slurmd): all powered up with `scontrol update state=POWER_UP`, pods
   created, then `POWER_DOWN_FORCE`: seconds until every pod is gone and Slurm shows every member
   POWERED_DOWN. Members that never registered cannot go idle by SuspendTime (they are POWERING_UP until
   ResumeTimeout), so the power-down is forced; the syncer's side (Slurm says powering down or powered
   down, nothing running: delete the pod) is the same.
3. `burst` (`--burst` members, no slurmd): one job array of `--burst` one-node tasks: seconds until every
   member's pod is created and Running, and the requests that took. Without slurmd the tasks never run.

Prints the figures and writes DIR/results.json. `--pass-cost N --baseline REV` measures instead what one pass
of a power-managed NodeSet costs at N powering-up members, the old code beside this one
(benchmarks/power_pass.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.power_pass import pass_cost
from benchmarks.run import progress
from benchmarks.service_bench import CONFIG as SERVICE_CONFIG
from benchmarks.service_bench import report
from syncer.app.logs import configure_logging
from syncer.app.service import SyncerService
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.kube.client import KubeClient
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.demo import wait
from syncer.testing.demo_story import DemoError, ready_node
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.store import Change
from syncer.testing.sandbox import Sandbox, up
from syncer.testing.sandbox.config import free_port_block
from syncer.testing.slurmd_standin import SlurmdStandIn

NAMESPACE, GROUP, VERSION = "bench", "slurm-syncer.dev", "v1alpha1"


def percentile(values: list[float], share: float) -> float:
    """The issue asks p99 of n >= 100: the sample at that rank (at n = 100, the largest but one)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


HOSTS = 50  # Kubernetes Nodes of the pool (the emulator's scheduler spreads pods over them)
POLL_S = 0.25


def nodeset(name: str, ceiling: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "slurm": {"features": [name]},
            "power": {"minReplicas": 0, "maxReplicas": ceiling, "node": {"cpus": 1, "realMemory": 400},
                      "startTimeout": "30m"},
            "template": {"spec": {"nodeSelector": {"pool": "bench"},
                                  "containers": [{"name": "slurmd", "image": "slurmd:26.05"}]}},
        },
    }  # fmt: skip


class Seen:
    """When each pod was first created and first Running, and when each was deleted (the store, exact)."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.deleted: dict[str, float] = {}

    def __call__(self, change: Change) -> None:
        if change.resource != ("", "pods"):
            return
        name, now = change.obj["metadata"]["name"], time.monotonic()
        if change.type == "DELETED":
            self.deleted.setdefault(name, now)
            return
        self.created.setdefault(name, now)
        if (change.obj.get("status") or {}).get("phase") == "Running":
            self.running.setdefault(name, now)


def short_power_saving(sandbox: Sandbox) -> None:
    conf = sandbox.slurm_conf.read_text().replace("SuspendTime=600", "SuspendTime=5")
    # Slurm's default rates (SuspendRate 60, ResumeRate 300 nodes a minute) would bound the figures
    sandbox.slurm_conf.write_text(conf + "SuspendTimeout=5\nSuspendRate=0\nResumeRate=0\n")
    sandbox.scontrol("reconfigure")
    deadline = time.monotonic() + 30
    while "SuspendTime             = 5 sec" not in sandbox.run("scontrol", "show", "config").stdout:
        if time.monotonic() > deadline:
            raise RuntimeError("SuspendTime=5 not in effect after reconfigure")
        time.sleep(0.2)


async def states(sandbox: Sandbox, prefix: str) -> dict[str, str]:
    """sinfo's state of each node named `prefix`...: `idle~` is powered down, `#` powering up, `%` down."""
    out = (await asyncio.to_thread(sandbox.run, "sinfo", "-h", "-N", "-o", "%N %t")).stdout.split("\n")
    return {line.split()[0]: line.split()[1] for line in out if line.startswith(prefix)}


async def all_powered_down(sandbox: Sandbox, prefix: str, count: int) -> bool:
    found = await states(sandbox, prefix)
    return len(found) == count and all(state.endswith("~") for state in found.values())


def slurm_requests(service: SyncerService) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (endpoint, _status), count in service.slurm.stats.requests.items():
        counts[endpoint] = counts.get(endpoint, 0) + count
    return counts


def kube_requests(kube: KubeApiEmulator, since: float) -> dict[str, int]:
    counts: dict[str, int] = {}
    for at, method, path in kube.server.requests:
        if at < since:
            continue
        kind = next(
            (k for k in ("pods", "events", "nodesets", "nodes", "leases") if f"/{k}" in path), "other"
        )
        key = f"{method} {kind}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v - before.get(k, 0)}


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": round(percentile(values, 0.5), 3),
            "p99": round(percentile(values, 0.99), 3), "max": round(max(values), 3),
            "min": round(min(values), 3)}  # fmt: skip


async def declare(kube: KubeApiEmulator, sandbox: Sandbox, name: str, count: int) -> float:
    started = time.monotonic()
    kube.create(GROUP, VERSION, "nodesets", nodeset(name, count), namespace=NAMESPACE)

    await wait(
        lambda: all_powered_down(sandbox, f"{name}-", count), f"{count} members of {name} declared", 600
    )
    return round(time.monotonic() - started, 3)


async def sbatch(sandbox: Sandbox, *args: str) -> str:
    out = await asyncio.to_thread(
        sandbox.run, "sbatch", "--parsable", "--no-requeue", "--mem=100", *args, check=True
    )
    return out.stdout.strip().split(";")[0]


async def latency(
    sandbox: Sandbox, kube: KubeApiEmulator, seen: Seen, samples: int, batch: int
) -> dict[str, Any]:
    progress(
        f"{samples} single-node jobs in batches of {batch}, each powering up a member with a real slurmd"
    )
    results: dict[str, Any] = {"declare_s": await declare(kube, sandbox, "lat", samples)}
    to_pod, to_running = [], []
    for first in range(0, samples, batch):
        members = [f"lat-{i}" for i in range(first, min(samples, first + batch))]
        submitted = {}
        for member in members:
            submitted[await sbatch(sandbox, "-w", member, "--wrap", "true")] = (member, time.monotonic())
        started: dict[str, float] = {}
        deadline = time.monotonic() + 180
        while len(started) < len(submitted) and time.monotonic() < deadline:
            # every job, not -j: squeue lists none of them once one is purged (MinJobAge)
            out = (await asyncio.to_thread(sandbox.run, "squeue", "-h", "-t", "all", "-o", "%i %T")).stdout
            for line in out.splitlines():
                job, state = line.split()
                if (
                    job in submitted
                    and state in ("RUNNING", "COMPLETING", "COMPLETED")
                    and job not in started
                ):
                    started[job] = time.monotonic()
            await asyncio.sleep(POLL_S)
        for job, (member, at) in submitted.items():
            if member in seen.created:
                to_pod.append(seen.created[member] - at)
            if job in started:
                to_running.append(started[job] - at)
        progress(f"  batch {first // batch + 1}: {len(started)}/{len(submitted)} ran")
    results["submit_to_pod_created_s"] = summary(to_pod)
    results["submit_to_running_s"] = summary(to_running) if to_running else {"n": 0}
    results["did_not_run"] = samples - len(to_running)
    return results


async def downs(
    sandbox: Sandbox, kube: KubeApiEmulator, seen: Seen, service: SyncerService, count: int
) -> dict[str, Any]:
    progress(f"{count} members powered up (no slurmd), then forced down")
    results: dict[str, Any] = {"declare_s": await declare(kube, sandbox, "idle", count)}
    names = f"idle-[0-{count - 1}]"
    started = time.monotonic()
    await asyncio.to_thread(sandbox.scontrol, "update", f"nodename={names}", "state=POWER_UP")
    await wait(lambda: all(f"idle-{i}" in seen.running for i in range(count)), f"{count} pods Running", 600)
    results["power_up_to_pods_running_s"] = round(time.monotonic() - started, 3)
    kube.server.record_requests = True
    slurm_before, started = slurm_requests(service), time.monotonic()
    await asyncio.to_thread(
        sandbox.scontrol, "update", f"nodename={names}", "state=POWER_DOWN_FORCE", "reason=bench"
    )

    def gone() -> bool:
        return all(f"idle-{i}" in seen.deleted for i in range(count))

    await wait(gone, f"{count} pods deleted", 600)
    results["power_down_to_pods_deleted_s"] = round(time.monotonic() - started, 3)
    await wait(lambda: all_powered_down(sandbox, "idle-", count), "Slurm POWERED_DOWN", 600)
    results["power_down_to_slurm_powered_down_s"] = round(time.monotonic() - started, 3)
    results["slurm_requests"] = delta(slurm_requests(service), slurm_before)
    results["kube_requests"] = kube_requests(kube, started)
    return results


async def burst(
    sandbox: Sandbox, kube: KubeApiEmulator, seen: Seen, service: SyncerService, count: int
) -> dict[str, Any]:
    progress(f"one job array of {count} one-node tasks on {count} powered-down members (no slurmd)")
    results: dict[str, Any] = {"declare_s": await declare(kube, sandbox, "burst", count)}
    kube.server.record_requests = True
    slurm_before, since = slurm_requests(service), time.monotonic()
    job = await sbatch(sandbox, f"--array=0-{count - 1}", "--constraint=burst", "--wrap", "true")
    members = [f"burst-{i}" for i in range(count)]
    await wait(lambda: all(m in seen.created for m in members), f"{count} pods created", 600)
    results["submit_to_all_pods_created_s"] = round(max(seen.created[m] for m in members) - since, 3)
    results["submit_to_first_pod_created_s"] = round(min(seen.created[m] for m in members) - since, 3)
    await wait(lambda: all(m in seen.running for m in members), f"{count} pods Running", 600)
    results["submit_to_all_pods_running_s"] = round(max(seen.running[m] for m in members) - since, 3)
    results["slurm_requests"] = delta(slurm_requests(service), slurm_before)
    results["kube_requests"] = kube_requests(kube, since)
    await asyncio.to_thread(sandbox.run, "scancel", job)
    return results


async def run(samples: int, batch: int, burst_n: int, down_n: int, directory: Path) -> dict[str, Any]:
    total = samples + burst_n + down_n
    progress(f"sandbox: Slurm 26.05, room for {total} dynamic nodes; load: {os.getloadavg()}")
    # the syncer's log as deployed (JSON, info) into a file: the console renderer's tracebacks cost seconds
    configure_logging("json", "info", stream=(directory / "syncer.log").open("w"))
    sandbox = up(directory / "slurm", nodes=0, slurm="26.05", max_dynamic=total + 10)
    short_power_saving(sandbox)
    kube = KubeApiEmulator()
    await kube.start()
    kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    for i in range(HOSTS):
        kube.create("", "v1", "nodes", ready_node(f"host-{i}", {"pool": "bench"}))
    seen = Seen()
    kube.api.store.listeners.append(seen)
    port_base = free_port_block(samples)
    config = SERVICE_CONFIG.replace(
        nodeset=NodeSetOptions(power_port_base=port_base), lease_namespace=NAMESPACE
    )
    slurm = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    client = await KubeClient.from_config(
        str(kube.write_kubeconfig(directory / "kubeconfig")), qps=500, burst=1000
    )
    service = SyncerService(slurm, client, config)
    results: dict[str, Any] = {"slurm": sandbox.slurm_version, "uptime_before": uptime()}
    try:
        async with SlurmdStandIn(kube, sandbox, boot=True, port_base=port_base, nodesets=("lat",)) as standin:
            await service.start()
            await service.wait_ready(120)
            phases: tuple[tuple[str, int, Callable[[], Awaitable[dict[str, Any]]]], ...] = (
                ("latency", samples, lambda: latency(sandbox, kube, seen, samples, batch)),
                ("power_downs", down_n, lambda: downs(sandbox, kube, seen, service, down_n)),
                ("burst", burst_n, lambda: burst(sandbox, kube, seen, service, burst_n)),
            )
            for name, count, phase in phases:
                if count:
                    try:
                        results[name] = await phase()
                    except DemoError as exc:  # a phase that timed out: the others still measured
                        results[name] = {"error": str(exc)}
                    progress(f"{name}: {json.dumps(results[name])}")
            results["slurmd_failures"] = standin.failures[:5]
    finally:
        results["uptime_after"] = uptime()
        await service.stop()
        await kube.stop()
        sandbox.down()
    return results


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--downs", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--pass-cost", type=int, default=0, metavar="N",
        help="only the pass cost at N powering-up members, the --baseline revision beside this tree "
        "(benchmarks/power_pass.py)",
    )  # fmt: skip
    parser.add_argument("--baseline", default="2da9f28", help="the old code's git revision for --pass-cost")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-power-") as tmp:
        if args.pass_cost:
            results = asyncio.run(pass_cost(args.pass_cost, args.baseline, Path(tmp)))
        else:
            results = asyncio.run(run(args.samples, args.batch, args.burst, args.downs, Path(tmp)))
    return report(results, args.out)


if __name__ == "__main__":
    sys.exit(main())
