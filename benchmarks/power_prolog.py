"""A power-up timed part by part, with and without slurm-syncer's PrologSlurmctld, and the prolog's cost for
ordinary jobs (issue 47).

    python benchmarks/power_prolog.py --slurm 26.05 --samples 20 --without 10 --batch 5 --plain 20 --out DIR

Real Slurm sandbox (no CLOUD nodes; SuspendTime 5 s, ResumeRate and SuspendRate unlimited), the Kubernetes
API emulator (its kubelet runs a scheduled pod at once) and the syncer's service in this process (Slurm polled
every 1 s, as deployed without slurmctld's metrics), a power-managed NodeSet `lat` whose pods get a real
slurmd (`-b`) as they run. Batches of `--batch` one-node jobs, each naming a member of its own (`-w`), so
each powers one up. Per job, on one clock (this host's):

    submitted      before sbatch
    POWERING_UP    slurmctld running the ResumeProgram for the member (a script stamping `date +%s.%N`:
                   slurmctld marks the node POWERING_UP as it starts it); the first REST read (every
                   0.1 s) that shows it is kept too (`powering_up_rest`: it lags, up to seconds when loaded)
    pod created    the emulator's store (exact)
    pod Ready      the emulator's store (exact): its kubelet marks a running pod Ready at once
    registered     slurmctld's log `Node <member> now responding` (ms)
    RUNNING        slurmctld's log `Configuration for JobId=<id> ... complete` (ms), and which function
                   logged it: prolog_running_decr (the prolog ended) or job_time_limit (the 30 s check)

`--samples` jobs with the prolog asking the syncer, `--without` with the prolog asking nobody (Slurm's own
way). Then `--plain` ordinary jobs one after another on the sandbox's static node: submission -> the job's
script running (it writes `date +%s.%N` first), with PrologSlurmctld asking the syncer (which answers at
once: nothing powers up) and with no PrologSlurmctld in slurm.conf at all. Prints the figures and writes
DIR/results.json. 24.11 cannot declare members over REST: `--slurm 24.11` names them in slurm.conf
(`NodeName=lat-<i> ... State=CLOUD`), which the NodeSet then drives as on 26.05.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.power import GROUP, HOSTS, NAMESPACE, VERSION, nodeset, short_power_saving, summary, uptime
from benchmarks.power_trace import PowerTrace, pass_seconds, traced_parts
from benchmarks.run import machine_reference_s, progress
from benchmarks.service_bench import CONFIG as SERVICE_CONFIG
from benchmarks.service_bench import report
from syncer.app.logs import configure_logging
from syncer.app.service import SyncerService
from syncer.controllers.nodeset.options import NodeSetOptions
from syncer.kube.client import KubeClient
from syncer.slurm.auth import TokenFile
from syncer.slurm.client import SlurmClient
from syncer.slurm.hostlist import expand
from syncer.testing import prolog
from syncer.testing.demo import wait
from syncer.testing.demo_story import ready_node
from syncer.testing.kubeapi import KubeApiEmulator
from syncer.testing.kubeapi.store import Change
from syncer.testing.sandbox import REAL_NODE, Sandbox, up
from syncer.testing.sandbox.config import INNER, free_port_block
from syncer.testing.slurmd_standin import SlurmdStandIn

STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$", re.M)
RESPONDING = re.compile(r"^Node (\S+) now responding")
CONFIGURED = re.compile(r"^(\w+): Configuration for JobId=(\d+) (?:is )?complete")
PARTS = (
    ("submitted", "powering_up", "submission -> POWERING_UP (Slurm)"),
    ("powering_up", "pod_created", "POWERING_UP -> pod created (the syncer)"),
    ("pod_created", "pod_ready", "pod created -> Ready (kubelet; emulator: at once)"),
    ("pod_ready", "registered", "pod Ready -> slurmd registered"),
    ("registered", "running", "slurmd registered -> RUNNING"),
    ("submitted", "running", "submission -> RUNNING"),
)


class Seen:
    """When each pod was first created and first Ready (the store, wall clock)."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.ready: dict[str, float] = {}

    def __call__(self, change: Change) -> None:
        if change.resource != ("", "pods") or change.type == "DELETED":
            return
        name, now = change.obj["metadata"]["name"], time.time()
        self.created.setdefault(name, now)
        conditions = (change.obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            self.ready.setdefault(name, now)


RESUMED = "resumed.log"
RESUME_STAMP = f"""#!/bin/sh
# ResumeProgram: slurmctld runs it as it marks the nodes POWERING_UP; the benchmark's exact stamp
echo "$(date +%s.%N) $1" >> {INNER}/log/{RESUMED}
"""


def stamp_resumes(sandbox: Sandbox) -> None:
    """ResumeProgram writes when slurmctld powers each member up (before short_power_saving's reconfigure)."""
    path = sandbox.directory / "etc" / "resume-stamp"
    path.write_text(RESUME_STAMP)
    os.chmod(path, 0o755)
    conf = sandbox.slurm_conf.read_text().replace(
        "ResumeProgram=/bin/true", f"ResumeProgram={INNER}/etc/resume-stamp"
    )
    sandbox.slurm_conf.write_text(conf)


def resumed(sandbox: Sandbox) -> dict[str, float]:
    """member -> when slurmctld ran the ResumeProgram for it (first time)."""
    path = sandbox.directory / "log" / RESUMED
    found: dict[str, float] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        at, hostlist = line.split(maxsplit=1)
        for name in expand(hostlist):
            found.setdefault(name, float(at))
    return found


def log_events(sandbox: Sandbox) -> tuple[dict[str, float], dict[str, tuple[float, str]]]:
    """From slurmctld's log: member -> when it first registered; job -> (when configured, by what)."""
    text = (sandbox.directory / "log" / "slurmctld.log").read_text(errors="replace")
    registered: dict[str, float] = {}
    configured: dict[str, tuple[float, str]] = {}
    for stamp, line in STAMP.findall(text):
        at = datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()
        if found := RESPONDING.match(line):
            registered.setdefault(found.group(1), at)
        elif found := CONFIGURED.match(line):
            configured.setdefault(found.group(2), (at, found.group(1)))
    return registered, configured


async def sbatch(sandbox: Sandbox, *args: str) -> str:
    out = await asyncio.to_thread(
        sandbox.run, "sbatch", "--parsable", "--no-requeue", "--mem=100", *args, check=True
    )
    return out.stdout.strip().split(";")[0]


async def power_ups(
    sandbox: Sandbox,
    reader: SlurmClient,
    seen: Seen,
    first: int,
    count: int,
    batch: int,
    probes: Callable[[int], str] | None = None,
    trace: PowerTrace | None = None,
) -> list[dict[str, Any]]:
    """`count` jobs from member lat-<first> on, `batch` at a time; each one's timeline. `probes(i)`, when
    given, sets the syncer's probe interval before batch i and names the setting (kept in each sample)."""
    samples: list[dict[str, Any]] = []
    for index, start in enumerate(range(first, first + count, batch)):
        members = [f"lat-{i}" for i in range(start, min(first + count, start + batch))]
        setting = probes(index) if probes else ""
        jobs: dict[str, dict[str, Any]] = {}
        for member in members:
            submitted = time.time()
            job = await sbatch(sandbox, "-w", member, "--wrap", "true")
            jobs[job] = {"job": job, "member": member, "submitted": submitted, "probes": setting}
        powering: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listing = await reader.list_all_nodes()
            now = time.time()
            for node in listing.nodes:
                if node.name in members and "POWERING_UP" in node.state:
                    powering.setdefault(node.name, now)
            _, configured = await asyncio.to_thread(log_events, sandbox)
            if all(job in configured for job in jobs):
                break
            await asyncio.sleep(0.1)
        registered, configured = await asyncio.to_thread(log_events, sandbox)
        powered = await asyncio.to_thread(resumed, sandbox)
        for job, sample in jobs.items():
            member = sample["member"]
            sample["powering_up"] = powered.get(member)  # the ResumeProgram's stamp: exact
            sample["powering_up_rest"] = powering.get(member)  # the 0.1 s REST read's: lags
            sample["pod_created"] = seen.created.get(member)
            sample["pod_ready"] = seen.ready.get(member)
            sample["registered"] = registered.get(member)
            sample["running"], sample["by"] = configured.get(job, (None, ""))
            sample.update(trace.of(member) if trace is not None else {})
            samples.append(sample)
        ran = sum(1 for s in samples[-len(jobs) :] if s["running"])
        progress(f"  jobs on lat-{start}..: {ran}/{len(jobs)} ran")
        await wait(lambda m=members: all_idle_or_down(sandbox, m), "the batch's jobs ended", 120)  # type: ignore[misc]
    return samples


async def all_idle_or_down(sandbox: Sandbox, members: list[str]) -> bool:
    out = (await asyncio.to_thread(sandbox.run, "squeue", "-h", "-o", "%N")).stdout
    return not any(m in out.split() for m in members)


def parts(samples: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for start, end, label in PARTS:
        values = [s[end] - s[start] for s in samples if s.get(start) and s.get(end)]
        table[label] = summary(values) if values else {"n": 0}
    table["left CONFIGURING by"] = {
        by: sum(1 for s in samples if s["by"] == by) for by in sorted({s["by"] for s in samples})
    }
    return table


async def plain_jobs(sandbox: Sandbox, count: int) -> dict[str, float]:
    """Submission -> the job's script running, one ordinary job after another on the static node."""
    took: list[float] = []
    work = sandbox.directory / "work"
    for _ in range(count):
        submitted = time.time()
        job = await sbatch(sandbox, "-w", REAL_NODE, "--wrap", 'date +%s.%N > "$SLURM_JOB_ID.start"')
        mark = work / f"{job}.start"
        await wait(lambda m=mark: _written(m), f"job {job} started", 60)  # type: ignore[misc]
        took.append(float(mark.read_text()) - submitted)
    return summary(took)


async def _written(path: Path) -> bool:
    return await asyncio.to_thread(lambda: path.exists() and path.stat().st_size > 0)


def set_prolog(sandbox: Sandbox, on: bool) -> None:
    """PrologSlurmctld in slurm.conf or not, then a reconfigure (taken at once: `scontrol show config`)."""
    lines = [line for line in sandbox.slurm_conf.read_text().splitlines() if line != prolog.CONF_LINE]
    sandbox.slurm_conf.write_text("\n".join([*lines, *([prolog.CONF_LINE] if on else [])]) + "\n")
    sandbox.scontrol("reconfigure")
    wanted = prolog.CONF_LINE.split("=", 1)[1] if on else "(null)"
    deadline = time.monotonic() + 30
    while True:
        shown = [
            line
            for line in sandbox.run("scontrol", "show", "config").stdout.splitlines()
            if line.startswith("PrologSlurmctld")
        ]
        value = shown[0].split("=", 1)[1].strip() if shown else "(null)"  # unset: not listed (26.05.5)
        if value == wanted:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"PrologSlurmctld not {wanted} after reconfigure: {shown}")
        time.sleep(0.2)


async def run(
    release: str,
    samples: int,
    without: int,
    batch: int,
    plain: int,
    directory: Path,
    compare_probes: bool = False,
) -> dict[str, Any]:
    members = samples + without
    progress(f"sandbox: Slurm {release}, {members} members; load: {os.getloadavg()}")
    configure_logging("json", "info", stream=(directory / "syncer.log").open("w"))
    port_base = free_port_block(members)
    conf: list[str] = [prolog.CONF_LINE]
    if release == "24.11":  # its REST cannot declare members: slurm.conf names them
        conf += [
            f"NodeName=lat-{i} CPUs=1 RealMemory=400 State=CLOUD Features=lat NodeAddr=127.0.0.1 "
            f"Port={port_base + i}"
            for i in range(members)
        ]
    prolog.install(directory / "slurm")
    sandbox = up(directory / "slurm", nodes=0, slurm=release, max_dynamic=members + 10, extra_conf=conf)
    stamp_resumes(sandbox)
    short_power_saving(sandbox)
    kube = KubeApiEmulator()
    await kube.start()
    kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    for i in range(HOSTS):
        kube.create("", "v1", "nodes", ready_node(f"host-{i}", {"pool": "bench"}))
    seen = Seen()
    kube.api.store.listeners.append(seen)
    config = SERVICE_CONFIG.replace(
        nodeset=NodeSetOptions(power_port_base=port_base), lease_namespace=NAMESPACE, listen_port=0
    )
    slurm = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    reader = SlurmClient(sandbox.rest_url, TokenFile(sandbox.token_file))
    await reader.start()
    client = await KubeClient.from_config(
        str(kube.write_kubeconfig(directory / "kubeconfig")), qps=500, burst=1000
    )
    service = SyncerService(slurm, client, config)
    reference = machine_reference_s()
    results: dict[str, Any] = {
        "slurm": sandbox.slurm_version, "uptime_before": uptime(), "machine_reference_s": reference,
    }  # fmt: skip
    try:
        # on 24.11 the sandbox starts a slurm.conf member's slurmd without -Z (Sandbox.named_in_conf)
        async with SlurmdStandIn(kube, sandbox, boot=True, port_base=port_base, nodesets=("lat",)) as standin:
            await service.start()
            await service.wait_ready(120)
            trace = PowerTrace(service)  # the syncer's own way, part by part
            kube.create(GROUP, VERSION, "nodesets", nodeset("lat", members), namespace=NAMESPACE)
            await wait(lambda: _declared(reader, members), f"{members} members declared", 120)
            url = f"http://127.0.0.1:{service.http_port}"
            prolog.point(sandbox.directory, url, wait_s=120)
            progress(f"{samples} power-ups with the prolog asking the syncer")
            if compare_probes:
                cache = service.slurm_cache
                quick = cache.probe_interval_s

                def probes(index: int) -> str:
                    """Batches take turns: probes every poll (the code before) and every probe interval."""
                    cache.probe_interval_s = quick if index % 2 else cache.poll_interval_s
                    return f"every {cache.probe_interval_s:g} s"

                with_prolog = await power_ups(sandbox, reader, seen, 0, samples, batch, probes, trace)
                results["by_probe_interval"] = {
                    setting: parts([s for s in with_prolog if s["probes"] == setting])
                    for setting in sorted({s["probes"] for s in with_prolog})
                }
                stats = cache.stats
                results["probe_stats"] = {
                    "probes": stats.probes, "not_modified": stats.not_modified,
                    "full_fetches": stats.full_fetches, "changed_as_500": stats.changed_as_500,
                    "changed_as_200": stats.changed_as_200,
                }  # fmt: skip
            else:
                with_prolog = await power_ups(sandbox, reader, seen, 0, samples, batch, trace=trace)
            prolog.point(sandbox.directory, "")
            progress(f"{without} power-ups with the prolog asking nobody (Slurm's own way)")
            without_prolog = await power_ups(sandbox, reader, seen, samples, without, batch, trace=trace)
            results["with_prolog"] = parts(with_prolog)
            results["syncer_parts"] = traced_parts(with_prolog + without_prolog, summary)
            results["pass_seconds"] = pass_seconds(trace.passes(), summary)
            results["passes"] = trace.passes()
            results["without_prolog"] = parts(without_prolog)
            results["samples"] = with_prolog + without_prolog
            results["prolog_answers"] = dict(service.job_readiness.stats.answers)
            if plain:
                progress(f"{plain} ordinary jobs with the prolog asking the syncer, then without a prolog")
                prolog.point(sandbox.directory, url, wait_s=120)
                results["plain_with_prolog"] = await plain_jobs(sandbox, plain)
                await asyncio.to_thread(set_prolog, sandbox, False)
                results["plain_without_prolog"] = await plain_jobs(sandbox, plain)
            results["slurmd_failures"] = standin.failures[:5]
    finally:
        results["uptime_after"] = uptime()
        await service.stop()
        await reader.close()
        await kube.stop()
        sandbox.down()
    return results


async def _declared(reader: SlurmClient, count: int) -> bool:
    listing = await reader.list_all_nodes()
    members = [n for n in listing.nodes if n.name.startswith("lat-")]
    return len(members) == count and all("POWERED_DOWN" in n.state for n in members)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slurm", choices=("26.05", "24.11"), default="26.05")
    parser.add_argument("--samples", type=int, default=20, help="power-ups with the prolog")
    parser.add_argument("--without", type=int, default=10, help="power-ups with the prolog asking nobody")
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--plain", type=int, default=20, help="ordinary jobs with and without the prolog")
    parser.add_argument(
        "--compare-probes",
        action="store_true",
        help="batches with the prolog take turns: the cache probes every poll (before), every probe interval",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-prolog-") as tmp:
        results = asyncio.run(
            run(
                args.slurm, args.samples, args.without, args.batch, args.plain, Path(tmp), args.compare_probes
            ),
        )
    return report(results, args.out)


if __name__ == "__main__":
    sys.exit(main())
