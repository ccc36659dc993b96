"""`slurm-syncer demo`: the whole product on this machine, narrated.

A real Slurm sandbox (slurmctld, slurmd, slurmrestd) and the Kubernetes API emulator with slurmd pods and
a NodeSet whose pods are backed by real slurmd processes; the syncer between them; then a short scenario:
cordon a Node and watch Slurm drain it, drain a node in Slurm and watch Kubernetes see it, scale the
NodeSet down while a job runs, announce a maintenance window on the real node (a long job kept off, a
short one placed), declare a partition in Kubernetes, drain it in an emergency and reconfigure slurmctld
(syncer/testing/demo_partitions.py), let a pod and a Slurm job queue for one node in Slurm, each waiting
for the other (syncer/testing/demo_scheduler.py), and let Slurm's power saving bring a NodeSet's pod for a
job, start the job as slurm-syncer's PrologSlurmctld says the member is ready, and take the pod away once
idle (syncer/testing/demo_power.py). The screen is the story: each claim is
printed once the demo has seen it hold, with a short line per syncer action it tells of; the syncer's log
goes to a file named at the start (`--verbose`: to the terminal instead). `--keep` leaves everything
running for kubectl and scontrol; Ctrl-C ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncer.app.service import ServiceConfig, SyncerService
from syncer.app.status_cmd import render
from syncer.controllers.attributes.options import AttributeOptions
from syncer.controllers.maintenance.plan import PREFIX
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.controllers.partitions.options import PartitionOptions
from syncer.controllers.sync.drift import Row, drift_rows
from syncer.controllers.sync.options import SyncOptions
from syncer.kube.client import KubeClient
from syncer.model.keys import Keys
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.testing import prolog
from syncer.testing.demo_log import ActionTap, log_path, logging_to
from syncer.testing.demo_partitions import FEATURE_LABELS, partitions
from syncer.testing.demo_power import NODESET as POWER_NODESET
from syncer.testing.demo_power import member_conf, power
from syncer.testing.demo_scheduler import OPTIONS as SCHEDULER_OPTIONS
from syncer.testing.demo_scheduler import one_pool
from syncer.testing.demo_story import DemoError, detail, ready_node, say, syncer_did
from syncer.testing.demo_story import wait as wait  # benchmarks import it from here
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.sandbox import DEFAULT_RELEASE, RELEASES, Sandbox, SandboxError, up
from syncer.testing.sandbox.config import REAL_NODE, free_port, free_port_block
from syncer.testing.sandbox.rootfs import cache_dir, rootfs_path
from syncer.testing.slurmd_standin import SlurmdStandIn

NAMESPACE = "slurm"
GROUP, VERSION = "slurm-syncer.dev", "v1alpha1"
NODESET = "gpu"
BOUND = ("node00001", "node00002", "node00003")  # simulated Slurm nodes with a slurmd pod each
REAL_HOST = "cpu-real"  # a Kubernetes Node bound to the sandbox's real slurmd (hybrid host, by label)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run everything locally (real Slurm sandbox + Kubernetes emulator) with a narrated scenario",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", type=Path, default=None, help="sandbox directory (default: a temporary one)")
    parser.add_argument("--nodes", type=int, default=20, help="simulated Slurm nodes (default 20)")
    parser.add_argument(
        "--slurm",
        choices=sorted(RELEASES),
        default=DEFAULT_RELEASE,
        help=f"Slurm release of the sandbox (default {DEFAULT_RELEASE}, what current clusters run)",
    )
    parser.add_argument("--replicas", type=int, default=3, help="slurmd pods of the NodeSet (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep everything running after the scenario")
    parser.add_argument("--metrics-port", type=int, default=0, help="port of /metrics (default: a free one)")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the syncer's full log here too (default: only the story; the log goes to a file)",
    )
    parser.set_defaults(func=run)


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def drained_condition(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "SlurmNodeDrained" and c.get("status") == "True" for c in conditions)


@dataclass
class World:
    sandbox: Sandbox
    kube: KubeApiEmulator
    kubeconfig: Path
    service: SyncerService
    reader: SlurmClient
    tap: ActionTap

    def told(self, *subjects: str, kinds: tuple[str, ...] = ()) -> None:
        """Print the syncer's actions (of `kinds`) about `subjects` logged so far, one short line each."""
        syncer_did(self.tap.take(*subjects, kinds=kinds))

    def rows(self) -> list[Row]:
        service = self.service
        return drift_rows(service.kube_cache, service.slurm_cache.nodes, service.engine.options, time.time())

    def table(self) -> None:
        for line in render(self.rows()).splitlines():
            detail(line)

    def sinfo(self, *nodes: str) -> str:
        argv = ["sinfo", "-h", "-N", "-o", "%N %T %E"] + (["-n", ",".join(nodes)] if nodes else [])
        return self.sandbox.run(*argv).stdout.strip()

    def pod(self, name: str) -> dict[str, Any]:
        return self.kube.pod(NAMESPACE, name) or {}

    def nodeset(self) -> dict[str, Any]:
        return self.kube.get(GROUP, VERSION, "nodesets", NODESET, namespace=NAMESPACE) or {}

    def events_of(self, name: str, reason: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.kube.api.store.objects_of(("", "events"))
            if e["involvedObject"]["name"] == name and e["reason"] == reason
        ]

    def job_states(self, *jobs: str) -> list[str]:
        return self.sandbox.run("squeue", "-h", "-j", ",".join(jobs), "-o", "%T").stdout.split()


