"""Power pass cost (issue 45): what one reconcile of a power-managed NodeSet costs with N members Slurm
powers up whose pods wait (unschedulable, well within startTimeout), and what declaring N members costs;
the code at a git revision (the old code) and this tree's, one after the other in one run.

    python benchmarks/power.py --pass-cost 1000 --baseline 2da9f28 --out DIR

Each side gets a sandbox of its own (Slurm 26.05, room for N dynamic nodes), an emulator of its own and the
syncer as a real process (`python -m syncer run` from that side's tree, `git archive` of the revision for
the old code), configured through the environment as deployed, with the defaults (--kube-qps 50). Then:

1. declare: a NodeSet of N members (`maxReplicas: N`, startTimeout 30m, a nodeSelector no Node matches):
   seconds until Slurm shows every member POWERED_DOWN, the NodeSet's passes meanwhile, the longest
   (from the reconcile histogram's buckets) and the Slurm requests;
2. steady: every member powered up (`scontrol update state=POWER_UP`), its pod created and Pending; the
   NodeSet is then touched 5 times (an annotation), each once the last pass is done: per pass, the
   Kubernetes requests (GETs of single pods apart), the Slurm requests and the seconds.

Figures come from the syncer's own /metrics (passes, their seconds, Slurm requests by endpoint) and from the
emulator's request log (every Kubernetes request, exact).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.run import machine_reference_s, progress
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, up
from syncer.testing.sandbox.config import free_port

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE, GROUP, VERSION, NAME = "bench", "slurm-syncer.dev", "v1alpha1", "pc"
POKES = 5
BUCKETS_NAME = "slurm_syncer_reconcile_duration_seconds_bucket"


def nodeset(count: int) -> dict[str, Any]:
    return {
        "metadata": {"name": NAME},
        "spec": {
            "slurm": {"features": [NAME]},
            "power": {"maxReplicas": count, "startTimeout": "30m", "node": {"cpus": 1, "realMemory": 400}},
            "template": {"spec": {"nodeSelector": {"pool": "nowhere"},
                                  "containers": [{"name": "slurmd", "image": "slurmd:26.05"}]}},
        },
    }  # fmt: skip


def tree_of(baseline: str, directory: Path) -> Path:
    """The old code: `git archive` of the revision (no worktree of the shared repository)."""
    tree = directory / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", baseline], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def samples(text: str, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    """Every series `name` of Prometheus text whose labels include `labels`: (labels, value)."""
    found = []
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        series, _, rest = head.partition("{")
        if series != name:
            continue
        pairs = dict(p.split("=", 1) for p in rest.rstrip("}").split(",") if "=" in p)
        got = {k: v.strip('"') for k, v in pairs.items()}
        if all(got.get(k) == v for k, v in labels.items()):
            found.append((got, float(value)))
    return found


def total(text: str, name: str, **labels: str) -> float:
    return sum(value for _labels, value in samples(text, name, **labels))


def longest_pass_bound(text: str) -> float:
    """The smallest histogram bound every NodeSet pass so far fits under (+Inf as 1e9)."""
    buckets = sorted(
        (float("inf") if b["le"] == "+Inf" else float(b["le"]), v)
        for b, v in samples(text, BUCKETS_NAME, controller="nodeset")
    )
    count = buckets[-1][1] if buckets else 0
    return next((le for le, v in buckets if v >= count), float("inf"))


class Syncer:
    """`python -m syncer run` from `tree` against one side's sandbox and emulator."""

    def __init__(self, tree: Path, sandbox: Sandbox, kubeconfig: Path, log: Path) -> None:
        self.port = free_port()
        self.env = {
            **os.environ, "PYTHONPATH": str(tree),
            "SLURM_SYNCER_SLURM_URL": sandbox.rest_url,
            "SLURM_SYNCER_SLURM_TOKEN_FILE": str(sandbox.token_file),
            "SLURM_SYNCER_KUBECONFIG": str(kubeconfig),
            "SLURM_SYNCER_LISTEN_ADDRESS": f"127.0.0.1:{self.port}",
            "SLURM_SYNCER_LEASE_NAMESPACE": NAMESPACE,
        }  # fmt: skip
        self.tree, self.log = tree, log
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("wb") as out:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "syncer", "--log-format", "json", "run",
                env=self.env, cwd=self.tree, stdout=out, stderr=out,
            )  # fmt: skip
        await until(self.ready, 120, "the syncer ready")

    async def get(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{self.port}{path}") as response:
                return response.status, await response.text()

    async def ready(self) -> bool:
        try:
            return (await self.get("/readyz"))[0] == 200
        except aiohttp.ClientError:
            return False

    async def metrics(self) -> str:
        return (await self.get("/metrics"))[1]

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()


async def until(check: Any, deadline_s: float, what: str) -> None:
    deadline = time.monotonic() + deadline_s
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {deadline_s} s waiting for {what}")
        await asyncio.sleep(0.25)  # condition poll


async def powered_down(sandbox: Sandbox, count: int) -> bool:
    out = (await asyncio.to_thread(sandbox.run, "sinfo", "-h", "-N", "-o", "%N %t")).stdout.split("\n")
    found = [line.split()[1] for line in out if line.startswith(f"{NAME}-")]
    return len(found) == count and all(state.endswith("~") for state in found)


def kube_figures(kube: KubeApiEmulator, since: float) -> dict[str, int]:
    figures = {"total": 0, "pod_gets": 0, "node_gets": 0, "writes": 0}
    for at, method, path in kube.server.requests:
        if at < since or "watch=" in path:
            continue
        figures["total"] += 1
        bare = path.split("?", 1)[0]
        if method == "GET" and f"/namespaces/{NAMESPACE}/pods/" in bare:
            figures["pod_gets"] += 1
        elif method == "GET" and "/api/v1/nodes/" in bare:
            figures["node_gets"] += 1
        elif method != "GET":
            figures["writes"] += 1
    return figures


async def side(label: str, tree: Path, count: int, directory: Path) -> dict[str, Any]:
    progress(f"{label}: {count} members, the syncer from {tree}; load {os.getloadavg()}")
    sandbox = up(directory / "slurm", nodes=0, slurm="26.05", max_dynamic=count + 10)
    kube = KubeApiEmulator()
    await kube.start()
    kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    kube.server.record_requests = True
    syncer = Syncer(tree, sandbox, kube.write_kubeconfig(directory / "kubeconfig"), directory / "syncer.log")
    out: dict[str, Any] = {}
    try:
        await syncer.start()
        out["declare"] = await declare_phase(syncer, kube, sandbox, count)
        progress(f"{label} declare: {out['declare']}")
        out["steady"] = await steady_phase(syncer, kube, sandbox, count)
        progress(f"{label} steady: {out['steady']}")
    finally:
        await syncer.stop()
        await kube.stop()
        await asyncio.to_thread(sandbox.down)
    return out


async def declare_phase(
    syncer: Syncer, kube: KubeApiEmulator, sandbox: Sandbox, count: int
) -> dict[str, Any]:
    before, started = await syncer.metrics(), time.monotonic()
    kube.create(GROUP, VERSION, "nodesets", nodeset(count), namespace=NAMESPACE)
    await until(lambda: powered_down(sandbox, count), 1800, f"{count} members declared")
    seconds = time.monotonic() - started
    after = await syncer.metrics()
    passes = total(after, "slurm_syncer_reconcile_total", controller="nodeset") - total(
        before, "slurm_syncer_reconcile_total", controller="nodeset"
    )
    return {
        "seconds": round(seconds, 2), "passes": int(passes), "longest_pass_le_s": longest_pass_bound(after),
        "slurm_requests": slurm_delta(before, after),
    }  # fmt: skip


def slurm_delta(before: str, after: str) -> dict[str, int]:
    counts: dict[str, float] = {}
    for text, sign in ((after, 1), (before, -1)):
        for labels, value in samples(text, "slurm_syncer_slurm_requests_total"):
            counts[labels["endpoint"]] = counts.get(labels["endpoint"], 0) + sign * value
    return {k: int(v) for k, v in sorted(counts.items()) if v}


async def steady_phase(syncer: Syncer, kube: KubeApiEmulator, sandbox: Sandbox, count: int) -> dict[str, Any]:
    names = f"{NAME}-[0-{count - 1}]"
    await asyncio.to_thread(sandbox.scontrol, "update", f"nodename={names}", "state=POWER_UP")

    async def pods() -> bool:
        return len(kube.api.store.objects_of(("", "pods"), NAMESPACE)) >= count

    await until(pods, 1800, f"{count} pods created")
    await asyncio.sleep(5)  # the creates' echoes settle before the window (a settling time, not a sync)
    before, since = await syncer.metrics(), time.monotonic()
    key = {"controller": "nodeset"}
    for poke in range(POKES):
        done = total(await syncer.metrics(), "slurm_syncer_reconcile_total", **key)
        kube.patch(GROUP, VERSION, "nodesets", NAME, {"metadata": {"annotations": {"bench/poke": str(poke)}}},
                   namespace=NAMESPACE)  # fmt: skip

        async def passed(done: float = done) -> bool:
            return total(await syncer.metrics(), "slurm_syncer_reconcile_total", **key) > done

        await until(passed, 600, f"pass {poke + 1}")
    seconds, after = time.monotonic() - since, await syncer.metrics()
    passes = total(after, "slurm_syncer_reconcile_total", **key) - total(
        before, "slurm_syncer_reconcile_total", **key
    )
    pass_s = total(after, "slurm_syncer_reconcile_duration_seconds_sum", **key) - total(
        before, "slurm_syncer_reconcile_duration_seconds_sum", **key
    )
    kube_req = kube_figures(kube, since)
    return {
        "passes": int(passes), "window_s": round(seconds, 2),
        "seconds_per_pass": round(pass_s / max(passes, 1), 3),
        "kube_requests": kube_req,
        "kube_requests_per_pass": {k: round(v / max(passes, 1), 1) for k, v in kube_req.items()},
        "slurm_requests": slurm_delta(before, after),
    }  # fmt: skip


async def pass_cost(count: int, baseline: str, directory: Path) -> dict[str, Any]:
    results: dict[str, Any] = {
        "members": count,
        "baseline": baseline,
        "machine_reference_s": machine_reference_s(),
    }
    results["load_before"] = os.getloadavg()
    old = tree_of(baseline, directory / "before")
    results["before"] = await side(f"before ({baseline})", old, count, directory / "before")
    results["after"] = await side("after (this tree)", ROOT, count, directory / "after")
    results["load_after"] = os.getloadavg()
    return results
