"""The README's main-job command: it plays its scenario, leaves Slurm and Kubernetes as it says, shows
only its story (the syncer's log goes to a file) and stops every daemon it started."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from syncer.testing.sandbox import Sandbox, load
from syncer.testing.sandbox.processes import ProcessId
from tests.fixtures.kube import Kubectl
from tests.fixtures.slurm import SELECTED

pytestmark = [pytest.mark.slurm, pytest.mark.kube]
CLI = str(Path(sys.executable).parent / "slurm-syncer")
KEPT = "Ctrl-C stops and removes everything"  # the last line before --keep waits
WRITES = "v0.0.45" in SELECTED.api_versions  # Slurm 26.05+: the partition scene plays
LOG_LINE = re.compile(r"^\s*\{|\[\s*(debug|info|warning|error)\s*\]|^sandbox: ")


def started_daemons(directory: Path) -> dict[str, ProcessId]:
    """Every daemon this demo's sandbox started, from its own events log (PID and start time)."""
    started = {}
    for line in (directory / "log" / "events.log").read_text().splitlines():
        match = re.search(r" started (\S+) pid=(\d+) start=(\d+)$", line)
        if match:
            started[match.group(1)] = ProcessId(int(match.group(2)), int(match.group(3)))
    return started


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def drained_condition(pod: dict[str, Any]) -> str:
    found = [c["status"] for c in pod["status"]["conditions"] if c["type"] == "SlurmNodeDrained"]
    return found[0] if found else "missing"


async def check_both_systems(directory: Path, kubectl: Kubectl) -> None:
    """Slurm and Kubernetes as the story left them, read by their own clients (scontrol, kubectl)."""
    sandbox = load(directory)
    assert sandbox is not None and sandbox.healthy()
    assert "DRAIN" not in sandbox.node_state("node00001"), "uncordoned: our drain is lifted"
    assert "DRAIN" in sandbox.node_state("node00002")
    assert "Reason=bad DIMM" in sandbox.scontrol("show", "node", "node00002"), "the admin's drain stays"
    slurm_nodes = set(sandbox.run("sinfo", "-h", "-N", "-o", "%N").stdout.split())
    assert "gpu-1" in slurm_nodes and not {"gpu-0", "gpu-2"} & slurm_nodes, slurm_nodes

    cpu0 = await kubectl.json("get", "node", "cpu-0")
    assert not cpu0["spec"].get("unschedulable")
    pods = {p["metadata"]["name"]: p for p in (await kubectl.json("get", "pods", "-n", "slurm"))["items"]}
    assert "gpu-1" in pods and not {"gpu-0", "gpu-2"} & set(pods), sorted(pods)
    admin = pods["slurmd-node00002"]
    assert annotations_of(admin).get("slurm-syncer.dev/reason") == "bad DIMM"
    assert drained_condition(admin) == "True"
    undrained = pods["slurmd-node00001"]
    assert "DRAIN" not in annotations_of(undrained)["slurm-syncer.dev/state"]
    assert drained_condition(undrained) == "False"
    nodeset = await kubectl.json("get", "nodesets", "gpu", "-n", "slurm")
    assert nodeset["spec"]["replicas"] == 1 and nodeset["status"]["replicas"] == 1
    await check_partition_scene(sandbox, kubectl)
    await check_scheduler_scene(sandbox, kubectl)
    await check_power_scene(sandbox, kubectl)