def seed(kube: KubeApiEmulator, replicas: int) -> None:
    kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    for index, slurm_name in enumerate(BOUND):
        node = f"cpu-{index}"
        kube.create("", "v1", "nodes", ready_node(node, {"pool": "cpu"}))
        pod = {
            "metadata": {
                "name": f"slurmd-{slurm_name}",
                "labels": {"app": "slurmd", Keys.NODE_NAME_LABEL: slurm_name},
            },
            "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd:24.11"}]},
        }  # fmt: skip
        kube.create("", "v1", "pods", pod, namespace=NAMESPACE)
    kube.create("", "v1", "nodes", ready_node(REAL_HOST, {Keys.NODE_NAME_LABEL: REAL_NODE}))
    for index in range(max(1, replicas)):
        kube.create("", "v1", "nodes", ready_node(f"gpu-node-{index}", {"pool": "gpu"}))
    nodeset = {
        "metadata": {"name": NODESET},
        "spec": {
            "replicas": replicas,
            "slurm": {"features": ["demo"]},
            "drainTimeout": "10m",
            "template": {
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "containers": [{"name": "slurmd", "image": "slurmd:24.11"}],
                }
            },
        },
    }  # fmt: skip
    kube.create(GROUP, VERSION, "nodesets", nodeset, namespace=NAMESPACE)


@contextlib.asynccontextmanager
async def world(
    args: argparse.Namespace, directory: Path, log: Path | None, tap: ActionTap
) -> AsyncIterator[World]:
    if log is not None:
        detail(f"syncer log: {log} (with the sandbox's progress; --verbose shows it here)")
    say(
        f"starting a real Slurm {args.slurm} sandbox in {directory} "
        f"({args.nodes} simulated nodes + 1 real slurmd)"
    )
    if not rootfs_path(RELEASES[args.slurm], cache_dir()).exists():
        detail("first run: its Debian root file system is built first (30 s to 2 min)")
    # KeepPartInfo: the partition scene's partition (made over REST) outlives its reconfigure; slurm-syncer's
    # PrologSlurmctld starts the power scene's job once its member is ready (asks nobody till the syncer runs)
    prolog.install(directory)
    # the power scene's one member listens there (a slurmd per member here)
    power_port = free_port_block(1)
    extra_conf = (prolog.CONF_LINE, *member_conf(RELEASES[args.slurm], power_port))
    sandbox = await asyncio.to_thread(
        up, directory, args.nodes, slurm=args.slurm, keep_partitions=True, extra_conf=extra_conf
    )
    try:
        detail(f"slurmrestd {sandbox.slurm_version} at {sandbox.rest_url}")
        kube = KubeApiEmulator(bookmark_interval_s=1.0, kubelet_termination_s=0.5)
        await kube.start()
        try:
            kubeconfig = kube.write_kubeconfig(directory / "kubeconfig", namespace=NAMESPACE)
            say(f"Kubernetes API emulator at {kube.url} (kubeconfig {kubeconfig})")
            seed(kube, args.replicas)
            detail(
                f"{len(BOUND)} slurmd pods bound to {', '.join(BOUND)}; "
                f"NodeSet {NODESET} with {args.replicas} replicas"
            )
            async with (
                SlurmdStandIn(kube, sandbox, nodesets=(NODESET,)),
                SlurmdStandIn(kube, sandbox, boot=True, port_base=power_port, nodesets=(POWER_NODESET,)),
            ):
                config = ServiceConfig(
                    controllers={
                        "sync": SyncOptions(ready_grace_s=5.0),
                        "attributes": AttributeOptions(feature_labels=FEATURE_LABELS),
                        "nodeset": NodeSetOptions(requeue_s=1.0, power_port_base=power_port),
                        "partitions": PartitionOptions(enabled=True),
                        "scheduler": SCHEDULER_OPTIONS,
                    },
                    slurm_poll_interval_s=0.5,
                    lease_namespace=NAMESPACE,
                    identity="demo",
                    listen_host="127.0.0.1",
                    listen_port=args.metrics_port or free_port(),
                    resync_s=30.0,
                    jobs_poll_interval_s=5.0,
                )
                slurm = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
                kube_client = await KubeClient.from_config(str(kubeconfig))
                service = SyncerService(slurm, kube_client, config)
                say("starting slurm-syncer between them")
                await service.start()
                reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
                await reader.start()
                try:
                    await service.wait_ready(60)
                    detail(f"ready; metrics at http://127.0.0.1:{service.http_port}/metrics")
                    prolog.point(sandbox.directory, f"http://127.0.0.1:{service.http_port}")
                    detail("slurmctld's PrologSlurmctld is `slurm-syncer prolog`, asking this syncer")
                    yield World(sandbox, kube, kubeconfig, service, reader, tap)
                finally:
                    await reader.close()
                    await service.stop()
        finally:
            await kube.stop()
    finally:
        say("stopping the Slurm sandbox")
        await asyncio.to_thread(sandbox.down)


