"""Fault scenarios with figures: while a stream of Kubernetes-side changes (cordon, later uncordon, each
node once) flows, faults are injected on one side; afterwards the harness checks every Slurm write the
syncer made against the ground truth and waits for convergence.

    python benchmarks/faults.py --out DIR            # long versions
    python benchmarks/faults.py --quick --out DIR    # short versions (the tests run these)

Per scenario: faults injected, actions taken, wrong actions (a drain of a node never cordoned, an undrain
of a node still cordoned: must be 0), changes lost (a node whose Slurm state does not match its cordon
after recovery: must be 0) and seconds to converge after the last fault.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root

from benchmarks.run import seed
from syncer.app.logs import configure_logging
from syncer.app.service import ServiceConfig, SyncerService
from syncer.kube.client import KubeClient
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.sync.options import SyncOptions
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import Sandbox, up
from syncer.testing.sandbox.config import sim_node_names

NAMESPACE = "slurm"
CONFIG = ServiceConfig(
    options=SyncOptions(ready_grace_s=3600.0),  # the NotReady scenario sets its own
    slurm_poll_interval_s=0.3,
    slurm_stale_after_s=3.0,
    leader_election=False,
    max_drain_fraction=1.0,
    listen_port=None,
    resync_s=5.0,
)


def progress(text: str) -> None:
    print(f"[faults] {text}", file=sys.stderr, flush=True)


@dataclass
class Outcome:
    scenario: str
    faults_injected: int = 0
    actions: int = 0
    wrong_actions: list[str] = field(default_factory=list)
    changes_lost: list[str] = field(default_factory=list)
    converge_s: float = 0.0
    notes: str = ""

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "faults_injected": self.faults_injected, "actions": self.actions,
            "wrong_actions": len(self.wrong_actions), "changes_lost": len(self.changes_lost),
            "converge_s": round(self.converge_s, 2), "examples": (self.wrong_actions + self.changes_lost)[:5],
            "notes": self.notes,
        }  # fmt: skip


@dataclass
class Stage:
    sandbox: Sandbox
    kube: KubeApiEmulator
    kubeconfig: Path
    reader: SlurmClient
    names: list[str]
    cordoned: set[str] = field(default_factory=set)
    ever_cordoned: set[str] = field(default_factory=set)
    actions: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, direction, node)
    wrong: list[str] = field(default_factory=list)

    def cordon(self, name: str, on: bool) -> None:
        self.kube.patch("", "v1", "nodes", f"k8s-{name}", {"spec": {"unschedulable": True if on else None}})
        (self.cordoned.add if on else self.cordoned.discard)(name)
        if on:
            self.ever_cordoned.add(name)

    def record(self, kind: str, direction: str, node: str, _details: dict[str, Any]) -> None:
        self.actions.append((kind, direction, node))
        # judged at the moment it is acknowledged: a drain needs a cordon, an undrain needs none
        if direction == "k8s_to_slurm" and kind == "drain" and node not in self.ever_cordoned:
            self.wrong.append(f"drained {node}, never cordoned")
        if direction == "k8s_to_slurm" and kind == "undrain" and node in self.cordoned:
            self.wrong.append(f"undrained {node} while cordoned")

    async def converged(self) -> list[str]:
        listing = await self.reader.list_all_nodes()
        drained = {n.name for n in listing.nodes if n.drain_flag}
        return sorted(n for n in self.names if (n in self.cordoned) != (n in drained))


async def run_scenario(
    stage: Stage,
    name: str,
    changes: int,
    inject: Callable[[int], Awaitable[int]],
    *,
    slurm_url: str = "",
    config: ServiceConfig = CONFIG,
    deadline_s: float = 90.0,
) -> Outcome:
    """`changes` nodes are cordoned and later uncordoned, one step every 0.1 s; `inject(step)` adds faults
    on the way and returns how many it added."""
    progress(f"{name}: {changes} nodes, cordon then uncordon each")
    outcome = Outcome(name)
    stage.wrong = []
    stage.actions = []
    slurm = SlurmClient(slurm_url or stage.sandbox.rest_url, TokenFile(stage.sandbox.token_file))
    kube = await KubeClient.from_config(str(stage.kubeconfig), qps=200, burst=400)
    service = SyncerService(slurm, kube, config)
    service.engine.on_action = stage.record
    picked = random.sample(stage.names, changes)
    await service.start()
    try:
        await service.wait_ready(60)
        plan = [(n, True) for n in picked] + [(n, False) for n in picked[: changes // 2]]
        for step, (node, on) in enumerate(plan):
            stage.cordon(node, on)
            outcome.faults_injected += await inject(step)
            await asyncio.sleep(0.1)  # the pace of the change stream
        outcome.faults_injected += await inject(-1)  # -1: clear every fault
        cleared = time.monotonic()
        while time.monotonic() - cleared < deadline_s:
            outcome.changes_lost = await stage.converged()
            if not outcome.changes_lost:
                break
            await asyncio.sleep(0.2)  # convergence poll
        outcome.converge_s = time.monotonic() - cleared
    finally:
        await service.stop()
    outcome.actions = len(stage.actions)
    outcome.wrong_actions = list(stage.wrong)
    for node in picked:  # leave the stage clean for the next scenario
        if node in stage.cordoned:
            stage.cordon(node, False)
    for node in picked:
        stage.sandbox.run("scontrol", "update", f"nodename={node}", "state=undrain")
    stage.ever_cordoned.clear()
    progress(f"{name}: {outcome.row()}")
    return outcome


async def scenarios(stage: Stage, quick: bool) -> list[Outcome]:
    n = 12 if quick else 60
    results = []

    async def restart_slurmrestd(step: int) -> int:
        if step >= 0 and step % (6 if quick else 15) == 3:
            await asyncio.to_thread(stage.sandbox.stop_slurmrestd)
            await asyncio.sleep(1.0)  # slurmrestd stays down this long
            await asyncio.to_thread(stage.sandbox.start_slurmrestd)
            return 1
        return 0

    results.append(await run_scenario(stage, "slurmrestd killed and restarted", n, restart_slurmrestd))

    async def restart_slurmctld(step: int) -> int:
        if step == n // 2:
            await asyncio.to_thread(stage.sandbox.restart_slurmctld)
            return 1
        return 0

    results.append(await run_scenario(stage, "slurmctld restarted", n, restart_slurmctld))

    async with FaultProxy(stage.sandbox.rest_url) as proxy:
        modes = ["corrupt", "truncate", "delay"]

        async def bad_bodies(step: int) -> int:
            proxy.clear_faults()
            if step < 0:
                return 0
            mode = modes[step % 3]
            if mode == "delay":
                proxy.delay_s = 1.5
            else:
                setattr(proxy, mode, True)
            return 1

        results.append(
            await run_scenario(
                stage, "slurmrestd slow, corrupted and truncated answers", n, bad_bodies, slurm_url=proxy.url
            )
        )

    async def kube_faults(step: int) -> int:
        faults = stage.kube.faults
        if step < 0:
            faults.clear()
            return 0
        if step % 4 == 0:
            stage.kube.drop_watches()
            return 1
        if step % 4 == 1:
            stage.kube.compact()
            return 1
        if step % 4 == 2:
            faults.fail_next(5, status=500 if step % 8 == 2 else 429)
            return 1
        faults.latency_s = 0.3
        return 1

    results.append(
        await run_scenario(stage, "Kubernetes API: dropped watches, 410, 500/429, latency", n, kube_faults)
    )

    # a network partition: every Node loses Ready at once; the valve must hold
    outcome = Outcome("mass NotReady (all Nodes at once)")
    slurm = SlurmClient(stage.sandbox.rest_url, TokenFile(stage.sandbox.token_file))
    kube = await KubeClient.from_config(str(stage.kubeconfig), qps=200, burst=400)
    config = replace(CONFIG, options=SyncOptions(ready_grace_s=1.0), max_drain_fraction=0.10)
    service = SyncerService(slurm, kube, config)
    drains: list[str] = []
    service.engine.on_action = lambda kind, d, node, det: (
        drains.append(node) if kind == "drain" and det.get("result") == "ok" else None
    )
    await service.start()
    try:
        await service.wait_ready(60)
        for name in stage.names:
            stage.kube.set_node_condition(f"k8s-{name}", "Ready", "False", "NodeStatusUnknown", "partition")
        outcome.faults_injected = len(stage.names)
        await asyncio.sleep(8 if quick else 30)  # the storm lasts this long: the valve must hold throughout
        threshold = service.engine.valve.threshold(len(stage.names))
        outcome.actions = len(drains)
        if len(set(drains)) > threshold:
            outcome.wrong_actions.append(f"{len(set(drains))} drains past the valve threshold {threshold}")
        outcome.notes = (
            f"valve open: {service.engine.valve.is_open}, threshold {threshold}, drained {len(set(drains))}"
        )
        ready, reasons = service.readiness()
        if ready or not any("valve" in r for r in reasons):
            outcome.wrong_actions.append("readiness did not report the open valve")
        for name in stage.names:
            stage.kube.set_node_condition(f"k8s-{name}", "Ready", "True", "KubeletReady", "back")
        cleared = time.monotonic()
        while time.monotonic() - cleared < 60:
            listing = await stage.reader.list_all_nodes()
            left = [n.name for n in listing.nodes if n.drain_flag and n.name in set(stage.names)]
            if not left:
                break
            await asyncio.sleep(0.2)  # recovery poll
        outcome.changes_lost = left
        outcome.converge_s = time.monotonic() - cleared
    finally:
        await service.stop()
    progress(f"{outcome.scenario}: {outcome.row()}")
    results.append(outcome)
    return results


async def main_async(args: argparse.Namespace) -> int:
    out = Path(args.out)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    nodes = 60 if args.quick else 200
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        sandbox = await asyncio.to_thread(up, Path(tmp) / "sandbox", nodes)
        kube = KubeApiEmulator(bookmark_interval_s=1.0)
        await kube.start()
        reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
        try:
            await reader.start()
            names = sim_node_names(nodes)
            seed(kube, names)
            stage = Stage(sandbox, kube, kube.write_kubeconfig(Path(tmp) / "kubeconfig"), reader, names)
            outcomes = await scenarios(stage, args.quick)
        finally:
            await reader.close()
            await kube.stop()
            await asyncio.to_thread(sandbox.down)
    rows = [o.row() for o in outcomes]
    results = {"date": time.strftime("%Y-%m-%d"), "nodes": nodes, "quick": args.quick, "scenarios": rows}
    await asyncio.to_thread((out / "results.json").write_text, json.dumps(results, indent=2))
    for row in rows:
        print(
            f"{row['scenario']:58s} faults {row['faults_injected']:3d}  actions {row['actions']:4d}  "
            f"wrong {row['wrong_actions']}  lost {row['changes_lost']}  converge {row['converge_s']:.1f} s"
        )
    return 1 if any(r["wrong_actions"] or r["changes_lost"] for r in rows) else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="short versions (60 nodes, 12 changes each)")
    parser.add_argument("--seed", type=int, default=7)
    configure_logging("console", "warning")  # the figures matter here, not the syncer's info lines
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