async def check_partition_scene(sandbox: Sandbox, kubectl: Kubectl) -> None:
    """After the DRAIN and the reconfigure: the partition UP over the labelled node, its CR Ready, the
    node's feature written back; before 26.05 nothing declared."""
    assert "ReconfigFlags=KeepPartInfo" in sandbox.slurm_conf.read_text()
    crs = (await kubectl.json("get", "slurmpartitions"))["items"]
    if not WRITES:
        assert crs == [] and "interactive" not in sandbox.run("sinfo", "-h", "-o", "%P").stdout
        return
    shown = sandbox.scontrol("show", "partition", "interactive")
    assert "State=UP" in shown and f"Nodes={sandbox.real_node}" in shown, shown
    [cr] = crs
    ready = [c for c in cr["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True", cr["status"]
    assert cr["metadata"]["annotations"]["slurm-syncer.dev/partition-owner"] == "created"
    assert "k8s.tier:interactive" in sandbox.scontrol("show", "node", sandbox.real_node)


async def check_scheduler_scene(sandbox: Sandbox, kubectl: Kubectl) -> None:
    """The pod was submitted as a Slurm job, bound, and is gone after its deletion; nothing of the scene is
    left in Slurm's queue; before 25.05 (no external jobs) no pod was made."""
    pods = (await kubectl.json("get", "pods", "-n", "apps"))["items"]
    assert pods == [], [p["metadata"]["name"] for p in pods]
    events = (await kubectl.json("get", "events", "-n", "apps"))["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == "notebook"}
    if not WRITES:
        assert reasons == set(), reasons
        return
    assert {"SlurmJobSubmitted", "Scheduled"} <= reasons, reasons
    assert sandbox.run("squeue", "-h", "-w", "pool-0", "-t", "PENDING,RUNNING").stdout.strip() == ""


async def check_power_scene(sandbox: Sandbox, kubectl: Kubectl) -> None:
    """The job's pod was created and deleted again (the NodeSet's Events), Slurm shows the member
    POWERED_DOWN and the nodes of the earlier scenes were excluded from power saving (before 26.05 the
    member is named in slurm.conf)."""
    nodesets = {
        n["metadata"]["name"] for n in (await kubectl.json("get", "nodesets", "-n", "slurm"))["items"]
    }
    assert "burst" in nodesets
    assert "POWERED_DOWN" in sandbox.node_state("burst-0")
    pods = await kubectl.json("get", "pods", "-n", "slurm", "-l", "slurm-syncer.dev/nodeset=burst")
    assert pods["items"] == [], "the idle member's pod is gone"
    events = (await kubectl.json("get", "events", "-n", "slurm"))["items"]
    reasons = [e["reason"] for e in events if e["involvedObject"]["name"] == "burst"]
    assert reasons.count("PoweringUp") == 1 and reasons.count("PoweredDown") == 1, reasons
    excluded = sandbox.scontrol("show", "config")
    assert "gpu-1" in excluded.partition("SuspendExcNodes")[2].splitlines()[0], "earlier scenes' nodes kept"


async def test_demo_plays_the_scenario_shows_only_its_story_and_tears_down(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    demo = await asyncio.create_subprocess_exec(
        CLI, "demo", "--nodes", "5", "--slurm", SELECTED.name, "--dir", str(directory), "--keep",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert demo.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(600):
            while not lines or KEPT not in lines[-1]:
                line = (await demo.stdout.readline()).decode()
                if not line:
                    break  # the demo ended before keeping things running: the asserts below say why
                lines.append(line)
        assert lines and KEPT in lines[-1], "".join(lines)
        started = started_daemons(directory)
        assert {"slurmctld", "slurmrestd", "slurmd:sbx-real", "slurmd:gpu-1"} <= set(started), started
        await check_both_systems(directory, Kubectl(directory / "kubeconfig", tmp_path / "kubectl-cache"))
    finally:
        if demo.returncode is None:
            demo.send_signal(signal.SIGINT)
        rest, err = await asyncio.wait_for(demo.communicate(), 120)
    out = "".join(lines) + rest.decode()
    assert demo.returncode == 0, out[-3000:] + err.decode()[-3000:]

    log = directory / "syncer.log"
    assert lines[0].strip() == f"syncer log: {log} (with the sandbox's progress; --verbose shows it here)"
    for expected in (
        f"starting a real Slurm {SELECTED.name} sandbox",
        "syncer: drained node00001 in Slurm, reason 'k8s: fan failure'",
        "Slurm drained it",
        "Kubernetes shows it",
        "(idle) went first: drained, pod deleted, Slurm node deleted",
        "syncer: deleted Slurm node gpu-0",
        "its job finished (COMPLETED)",
        "stays with its job",
        "syncer: undrained node00001 in Slurm",
        "keeps the admin's drain",
        *(
            (
                "syncer: created Slurm reservation k8s-maint-",
                "(1-minute limit) runs",
                "(10-minute limit) is kept off",
                "syncer: deleted Slurm reservation k8s-maint-",
                "(10-minute limit) runs now",
            )
            if SELECTED.name != "24.11"
            else ("not reserved:", "maintenance windows need Slurm 25.05+")
        ),
        *(
            (
                "syncer: created Slurm partition interactive (nodes sbx-real)",
                "syncer: updated Slurm partition interactive",
                "a new job is refused by Slurm:",
                "finished: COMPLETED",
                "untouched (KeepPartInfo); k8s.tier:interactive written back",
                "and a new job needing it runs at once",
            )
            if WRITES
            else ("partitions declared in Kubernetes need Slurm 26.05+", "skipped on Slurm 24.11")
        ),
        *(
            (
                "PodScheduled=False SlurmJobPending: Slurm job",
                "is pending (",  # Slurm's reason, read again soon after the submit
                "bound to pool-host and Running",
                "PENDING (Resources): the pod's job",
                "pod gone, its job",
            )
            if WRITES
            else ("one pool: a pod's Slurm job is an external job (Slurm 25.05+)",)
        ),
        (
            "declared to Slurm: burst-0 CLOUD+DYNAMIC_NORM+IDLE+POWERED_DOWN; no pod"
            if WRITES
            else "in slurm.conf: burst-0 CLOUD+IDLE+POWERED_DOWN; no pod"
        ),
        "syncer: created pod burst-0",
        "its slurmd registered",
        "slurmctld started it as slurm-syncer's PrologSlurmctld ended, the member ready",
        "COMPLETED",
        "syncer: deleted pod burst-0: Slurm powered its node down",
        "Slurm powered burst-0 down and its pod is gone",
        "stopping the Slurm sandbox",
        f"==> done; the syncer's log is in {log}",
    ):
        assert expected in out, f"missing {expected!r} in:\n{out}"
    # the screen is the story: no log line on stdout or stderr, the syncer's lines are in the file
    assert not [line for line in out.splitlines() if LOG_LINE.search(line)], out
    assert not err.decode().strip(), err.decode()
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    events = {(r["event"], r.get("slurm_node") or r.get("pod")) for r in records}
    assert {
        ("slurm node drained", "node00001"),
        ("slurm node undrained", "node00001"),
        ("kubernetes updated from slurm", "node00002"),
        ("pod deleted: its Slurm node is drained and idle", "gpu-0"),
        ("slurm node deleted after its pod", "gpu-2"),
    } <= events, sorted(events)
    assert "sandbox: starting slurmrestd" in log.read_text()

    # only the daemons this demo started, by PID and start time (other sandboxes may run meanwhile)
    still = [name for name, process in started_daemons(directory).items() if process.alive()]
    assert not still, f"the demo left its daemons behind: {still}"