async def scenario(w: World, replicas: int) -> None:
    members = [f"{NODESET}-{i}" for i in range(replicas)]
    took = await wait(
        lambda: all((w.service.slurm_cache.nodes.get(m) is not None) for m in members),
        f"the {replicas} NodeSet pods to register their Slurm nodes", 120,
    )  # fmt: skip
    detail(f"NodeSet pods registered as dynamic Slurm nodes in {took:.1f} s:")
    w.told(*members, kinds=("create",))
    for line in w.sinfo(*members).splitlines():
        detail(f"  sinfo: {line}")
    w.table()

    target, kube_node = BOUND[0], "cpu-0"
    say(f"1. cordon Kubernetes Node {kube_node} (runs the slurmd pod of {target}), with a reason")
    w.tap.clear()
    w.kube.patch(
        "", "v1", "nodes", kube_node, {"metadata": {"annotations": {Keys.CORDON_REASON: "fan failure"}}}
    )
    w.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": True}})

    async def drained() -> bool:
        return (await w.reader.get_node(target)).drain_flag

    took = await wait(drained, f"Slurm to drain {target}")
    w.told(target, kinds=("drain",))
    detail(f"Slurm drained it {took * 1000:.0f} ms later: {w.sinfo(target)}")

    admin = BOUND[1]
    say(
        f"2. an admin drains {admin} in Slurm: scontrol update nodename={admin} state=drain reason='bad DIMM'"
    )
    w.tap.clear()
    w.sandbox.scontrol("update", f"nodename={admin}", "state=drain", "reason=bad DIMM")
    pod_name = f"slurmd-{admin}"
    took = await wait(
        lambda: annotations_of(w.pod(pod_name)).get(Keys.REASON) == "bad DIMM",
        f"the pod of {admin} to show the drain",
    )  # fmt: skip
    w.told(admin, kinds=("annotate",))
    annotations = annotations_of(w.pod(pod_name))
    detail(
        f"Kubernetes shows it {took:.2f} s later: "
        f"{Keys.STATE}={annotations.get(Keys.STATE)}, {Keys.REASON}=bad DIMM"
    )
    await wait(lambda: drained_condition(w.pod(pod_name)) and bool(w.events_of(pod_name, "SlurmNodeDrained")),
               f"the SlurmNodeDrained condition and Event on pod {pod_name}")  # fmt: skip
    detail("and a SlurmNodeDrained condition and Event on the pod (kubectl describe pod)")

    if replicas >= 3:
        await scale_in(w, members)
    else:
        say("3. (NodeSet scale-in needs --replicas 3 or more: skipped)")

    say(f"4. uncordon {kube_node}: the drain was ours, so Slurm undrains {target}")
    w.tap.clear()
    w.kube.patch("", "v1", "nodes", kube_node, {"spec": {"unschedulable": None}})

    async def undrained() -> bool:
        return not (await w.reader.get_node(target)).drain_flag

    took = await wait(undrained, f"Slurm to undrain {target}")
    w.told(target, kinds=("undrain",))
    kept = await w.reader.get_node(admin)
    if kept.drain_flag and kept.reason == "bad DIMM":
        detail(f"undrained {took * 1000:.0f} ms later; {admin} keeps the admin's drain (not ours to lift)")
    else:
        raise DemoError(f"{admin} lost the admin's drain: {sorted(kept.state)} {kept.reason!r}")
    # the syncer's view (what `slurm-syncer status` shows) once its cache has seen the undrain
    await wait(lambda: any(r.slurm_node == target and "DRAIN" not in r.slurm_state for r in w.rows()),
               f"the syncer's cache to see {target} undrained")  # fmt: skip
    w.table()
    stats = w.service.slurm_cache.stats
    detail(
        f"slurmrestd cost: {stats.probes} cheap probes ({stats.not_modified} answered 304), "
        f"{stats.full_fetches} full lists"
    )
    await maintenance(w)
    await partitions(w, 7, REAL_HOST)
    await one_pool(w, 10)
    await power(w, 13)


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


