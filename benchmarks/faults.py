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
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root

from benchmarks.run import cancel_on_sigterm, seed
from syncer.app.logs import configure_logging
from syncer.app.service import ServiceConfig, SyncerService
from syncer.kube.client import KubeClient
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.sync.options import SyncOptions
from syncer.testing.faultproxy import FaultProxy
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.processes import stop_process
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


def _is_list(path: str) -> bool:
    """A collection GET (a re-list), as opposed to a GET of one object."""
    bare = path.split("?", 1)[0].rstrip("/")
    return bare.endswith(("/pods", "/nodes", "/nodesets", "/events", "/leases"))


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
    kube: dict[str, float] = field(default_factory=dict)  # the syncer's Kubernetes API requests
    events: dict[str, int] = field(default_factory=dict)  # Event writes (creates and count bumps)
    not_ready_s: float = 0.0  # how long /readyz said not ready while the faults lasted
    ready_after: bool | None = None  # ready again once converged

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "faults_injected": self.faults_injected, "actions": self.actions,
            "wrong_actions": len(self.wrong_actions), "changes_lost": len(self.changes_lost),
            "converge_s": round(self.converge_s, 2), "examples": (self.wrong_actions + self.changes_lost)[:5],
            "kube_requests": self.kube, "events": self.events, "not_ready_s": round(self.not_ready_s, 1),
            "ready_after": self.ready_after, "notes": self.notes,
        }  # fmt: skip


