"""The demo's partition scene (issue 38, docs/partitions.md): a SlurmPartition over the Nodes with a label,
a job in it, an emergency DRAIN from Kubernetes (new jobs refused by Slurm, the running one finishes), and a
`scontrol reconfigure` that changes nothing a user sees (the partition and its job stay: the demo's sandbox
has `ReconfigFlags=KeepPartInfo`; the node's feature written over REST, which a reconfigure erases, is
written back by the syncer). Slurm 26.05+ writes partitions over REST; before, the scene says so and skips.

The Kubernetes writes go through the emulator's own client (the demo runs no kubectl); the kubectl command
that does the same against a real cluster is printed beside each."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from syncer.controllers.attributes.features import DEFAULT_PREFIX, FeatureLabel
from syncer.testing.demo_story import DemoError, Stage, detail, say, wait
from syncer.testing.sandbox.config import REAL_NODE

GROUP, VERSION, PLURAL = "slurm-syncer.dev", "v1alpha1", "slurmpartitions"
PARTITION = "interactive"
LABEL = "tier"  # selects the partition's Nodes, and is a Slurm feature too (the demo's --feature-label)
FEATURE_LABELS = (FeatureLabel(LABEL, LABEL),)
FEATURE = f"{DEFAULT_PREFIX}{LABEL}:{PARTITION}"
SELECTOR = {"selector": {"matchLabels": {LABEL: PARTITION}}}
SPEC: dict[str, Any] = {"nodes": SELECTOR, "state": "UP", "maxTime": 30}


def _sbatch(w: Stage, *args: str) -> tuple[str, str]:
    """(job id or "", Slurm's error): a job in the partition on the real node."""
    # --mem: without it a job takes the node's whole memory and the next waits for it
    out = w.sandbox.run(
        "sbatch", "--parsable", "--no-requeue", "--mem=100", "-p", PARTITION, "-w", REAL_NODE, *args
    )  # fmt: skip
    return out.stdout.strip().split(";")[0], out.stderr.strip()


def _patch_state(w: Stage, state: str) -> None:
    w.kube.patch(GROUP, VERSION, PLURAL, PARTITION, {"spec": {"state": state}})


async def _has(w: Stage, state: str) -> bool:
    found = [p for p in await w.reader.partition_states() if p.name == PARTITION]
    return bool(found) and found[0].settings.state == state and set(found[0].nodes) == {REAL_NODE}


async def _feature(w: Stage) -> bool:
    return FEATURE in (await w.reader.get_node(REAL_NODE)).features


def _until_told(w: Stage, name: str) -> tuple[str, Path]:
    """(a `--wrap` that ends when told, the file that tells it): the job's end comes after what the demo
    shows while it runs, however slow the machine (a timed job could end first). In the sandbox's work
    directory, the jobs' working directory."""
    done = w.sandbox.directory / "work" / f"{name}.done"
    done.unlink(missing_ok=True)
    return f"while [ ! -e {name}.done ]; do sleep 0.2; done", done


def _job_state(w: Stage, job: str) -> str:
    return w.sandbox.run("scontrol", "-o", "show", "job", job).stdout.partition("JobState=")[2].split(" ")[0]


async def partitions(w: Stage, step: int, host: str) -> None:
    """Steps `step` to `step + 2`; `host`: the Kubernetes Node bound to the real slurmd."""
    if not w.service.slurm.partition_writes:
        say(
            f"{step}. partitions declared in Kubernetes need Slurm 26.05+ (REST v0.0.45 writes them): "
            f"skipped on Slurm {w.sandbox.release.name}"
        )
        return
    say(f"{step}. label Node {host} {LABEL}={PARTITION} and declare SlurmPartition {PARTITION}")
    manifest = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SlurmPartition", "metadata": {"name": PARTITION},
                "spec": SPEC}  # fmt: skip
    detail(f"kubectl label node {host} {LABEL}={PARTITION}; kubectl apply -f - <<< '{json.dumps(manifest)}'")
    detail("(here and below through the emulator's client: the demo runs no kubectl)")
    w.tap.clear()
    w.kube.patch("", "v1", "nodes", host, {"metadata": {"labels": {LABEL: PARTITION}}})
    w.kube.create(GROUP, VERSION, PLURAL, {"metadata": {"name": PARTITION}, "spec": SPEC})
    took = await wait(lambda: _has(w, "UP"), f"partition {PARTITION} in Slurm", 30)
    w.told(PARTITION, kinds=("partition",))
    sinfo = w.sandbox.run("sinfo", "-h", "-p", PARTITION, "-o", "%P %a %l %N").stdout.strip()
    detail(f"in Slurm {took * 1000:.0f} ms later; sinfo: {sinfo}")
    wrap, end_first = _until_told(w, "demo-first")
    first, err = _sbatch(w, "--time=5", "--wrap", wrap)
    if not first:
        raise DemoError(f"a job in partition {PARTITION} was refused: {err}")
    await wait(lambda: _job_state(w, first) == "RUNNING", f"job {first} to run in {PARTITION}")
    detail(f"job {first} runs in it")

    say(f"{step + 1}. emergency: drain partition {PARTITION} from Kubernetes")
    detail(f'kubectl patch slurmpartition {PARTITION} --type=merge -p \'{{"spec":{{"state":"DRAIN"}}}}\'')
    w.tap.clear()
    _patch_state(w, "DRAIN")
    took = await wait(lambda: _has(w, "DRAIN"), f"partition {PARTITION} DRAIN in Slurm", 30)
    w.told(PARTITION, kinds=("partition",))
    refused, err = _sbatch(w, "--time=1", "--wrap", "true")
    if refused:
        raise DemoError(f"a drained partition took job {refused}")
    if _job_state(w, first) != "RUNNING":
        raise DemoError(f"job {first} ended while partition {PARTITION} drained")
    detail(f"DRAIN in Slurm {took * 1000:.0f} ms later; a new job is refused by Slurm: {err}")
    end_first.touch()  # its work done: the running job ends as it would have
    await wait(lambda: _job_state(w, first) == "COMPLETED", f"job {first} to finish", 60)
    detail(f"the running job {first} finished: COMPLETED")

    say(f"{step + 2}. {PARTITION} UP again with a job in it; an admin runs scontrol reconfigure")
    _patch_state(w, "UP")
    await wait(lambda: _has(w, "UP"), f"partition {PARTITION} UP again", 30)
    await wait(lambda: _feature(w), f"feature {FEATURE} on {REAL_NODE}", 30)
    wrap, end_job = _until_told(w, "demo-kept")
    job, err = _sbatch(w, f"--constraint={FEATURE}", "--time=5", "--wrap", wrap)
    if not job:
        raise DemoError(f"a job needing {FEATURE} was refused: {err}")
    await wait(lambda: _job_state(w, job) == "RUNNING", f"job {job} to run", 60)
    detail(f"job {job} runs in {PARTITION} on the feature {FEATURE} (a Node label written over REST)")
    cache = w.service.slurm_cache
    seen = cache.stats.reloads
    w.tap.clear()
    await asyncio.to_thread(w.sandbox.scontrol, "reconfigure")
    done = time.monotonic()
    await wait(lambda: cache.stats.reloads > seen, "the syncer to see slurmctld reload", 30)
    await wait(lambda: _feature(w), f"feature {FEATURE} back on {REAL_NODE}", 30)
    back = time.monotonic() - done
    w.told(REAL_NODE, kinds=("attributes",))
    if not await _has(w, "UP") or _job_state(w, job) != "RUNNING":
        raise DemoError(f"the reconfigure took partition {PARTITION} or job {job}")
    detail(f"partition {PARTITION} and job {job} untouched (KeepPartInfo); {FEATURE} written back "
           f"{back:.2f} s after the reconfigure erased it")  # fmt: skip
    after, err = _sbatch(w, f"--constraint={FEATURE}", "--time=1", "--wrap", "true")
    if not after:
        raise DemoError(f"after the reconfigure a job needing {FEATURE} was refused: {err}")
    await wait(lambda: _job_state(w, after) in ("RUNNING", "COMPLETED"), f"job {after} to run", 60)
    detail(f"and a new job needing it runs at once: job {after}")
    end_job.touch()