async def maintenance(w: World) -> None:
    """A maintenance window 4 minutes ahead on the real node: long jobs kept off, short ones placed."""
    window = f"{_iso(time.time() + 240)}/PT1H"
    say(f"5. maintenance on {REAL_HOST} (the real slurmd {REAL_NODE}) is announced for {window}")
    w.tap.clear()
    announce = {"metadata": {"annotations": {Keys.MAINTENANCE_WINDOW: window}}}
    w.kube.patch("", "v1", "nodes", REAL_HOST, announce)
    if not w.service.slurm.reservation_writes:
        await wait(
            lambda: bool(w.events_of(REAL_HOST, "MaintenanceWindowUnsupported")), "the Event saying why"
        )
        detail(f"not reserved: {w.events_of(REAL_HOST, 'MaintenanceWindowUnsupported')[0]['message']}")
        w.kube.patch(
            "", "v1", "nodes", REAL_HOST, {"metadata": {"annotations": {Keys.MAINTENANCE_WINDOW: None}}}
        )
        return

    async def reservation() -> str:
        found = [
            r.name
            for r in await w.reader.list_reservations()
            if r.name.startswith(PREFIX) and REAL_NODE in r.nodes
        ]
        return found[0] if found else ""

    async def reserved() -> bool:
        return bool(await reservation())

    took = await wait(reserved, "the Slurm reservation")
    name = await reservation()
    w.told(name, kinds=("reserve",))
    detail(f"Slurm reservation {name} (MAINT) over {REAL_NODE}, {took:.1f} s after the announcement")
    long = w.sandbox.run(
        "sbatch",
        "--parsable",
        "--no-requeue",
        "-w",
        REAL_NODE,
        "--time=10",
        "--wrap",
        "sleep 600",
        check=True,
    ).stdout.strip()
    short = w.sandbox.run(
        "sbatch", "--parsable", "--no-requeue", "-w", REAL_NODE, "--time=1", "--wrap", "sleep 10", check=True
    ).stdout.strip()
    took = await wait(lambda: w.job_states(short) == ["RUNNING"], "the 1-minute job to start", 90)
    reason = w.sandbox.run("squeue", "-h", "-j", long, "-o", "%r").stdout.strip()
    detail(f"job {short} (1-minute limit) runs: it ends before the window ({took:.1f} s after submission)")
    detail(f"job {long} (10-minute limit) is kept off: PENDING, {reason}")
    say("6. the maintenance is called off: the annotation is removed")
    w.tap.clear()
    w.kube.patch("", "v1", "nodes", REAL_HOST, {"metadata": {"annotations": {Keys.MAINTENANCE_WINDOW: None}}})
    await wait(lambda: w.job_states(long) == ["RUNNING"], "the 10-minute job to start", 120)
    w.told(name, kinds=("reserve",))
    detail(f"reservation removed; job {long} (10-minute limit) runs now")
    w.sandbox.run("scancel", long)