@dataclass
class Stage:
    sandbox: Sandbox
    kube: KubeApiEmulator
    kubeconfig: Path
    reader: SlurmClient
    names: list[str]
    workdir: Path
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

    async def syncer(self, config: ServiceConfig = CONFIG, slurm_url: str = "") -> SyncerService:
        """A syncer in this process, on the sandbox (or `slurm_url`, e.g. a fault proxy) and the emulator."""
        slurm = SlurmClient(slurm_url or self.sandbox.rest_url, TokenFile(self.sandbox.token_file))
        kube = await KubeClient.from_config(str(self.kubeconfig), qps=200, burst=400)
        return SyncerService(slurm, kube, config)

    def reset(self, touched: list[str]) -> None:
        """Leaves the stage clean for the next scenario."""
        for node in touched:
            if node in self.cordoned:
                self.cordon(node, False)
        for node in touched:
            self.sandbox.run("scontrol", "update", f"nodename={node}", "state=undrain")
        self.ever_cordoned.clear()

    def event_counts(self) -> Counter[tuple[str, str]]:
        """(object, reason) -> how many times an Event was recorded (count summed over Event objects)."""
        counts: Counter[tuple[str, str]] = Counter()
        for event in self.kube.api.store.objects_of(("", "events")):
            counts[(event["involvedObject"]["name"], event["reason"])] += int(event.get("count") or 1)
        return counts

    def watch_kube(self) -> Callable[[], tuple[dict[str, float], dict[str, int]]]:
        """Starts counting the syncer's requests and Events; the returned function gives the figures."""
        server = self.kube.server
        server.requests.clear()
        server.record_requests = True
        events_before = self.event_counts()
        started = time.monotonic()

        def figures() -> tuple[dict[str, float], dict[str, int]]:
            server.record_requests = False
            elapsed = max(time.monotonic() - started, 1e-9)
            requests = list(server.requests)
            per_second = Counter(int(t - started) for t, _method, _path in requests)
            lists = sum(
                1 for _t, m, path in requests if m == "GET" and "watch=" not in path and _is_list(path)
            )
            kube = {
                "total": len(requests), "per_s": round(len(requests) / elapsed, 1),
                "peak_per_s": max(per_second.values(), default=0), "lists": lists,
                "watches": sum(1 for _t, m, path in requests if m == "GET" and "watch=" in path),
                "writes": sum(1 for _t, m, _path in requests if m != "GET"),
            }  # fmt: skip
            written = self.event_counts() - events_before
            repeated = sorted((n, f"{obj} {reason}") for (obj, reason), n in written.items() if n > 1)
            if repeated:
                progress(f"Events recorded more than once: {repeated[-5:]}")
            events = {
                "written": sum(written.values()),
                "max_per_object_reason": max(written.values(), default=0),
            }
            return kube, events

        return figures

    async def wait_converged(self, outcome: Outcome, deadline_s: float) -> None:
        """Records the nodes still wrong after `deadline_s` (none, once converged) and how long it took."""
        cleared = time.monotonic()
        while time.monotonic() - cleared < deadline_s:
            outcome.changes_lost = await self.converged()
            if not outcome.changes_lost:
                break
            await asyncio.sleep(0.2)  # convergence poll
        outcome.converge_s = time.monotonic() - cleared

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
    service = await stage.syncer(config, slurm_url)
    service.engine.on_action = stage.record
    picked = random.sample(stage.names, changes)
    figures = stage.watch_kube()
    await service.start()
    try:
        await service.wait_ready(60)

        async def sample_readiness() -> None:
            while True:
                await asyncio.sleep(0.1)  # sampling period
                if not service.readiness()[0]:
                    outcome.not_ready_s += 0.1

        sampler = asyncio.create_task(sample_readiness())
        plan = [(n, True) for n in picked] + [(n, False) for n in picked[: changes // 2]]
        for step, (node, on) in enumerate(plan):
            stage.cordon(node, on)
            outcome.faults_injected += await inject(step)
            await asyncio.sleep(0.1)  # the pace of the change stream
        outcome.faults_injected += await inject(-1)  # -1: clear every fault
        sampler.cancel()
        await stage.wait_converged(outcome, deadline_s)
        await wait_ready_again(service, outcome)
    finally:
        await service.stop()
        outcome.kube, outcome.events = figures()
    outcome.actions = len(stage.actions)
    outcome.wrong_actions = list(stage.wrong)
    stage.reset(picked)
    progress(f"{name}: {outcome.row()}")
    return outcome


async def wait_ready_again(service: SyncerService, outcome: Outcome, deadline_s: float = 30.0) -> None:
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        if service.readiness()[0]:
            break
        await asyncio.sleep(0.1)  # readiness poll
    outcome.ready_after = service.readiness()[0]
    if not outcome.ready_after:
        outcome.notes = f"not ready after recovery: {service.readiness()[1]}"


async def warm_up(stage: Stage) -> None:
    """A first syncer writes every node's Slurm state to Kubernetes, so that no scenario's figures carry
    that one-off initial sync."""
    progress("warm-up: initial sync of Slurm state into Kubernetes")
    service = await stage.syncer()
    await service.start()
    try:
        await service.wait_ready(60)
        store, deadline = stage.kube.api.store, time.monotonic() + 60
        seen, quiet_since = store.rv, time.monotonic()
        while time.monotonic() - quiet_since < 1.5 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # until the store stops moving
            if store.rv != seen:
                seen, quiet_since = store.rv, time.monotonic()
    finally:
        await service.stop()


def size(quick: bool) -> int:
    return 12 if quick else 60


async def slurmrestd_restarts(stage: Stage, quick: bool) -> Outcome:
    every = 6 if quick else 15

    async def inject(step: int) -> int:
        if step >= 0 and step % every == 3:
            await asyncio.to_thread(stage.sandbox.stop_slurmrestd)
            # mostly short outages; one longer than the staleness bound, so /readyz must say so
            await asyncio.sleep(5.0 if step == every + 3 else 1.0)
            await asyncio.to_thread(stage.sandbox.start_slurmrestd)
            return 1
        return 0

    return await run_scenario(stage, "slurmrestd killed and restarted", size(quick), inject)


async def slurmctld_restart(stage: Stage, quick: bool) -> Outcome:
    async def inject(step: int) -> int:
        if step == size(quick) // 2:
            await asyncio.to_thread(stage.sandbox.restart_slurmctld)
            return 1
        return 0

    return await run_scenario(stage, "slurmctld restarted", size(quick), inject)


async def bad_slurm_answers(stage: Stage, quick: bool) -> Outcome:
    async with FaultProxy(stage.sandbox.rest_url) as proxy:
        modes = ["corrupt", "truncate", "delay"]

        async def inject(step: int) -> int:
            proxy.clear_faults()
            if step < 0:
                return 0
            mode = modes[step % 3]
            if mode == "delay":
                proxy.delay_s = 1.5
            else:
                setattr(proxy, mode, True)
            return 1

        return await run_scenario(
            stage,
            "slurmrestd slow, corrupted and truncated answers",
            size(quick),
            inject,
            slurm_url=proxy.url,
        )


async def kube_api_faults(stage: Stage, quick: bool) -> Outcome:
    async def inject(step: int) -> int:
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

    async def no_fault(_step: int) -> int:
        return 0

    # the same stream without faults first: the yardstick for requests and Events under faults
    baseline = await run_scenario(stage, "Kubernetes API baseline (no faults)", size(quick), no_fault)
    outcome = await run_scenario(
        stage, "Kubernetes API: dropped watches, 410, 500/429, latency", size(quick), inject
    )
    outcome.kube["baseline_total"] = baseline.kube["total"]
    outcome.kube["ratio_to_baseline"] = round(outcome.kube["total"] / max(baseline.kube["total"], 1), 2)
    outcome.events["baseline_written"] = baseline.events["written"]
    return outcome


async def mass_not_ready(stage: Stage, quick: bool) -> Outcome:
    """A network partition: every Node loses Ready at once; the valve must hold."""
    outcome = Outcome("mass NotReady (all Nodes at once)")
    config = replace(CONFIG, options=SyncOptions(ready_grace_s=1.0), max_drain_fraction=0.10)
    service = await stage.syncer(config)
    drains: list[str] = []
    service.engine.on_action = lambda kind, d, node, det: (
        drains.append(node) if kind == "drain" and det.get("result") == "ok" else None
    )
    figures = stage.watch_kube()
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
        outcome.kube, outcome.events = figures()
    progress(f"{outcome.scenario}: {outcome.row()}")
    return outcome


async def syncer_crashes(stage: Stage, quick: bool) -> Outcome:
    return await crash_scenario(stage, changes=40 if quick else 200, kills=4 if quick else 12)


SCENARIOS: dict[str, Callable[[Stage, bool], Awaitable[Outcome]]] = {
    "slurmrestd": slurmrestd_restarts,
    "slurmctld": slurmctld_restart,
    "bad-answers": bad_slurm_answers,
    "kube-api": kube_api_faults,
    "not-ready": mass_not_ready,
    "crash": syncer_crashes,
}


class SyncerProcess:
    """`slurm-syncer run` as a real process (as the Deployment runs it), restarted after each SIGKILL with
    the same identity, as a container restarted in its pod would be."""

    def __init__(self, stage: Stage, slurm_url: str) -> None:
        self.stage = stage
        self.slurm_url = slurm_url
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.started_at = 0.0

    async def start(self) -> None:
        self.starts += 1
        self.started_at = time.monotonic()
        argv = [
            str(Path(sys.executable).parent / "slurm-syncer"), "--log-format", "json", "run",
            "--slurm-url", self.slurm_url, "--slurm-token-file", str(self.stage.sandbox.token_file),
            "--kubeconfig", str(self.stage.kubeconfig), "--namespace", NAMESPACE, "--identity", "crash-test",
            "--lease-namespace", NAMESPACE, "--slurm-poll-interval", "300ms", "--slurm-stale-after", "3s",
            "--max-drain-fraction", "1.0", "--ready-grace-period", "3600s", "--no-nodeset-enabled",
            "--listen-address", "127.0.0.1:0",
        ]  # fmt: skip
        log = (self.stage.workdir / f"syncer-{self.starts}.log").open("wb")
        with log:
            self.process = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None:
            await stop_process(self.process)


def judge_writes(
    writes: list[tuple[float, str, str, bytes]],
    cordoned_at: dict[str, float],
    uncordoned_at: dict[str, float],
) -> tuple[int, list[str]]:
    """Every node write seen by the proxy, judged at the instant it arrived: a drain needs a cordon made
    before it, an undrain needs the uncordon made before it (nodes are cordoned once, uncordoned once)."""
    actions, wrong = 0, []
    for at, method, path, body in writes:
        if method != "POST" or "/node/" not in path:
            continue
        node = path.rstrip("/").rsplit("/", 1)[1]
        try:
            state = json.loads(body).get("state") or []
        except ValueError:
            wrong.append(f"unreadable write to {node}: {body[:80]!r}")
            continue
        actions += 1
        if "DRAIN" in state and not cordoned_at.get(node, float("inf")) <= at:
            wrong.append(f"drained {node}, not cordoned")
        if "UNDRAIN" in state and not uncordoned_at.get(node, float("inf")) <= at:
            wrong.append(f"undrained {node} while cordoned")
    return actions, wrong


async def crash_scenario(stage: Stage, changes: int, kills: int, deadline_s: float = 90.0) -> Outcome:
    """The syncer process is SIGKILLed at random points of a stream of `changes` cordons and uncordons (a
    random delay after a change, so a write may be in flight) and restarted at once each time."""
    name = "syncer SIGKILLed at random points and restarted"
    cordons = (changes * 2 + 2) // 3
    progress(f"{name}: {changes} changes ({cordons} cordons, {changes - cordons} uncordons), {kills} kills")
    outcome = Outcome(name)
    picked = random.sample(stage.names, cordons)
    plan = [(n, True) for n in picked] + [(n, False) for n in random.sample(picked, changes - cordons)]
    kill_after = set(random.sample(range(changes), kills))
    cordoned_at: dict[str, float] = {}
    uncordoned_at: dict[str, float] = {}
    killed_writing = 0  # kills of a process that had already written to Slurm
    figures = stage.watch_kube()
    async with FaultProxy(stage.sandbox.rest_url) as proxy:  # records every write the syncer makes
        syncer = SyncerProcess(stage, proxy.url)
        await syncer.start()
        try:
            for step, (node, on) in enumerate(plan):
                stage.cordon(node, on)
                (cordoned_at if on else uncordoned_at)[node] = time.monotonic()
                if step in kill_after:
                    # a random point of the process's life: starting, syncing, or writing
                    await asyncio.sleep(random.uniform(0.0, 4.0))
                    await syncer.kill()
                    outcome.faults_injected += 1
                    killed_writing += any(t > syncer.started_at for t, *_rest in proxy.writes)
                    await syncer.start()
                await asyncio.sleep(0.1)  # the pace of the change stream
            await stage.wait_converged(outcome, deadline_s)
        finally:
            await syncer.stop()
            outcome.kube, outcome.events = figures()
        outcome.actions, outcome.wrong_actions = judge_writes(proxy.writes, cordoned_at, uncordoned_at)
    outcome.notes = f"{syncer.starts} processes, {killed_writing} of the {kills} kills after it had written"
    if outcome.changes_lost:
        tail = (stage.workdir / f"syncer-{syncer.starts}.log").read_text(errors="replace")[-3000:]
        progress(f"{name}: not converged; last syncer log:\n{tail}")
    stage.reset(picked)
    progress(f"{name}: {outcome.row()}")
    return outcome


async def main_async(args: argparse.Namespace) -> int:
    cancel_on_sigterm()
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
            kubeconfig = kube.write_kubeconfig(Path(tmp) / "kubeconfig")
            stage = Stage(sandbox, kube, kubeconfig, reader, names, Path(tmp))
            await warm_up(stage)
            outcomes = [await SCENARIOS[key](stage, args.quick) for key in args.only or SCENARIOS]
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
    parser.add_argument("--only", nargs="+", choices=list(SCENARIOS), help="run only these scenarios")
    configure_logging("console", "warning")  # the figures matter here, not the syncer's info lines
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
