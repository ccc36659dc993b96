"""How Slurm preempts a pod's job (an EXTERNAL_JOB) and how the one-pool scheduler follows (issue 44).

    python benchmarks/scheduler_preemption.py --slurm 26.05 \
        --out benchmarks/results/scheduler-preemption-26.05
    python benchmarks/scheduler_preemption.py --only slurm --out DIR   # Slurm's side alone (about 3 min)

One private sandbox (`PreemptType=preempt/partition_prio`, the partitions below over the same real slurmd
nodes of 2 CPUs; the sandbox's KillWait=5), every job taking all of a node's CPUs, times from the preemptor's
submit:

- `slurm`: Slurm alone, two nodes side by side per round: an external job (what `SlurmClient.submit_job`
  sends on 25.05+) in a low partition preempted by a batch job in `high`, for REQUEUE and CANCEL with and
  without GraceTime; and a batch job in a low partition preempted by an external job in `high`. The victim's
  distinct states (state, reason, restart count), `preempt_time` and `end_time` after the submit, and when
  the preemptor runs.
- `syncer`: the syncer's service with its scheduler against the Kubernetes API emulator (a Node per Slurm
  node, its kubelet taking `--stop-s` to stop a deleted pod): a pod in a low partition bound, then a batch
  job in `high` on its node: when the pod is deleted (and with which cause and Event), whether the node is
  held (the drain of `HOLD_TAG`), when the pod is gone, the job ended, the preemptor runs, the hold lifted
  (`--repeat` rounds each); and a pod in `high` on a node a batch job in a low partition holds: when it is
  bound.

Prints each part's facts and writes DIR/results.json (release, machine reference, load). Needs root.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.run import machine_reference_s, progress
from benchmarks.scheduler_slurm import (
    WHOLE,
    Json,
    Rest,
    preemption_round,
    running,
    sandbox,
    settle,
    summary,
    wait,
)
from benchmarks.service_bench import CONFIG as SERVICE_CONFIG
from syncer.app.logs import configure_logging
from syncer.app.service import SyncerService
from syncer.control.holds import HOLD_TAG
from syncer.controllers.scheduler.options import SchedulerOptions
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing.demo_story import ready_node
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, release

CONF = (
    "PreemptType=preempt/partition_prio",
    "PreemptMode=REQUEUE",
    "PartitionName=requeue_grace Nodes=ALL PriorityTier=1 GraceTime=10 PreemptMode=REQUEUE",
    "PartitionName=requeue Nodes=ALL PriorityTier=1 PreemptMode=REQUEUE",
    "PartitionName=cancel_grace Nodes=ALL PriorityTier=1 GraceTime=10 PreemptMode=CANCEL",
    "PartitionName=cancel Nodes=ALL PriorityTier=1 PreemptMode=CANCEL",
    "PartitionName=high Nodes=ALL PriorityTier=10 PreemptMode=OFF",
)
NAMESPACE = "bench"
SCHEDULER = "slurm-syncer"
FEATURE = "pods"  # the syncer part's node: the Namespace's default constraint keeps pods there


def config_lines(sbx: Sandbox) -> list[str]:
    wanted = ("PreemptType", "PreemptMode", "KillWait", "SchedulerParameters", "SLURM_VERSION")
    text = sbx.scontrol("show", "config")
    return [" ".join(line.split()) for line in text.splitlines() if line.strip().startswith(wanted)]


def part_slurm(sbx: Sandbox) -> Json:
    rest = Rest(sbx)
    nodes = ("dyn1", "dyn2")
    out: Json = {}
    for victim_partition, victim_kind, winner_kind in (
        ("requeue_grace", "external", "batch"),
        ("requeue", "external", "batch"),
        ("cancel_grace", "external", "batch"),
        ("cancel", "external", "batch"),
        ("requeue", "batch", "external"),
        ("cancel", "batch", "external"),
        ("cancel_grace", "batch", "external"),
    ):
        key = f"{victim_kind} in {victim_partition} by {winner_kind} in high"
        progress(f"slurm: {key}")
        rows = preemption_round(rest, victim_partition, victim_kind, "high", winner_kind, nodes)
        out[key] = [{**row, "victim_after": brief(row["victim_after"])} for row in rows]
        left = settle(rest, nodes)
        if left:
            out[f"{key}: left after the round"] = left
    return out


def brief(state: Json) -> Json:
    keep = ("state", "reason", "restart_cnt", "flags", "gone")
    return {k: state[k] for k in keep if k in state}


def host(name: str) -> Json:
    node = ready_node(f"k8s-{name}", {Keys.NODE_NAME_LABEL: name})
    node["status"]["allocatable"] = {"cpu": "2", "memory": "1Gi", "pods": "110"}
    node["status"]["capacity"] = dict(node["status"]["allocatable"])
    return node


def pod_body(name: str, partition: str, grace: int) -> Json:
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "annotations": {Keys.JOB_PARTITION: partition},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {"name": "app", "image": "app", "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}
            ],
        },
    }


class Watch:
    """The first time each named thing was seen true, polled every 0.1 s (seconds since `t0`)."""

    def __init__(self, t0: float, checks: dict[str, Callable[[], bool]]) -> None:
        self.t0, self.checks = t0, checks
        self.seen: dict[str, float] = {}

    async def until(self, done: Callable[[dict[str, float]], bool], timeout_s: float) -> dict[str, float]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, check in self.checks.items():
                if name not in self.seen and await asyncio.to_thread(check):
                    self.seen[name] = round(time.monotonic() - self.t0, 2)
            if done(self.seen):
                break
            await asyncio.sleep(0.1)
        return dict(sorted(self.seen.items(), key=lambda kv: kv[1]))


async def pod_preempted(
    sbx: Sandbox, kube: KubeApiEmulator, service: SyncerService, node: str, name: str, partition: str,
    grace: int,
) -> Json:  # fmt: skip
    """A pod in `partition` bound on `node`; a batch job in `high` on the node: what follows."""
    rest = Rest(sbx)
    scheduler = service.scheduler
    before = dict(scheduler.stats.teardowns) if scheduler else {}
    kube.create("", "v1", "pods", pod_body(name, partition, grace), namespace=NAMESPACE)

    def pod() -> Json | None:
        return kube.pod(NAMESPACE, name)

    await asyncio.to_thread(wait, lambda: bool((pod() or {}).get("spec", {}).get("nodeName")), 60, "bound")
    job = int((pod() or {})["metadata"]["annotations"][Keys.SCHEDULER_JOB_ID])
    t0 = time.monotonic()
    winner = rest.batch(partition="high", required_nodes=[node], **WHOLE)

    def reason() -> str:
        return str((rest.node(node) or {}).get("reason") or "")

    def ended() -> bool:
        state = summary(rest.job(job))
        return bool(state.get("gone")) or not ({"RUNNING", "PENDING"} & set(state.get("state") or []))

    watch = Watch(
        t0,
        {
            "victim preempt_time set": lambda: bool(summary(rest.job(job)).get("preempt_time")),
            "pod deleted (deletionTimestamp)": lambda: (
                (pod() or {"metadata": {"deletionTimestamp": 1}})["metadata"].get("deletionTimestamp")
                is not None
            ),
            "node held (scheduler hold drain)": lambda: HOLD_TAG in reason(),
            "pod gone": lambda: pod() is None,
            "victim job ended": ended,
            "preemptor RUNNING": lambda: running(summary(rest.job(winner))),
        },
    )
    # the hold's end: the drain of ours gone after it was seen (checks run in order, the hold's first)
    watch.checks["hold lifted"] = lambda: (
        "node held (scheduler hold drain)" in watch.seen and (HOLD_TAG not in reason())
    )
    seen = await watch.until(lambda s: {"preemptor RUNNING", "pod gone", "hold lifted"} <= set(s), 90)
    events = [
        (e.get("reason"), e.get("message"))
        for e in kube.api.store.objects_of(("", "events"))
        if e["involvedObject"]["name"] == name
    ]
    after = dict(scheduler.stats.teardowns) if scheduler else {}
    victim = summary(rest.job(job))
    rest.cancel(winner)
    await asyncio.to_thread(settle, rest, (node,))
    return {
        "seconds from the preemptor's submit": seen,
        "preemptor ran before the pod was gone": (
            seen.get("preemptor RUNNING", 1e9) < seen.get("pod gone", 1e9)
        ),
        "victim job at the end": brief(victim),
        "teardown causes counted": {
            k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)
        },
        "events on the pod": events,
    }


async def pod_preempts(
    sbx: Sandbox, kube: KubeApiEmulator, client: KubeClient, node: str, name: str, partition: str
) -> Json:
    """A batch job in `partition` holding all of `node`; a pod in `high`: when it is bound."""
    rest = Rest(sbx)
    victim = rest.batch(partition=partition, required_nodes=[node], **WHOLE)
    await asyncio.to_thread(wait, lambda: running(summary(rest.job(victim))), 30, "victim runs")
    t0 = time.monotonic()
    kube.create("", "v1", "pods", pod_body(name, "high", 0), namespace=NAMESPACE)

    def bound() -> bool:
        return bool(((kube.pod(NAMESPACE, name) or {}).get("spec") or {}).get("nodeName"))

    watch = Watch(
        t0,
        {
            "victim preempt_time set": lambda: bool(summary(rest.job(victim)).get("preempt_time")),
            "victim ended or requeued": lambda: not running(summary(rest.job(victim))),
            "pod bound": bound,
        },
    )
    seen = await watch.until(lambda s: "pod bound" in s, 90)
    victim_after = summary(rest.job(victim))
    await client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
    await asyncio.to_thread(wait, lambda: kube.pod(NAMESPACE, name) is None, 30, "pod gone")
    await asyncio.to_thread(settle, rest, (node,))
    return {"seconds from the pod's creation": seen, "victim job": brief(victim_after)}


async def part_syncer(sbx: Sandbox, directory: Path, stop_s: float, repeat: int) -> Json:
    node = "pod1"
    sbx.start_slurmd(node, cpus=2, memory_mb=1000, features=[FEATURE])
    configure_logging("json", "info", stream=(directory / "syncer.log").open("w"))
    kube = KubeApiEmulator(kubelet_termination_s=stop_s)
    await kube.start()
    # the pods choose their partition: the Namespace allows it (a pod may not by default)
    annotations = {Keys.JOB_CONSTRAINT: FEATURE, Keys.POD_OVERRIDES: "partition"}
    kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE, "annotations": annotations}})
    kube.create("", "v1", "nodes", host(node))
    config = SERVICE_CONFIG.replace(
        scheduler=SchedulerOptions(name=SCHEDULER, namespaces=(NAMESPACE,)), lease_namespace=NAMESPACE
    )
    client = await KubeClient.from_config(str(kube.write_kubeconfig(directory / "kubeconfig")))
    service = SyncerService(SlurmClient(sbx.rest_url, TokenFile(sbx.token_file)), client, config)
    out: Json = {"pod stop time (kubelet), s": stop_s}
    try:
        await service.start()
        await service.wait_ready(120)
        cases = [(p, 5) for p in ("cancel_grace", "requeue_grace", "cancel", "requeue")] * repeat
        for i, (partition, grace) in enumerate(cases):
            key = f"pod (grace {grace} s) in {partition} preempted by a batch job in high, #{i // 4 + 1}"
            progress(f"syncer: {key}")
            out[key] = await pod_preempted(sbx, kube, service, node, f"victim{i}", partition, grace)
        for i, partition in enumerate(("requeue_grace", "cancel") * repeat):
            key = f"pod in high preempts a batch job in {partition}, #{i // 2 + 1}"
            progress(f"syncer: {key}")
            out[key] = await pod_preempts(sbx, kube, client, node, f"winner{i}", partition)
    finally:
        await service.stop()
        await kube.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--slurm", default=None, help="26.05 (default: $SLURM_SYNCER_SLURM_RELEASE, else 26.05)"
    )
    parser.add_argument("--only", default="", help="slurm or syncer (default: both)")
    parser.add_argument("--stop-s", type=float, default=3.0, help="how long a deleted pod takes to stop")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of each syncer case")
    parser.add_argument("--out", type=Path, required=True, help="directory for results.json")
    args = parser.parse_args()
    slurm = release(args.slurm).name
    parts = [p for p in args.only.split(",") if p] or ["slurm", "syncer"]
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="preemption-bench-"))
    progress(f"the sandbox and the syncer's log: {work}")
    results: Json = {
        "release": slurm,
        "machine_reference_s": round(machine_reference_s(), 3),
        "load_before": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    path = args.out / "results.json"
    with sandbox(work, "preempt", slurm, CONF, nodes=1) as sbx:
        results["config"] = config_lines(sbx)
        if "slurm" in parts:
            sbx.start_slurmd("dyn1", cpus=2, memory_mb=1000)
            sbx.start_slurmd("dyn2", cpus=2, memory_mb=1000)
            results["slurm"] = part_slurm(sbx)
            path.write_text(json.dumps(results, indent=1, default=str) + "\n")
            print(json.dumps({"slurm": results["slurm"]}, indent=1, default=str), flush=True)
        if "syncer" in parts:
            results["syncer"] = asyncio.run(part_syncer(sbx, work, args.stop_s, args.repeat))
            print(json.dumps({"syncer": results["syncer"]}, indent=1, default=str), flush=True)
    results["load_after"] = os.getloadavg()
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