async def scale_in(w: World, members: list[str]) -> None:
    replicas = len(members)
    idle, busy, kept = members[0], members[-1], members[-2]
    keep = replicas - 2
    say(f"3. jobs run on {kept} and {busy}; scale NodeSet {NODESET} from {replicas} to {keep}")
    short = w.sandbox.run(
        "sbatch", "--no-requeue", "-w", busy, "--wrap", "sleep 10", check=True
    ).stdout.split()[-1]
    long = w.sandbox.run(
        "sbatch", "--no-requeue", "-w", kept, "--wrap", "sleep 600", check=True
    ).stdout.split()[-1]
    await wait(lambda: w.job_states(short, long) == ["RUNNING"] * 2, "the jobs to run")
    detail(f"job {short} (10 s) on {busy}, job {long} (10 min) on {kept}")
    w.tap.clear()
    w.kube.patch(GROUP, VERSION, "nodesets", NODESET, {"spec": {"replicas": keep}}, namespace=NAMESPACE)

    def gone(name: str) -> bool:
        # sinfo can show the deletion before the syncer has its answer and logs it: wait for the log too
        return w.tap.saw(name, "delete-node") and not w.pod(name) and name not in w.sinfo().split()

    took = await wait(lambda: gone(idle), f"idle {idle} to go", 60)
    w.told(idle, kinds=("drain", "delete-pod", "delete-node"))
    detail(f"{idle} (idle) went first: drained, pod deleted, Slurm node deleted in {took:.1f} s")

    async def busy_draining() -> bool:
        return (await w.reader.get_node(busy)).drain_flag and w.job_states(short) == ["RUNNING"]

    await wait(busy_draining, f"{busy} to drain while its job runs")
    w.told(busy, kinds=("drain",))
    detail(f"{busy} (busy, highest ordinal) drains while its job runs: {w.sinfo(busy)}")
    took = await wait(lambda: gone(busy), f"{busy} to go after its job", 120)
    w.told(busy, kinds=("delete-pod", "delete-node"))
    state = w.sandbox.run("scontrol", "show", "job", short).stdout
    finished = "COMPLETED" if "JobState=COMPLETED" in state else "(see scontrol show job)"
    detail(
        f"its job finished ({finished}); then the pod and Slurm node went, {took:.1f} s after the scale-in"
    )
    if not w.pod(kept) or w.job_states(long) != ["RUNNING"]:
        raise DemoError(f"{kept} should stay with its running job {long}")
    detail(f"{kept} stays with its job: {w.sinfo(kept)}")
    w.sandbox.run("scancel", long)
    await wait(lambda: w.nodeset().get("status", {}).get("replicas") == keep, "the NodeSet status")
    status = w.nodeset().get("status", {})
    detail(
        f"NodeSet status: replicas={status.get('replicas')} ready={status.get('readyReplicas')} "
        f"slurm={status.get('slurm')}"
    )


def keep_instructions(w: World, directory: Path) -> None:
    say("everything keeps running; try:")
    detail(f"export KUBECONFIG={w.kubeconfig}")
    detail(
        "kubectl get nodes,pods,nodesets -n slurm; kubectl cordon cpu-2; "
        "kubectl scale nodeset/gpu --replicas=4"
    )
    detail(f'eval "$(slurm-syncer sandbox env --dir {directory})"   # then: scontrol, sinfo, sbatch')
    detail(f"slurm-syncer sandbox scontrol --dir {directory} show node {BOUND[2]}")
    detail(f"curl http://127.0.0.1:{w.service.http_port}/metrics")
    detail("Ctrl-C stops and removes everything")


async def main_async(args: argparse.Namespace, log: Path | None, tap: ActionTap) -> int:
    with contextlib.ExitStack() as stack:
        directory = args.dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="slurm-syncer-demo-"))
        )
        async with world(args, directory, log, tap) as w:
            await scenario(w, args.replicas)
            if args.keep:
                keep_instructions(w, directory)
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                last = ""
                while not stop.is_set():
                    table = render(w.rows())
                    if table != last:
                        print("\n" + table, flush=True)
                        last = table
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(2.0):
                            await stop.wait()
        say("done" + (f"; the syncer's log is in {log}" if log is not None else ""))
    return 0


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print(
            "slurm-syncer demo: the Slurm sandbox needs root (chroot and mount namespaces)", file=sys.stderr
        )
        return 2
    if args.replicas < 0 or args.nodes < len(BOUND):
        print(f"slurm-syncer demo: need --replicas >= 0 and --nodes >= {len(BOUND)}", file=sys.stderr)
        return 2
    log = None if args.verbose else log_path(args.dir)
    tap = ActionTap()
    try:
        with logging_to(log, args.log_format, args.log_level, tap):
            return asyncio.run(main_async(args, log, tap))
    except (DemoError, SandboxError) as exc:
        print(f"slurm-syncer demo: {exc}", file=sys.stderr)
        if log is not None:
            print(f"slurm-syncer demo: the syncer's log is in {log}", file=sys.stderr)
        return 1
