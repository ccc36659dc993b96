"""The demo's power-saving scene (issue 39, docs/nodeset.md Power saving): a job on an empty power-managed
NodeSet (floor 0) makes Slurm power a member up, the syncer creates its pod, its slurmd registers, the job
runs as slurm-syncer's PrologSlurmctld (demo.py installs it) ends, not at slurmctld's 30 s check, and once
the member has been idle for SuspendTime Slurm powers it down and the pod goes.

The demo's sandbox powers nodes down after 600 s; the scene shortens that with `scontrol reconfigure` and
excludes every node the earlier scenes use (SuspendExcNodes), so only the new NodeSet's member is powered
down. Slurm 26.05+ declares members over REST; on 24.11 demo.py names the member in slurm.conf
(`member_conf`)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from syncer.slurm.versions import choose
from syncer.testing import prolog
from syncer.testing.demo_story import DemoError, Stage, detail, ready_node, say, wait
from syncer.testing.sandbox.releases import Release

NAMESPACE, GROUP, VERSION = "slurm", "slurm-syncer.dev", "v1alpha1"
NODESET = "burst"
MEMBER = f"{NODESET}-0"
HOST = "burst-node-0"  # the Kubernetes Node its pod lands on
SUSPEND_TIME_S = 5  # idle seconds before Slurm powers a node down (the demo's: 600)
STARTED_BY = {
    prolog.BY_PROLOG: "slurmctld started it as slurm-syncer's PrologSlurmctld ended, the member ready",
    prolog.BY_PERIODIC_CHECK: "slurmctld started it at its 30 s periodic check (the prolog ended early: "
    "see the syncer's log)",
}
SUSPEND_TIMEOUT_S = 5  # POWERING_DOWN lasts this long before POWERED_DOWN (Slurm's default: 30)
SPEC: dict[str, Any] = {
    "slurm": {"features": [NODESET]},
    "power": {"minReplicas": 0, "maxReplicas": 1, "node": {"cpus": 1, "realMemory": 400}},
    "template": {
        "spec": {
            "nodeSelector": {"pool": NODESET},
            # a real pod's entrypoint: slurmd -D -Z -b -N "$SLURM_NODE_NAME" --conf "Feature=$SLURM_FEATURES"
            "containers": [{"name": "slurmd", "image": "slurmd:26.05"}],
        }
    },
}


def short_power_saving(w: Stage) -> str:
    """Power saving after SUSPEND_TIME_S, every node there is now excluded; what was set."""
    # every node there but the member (slurm.conf's on 24.11)
    present = sorted(set(w.sandbox.run("sinfo", "-h", "-N", "-o", "%N").stdout.split()) - {MEMBER})
    settings = {
        "SuspendTime": str(SUSPEND_TIME_S),
        "SuspendTimeout": str(SUSPEND_TIMEOUT_S),
        # the power-save thread looks every second, not every 10 s: the idle member goes sooner
        "SlurmctldParameters": "power_save_interval=1",
        "SuspendExcNodes": ",".join(present),
    }
    conf = w.sandbox.slurm_conf.read_text()
    for key, value in settings.items():
        line = f"{key}={value}"
        conf, found = re.subn(rf"^{key}=.*$", line, conf, flags=re.MULTILINE)
        if not found:
            conf += line + "\n"
    w.sandbox.slurm_conf.write_text(conf)
    return " ".join(f"{k}={v}" for k, v in settings.items() if k != "SuspendExcNodes") + (
        f" SuspendExcNodes=<the {len(present)} nodes there>"
    )


def _config_has(w: Stage, key: str, value: str) -> bool:
    shown = w.sandbox.run("scontrol", "show", "config").stdout
    return any(line.split("=", 1)[0].strip() == key and line.split("=", 1)[1].strip().startswith(value)
               for line in shown.splitlines() if "=" in line)  # fmt: skip


def _states(w: Stage) -> set[str]:
    return w.sandbox.node_state(MEMBER)


def _job_state(w: Stage, job: str) -> str:
    return w.sandbox.run("scontrol", "-o", "show", "job", job).stdout.partition("JobState=")[2].split(" ")[0]


def _configured_by(w: Stage, job: str) -> str:
    """Which slurmctld function let `job` leave CONFIGURING (prolog.BY_*); "" until its log says so."""
    found = prolog.configured(prolog.slurmctld_log(w.sandbox.directory), job)
    return "" if found is None else found[1]


def _pod(w: Stage) -> dict[str, Any] | None:
    return w.kube.pod(NAMESPACE, MEMBER)


def member_conf(release: Release, port: int) -> tuple[str, ...]:
    """The member's slurm.conf line where this release's REST cannot declare it (24.11: docs/nodeset.md,
    members named in slurm.conf); none where the syncer declares it over REST."""
    version = choose(set(release.api_versions))
    if version is not None and version.node_create:
        return ()
    shape = SPEC["power"]["node"]
    return (
        f"NodeName={MEMBER} CPUs={shape['cpus']} RealMemory={shape['realMemory']} State=CLOUD "
        f"Features={NODESET} NodeAddr=127.0.0.1 Port={port}",
    )


async def power(w: Stage, step: int) -> None:
    """Step `step` to `step + 1`."""
    named = not w.service.slurm.node_create  # demo.py named the member in slurm.conf (member_conf)
    say(f"{step}. NodeSet {NODESET} with power saving, no pod until Slurm asks for one (floor 0, ceiling 1)")
    if named:
        detail(f"Slurm {w.sandbox.release.name}'s REST cannot declare members: {MEMBER} is named in "
               "slurm.conf (docs/nodeset.md); 26.05+ needs no such line")  # fmt: skip
    shown = short_power_saving(w)
    await asyncio.to_thread(w.sandbox.scontrol, "reconfigure")
    await wait(lambda: _config_has(w, "SuspendTime", f"{SUSPEND_TIME_S} sec"), "the short SuspendTime", 30)
    detail(f"slurm.conf: {shown} (the earlier scenes' nodes are never powered down); scontrol reconfigure")
    w.kube.create("", "v1", "nodes", ready_node(HOST, {"pool": NODESET}))
    w.tap.clear()
    w.kube.create(
        GROUP, VERSION, "nodesets", {"metadata": {"name": NODESET}, "spec": SPEC}, namespace=NAMESPACE
    )
    where = "in slurm.conf" if named else "declared to Slurm"
    await wait(lambda: "POWERED_DOWN" in _states(w), f"{MEMBER} {where}, powered down", 30)
    detail(f"{where}: {MEMBER} {'+'.join(sorted(_states(w)))}; no pod")

    say(f"{step + 1}. a job needs feature {NODESET}: Slurm powers {MEMBER} up and the syncer creates its pod")
    submitted = time.monotonic()
    out = w.sandbox.run("sbatch", "--parsable", "--no-requeue", "--mem=100", f"--constraint={NODESET}",
                        "--wrap", "sleep 2")  # fmt: skip
    job = out.stdout.strip().split(";")[0]
    if not job:
        raise DemoError(f"the job for {NODESET} was refused: {out.stderr.strip()}")
    created = await wait(lambda: _pod(w) is not None, f"the pod of {MEMBER}", 60)
    w.told(MEMBER, kinds=("create",))
    detail(f"job {job}: pod {MEMBER} created {created:.1f} s after the submission")
    await wait(lambda: "POWERING_UP" not in _states(w) and "POWERED_DOWN" not in _states(w),
               f"the slurmd of {MEMBER} to register", 60)  # fmt: skip
    registered = time.monotonic()
    detail(f"its slurmd registered {registered - submitted:.1f} s after the submission")
    await wait(lambda: _job_state(w, job) in ("RUNNING", "COMPLETED"), f"job {job} to run", 60)
    runs = time.monotonic()
    await wait(lambda: _configured_by(w, job) != "", f"slurmctld to log job {job}'s start", 10)
    how = _configured_by(w, job)
    detail(f"job {job} runs {runs - submitted:.1f} s after the submission, {runs - registered:.1f} s after "
           f"its slurmd registered: {STARTED_BY.get(how, how)}")  # fmt: skip
    await wait(lambda: _job_state(w, job) == "COMPLETED", f"job {job} to finish", 60)
    detail(f"job {job} COMPLETED")
    ended = time.monotonic()
    await wait(lambda: _pod(w) is None and "POWERED_DOWN" in _states(w),
               f"Slurm to power {MEMBER} down and its pod to go", 90)  # fmt: skip
    w.told(MEMBER, kinds=("power-down",))
    detail(f"idle {SUSPEND_TIME_S} s, Slurm powered {MEMBER} down and its pod is gone, "
           f"{time.monotonic() - ended:.1f} s after the job: {'+'.join(sorted(_states(w)))}")  # fmt: skip
