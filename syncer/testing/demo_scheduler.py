"""The demo's one-pool scene (issue 44, docs/scheduler.md): a pod with the scheduler's schedulerName waits
behind a Slurm job and runs on that job's node when the job ends; a Slurm job then waits behind the pod, and
deleting the pod lets it run. Both sides queue in Slurm, by Slurm's rules, on one node.

The node is a real slurmd of its own (a dynamic node of 2 CPUs with the feature `pool`, bound by label to the
Kubernetes Node `pool-host`), started by the scene, so that no earlier scene's job or reservation is in the
way; the pod asks for that feature. Slurm 25.05+ (external jobs, REST v0.0.43+); before, the scene says so
and skips (24.11 has only the opt-in placeholder batch job, docs/scheduler.md)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from syncer.controllers.scheduler.options import SchedulerOptions
from syncer.model.keys import Keys
from syncer.testing.demo_story import DemoError, Stage, detail, ready_node, say, wait

NAMESPACE = "apps"
SCHEDULER = "slurm-syncer"
OPTIONS = SchedulerOptions(name=SCHEDULER, namespaces=(NAMESPACE,))  # the demo's syncer runs it
SLURM_NODE = "pool-0"
HOST = "pool-host"
FEATURE = "pool"
POD = "notebook"
JOB_ID = "slurm-syncer.dev/job-id"  # the scheduler writes it at the binding


def _pod() -> dict[str, Any]:
    return {
        "metadata": {"name": POD, "annotations": {"slurm-syncer.dev/constraint": FEATURE}},
        "spec": {
            "schedulerName": SCHEDULER,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "jupyter",
                    "image": "jupyter",
                    "resources": {"requests": {"cpu": "1", "memory": "100Mi"}},
                }
            ],
        },
    }


def _host() -> dict[str, Any]:
    node = ready_node(HOST, {Keys.NODE_NAME_LABEL: SLURM_NODE})
    node["status"]["allocatable"] = {"cpu": "2", "memory": "2Gi", "pods": "110"}
    return node


def _state(w: Stage, job: str) -> tuple[str, str]:
    """(state, reason) of a Slurm job as squeue shows it; ("", "") once it has left the queue."""
    out = w.sandbox.run("squeue", "-h", "-j", job, "-o", "%T %r").stdout.split()
    return (out[0], " ".join(out[1:])) if out else ("", "")


def _scheduled(pod: dict[str, Any] | None) -> dict[str, Any]:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), {})


def _sbatch(w: Stage, *args: str) -> str:
    out = w.sandbox.run("sbatch", "--parsable", "--no-requeue", *args, "--wrap", "sleep 600", check=True)
    return out.stdout.strip().split(";")[0]


async def one_pool(w: Stage, step: int) -> None:
    """Steps `step` to `step + 2`."""
    if not w.service.slurm.external_jobs:
        say(
            f"{step}. one pool: a pod's Slurm job is an external job (Slurm 25.05+); on Slurm "
            f"{w.sandbox.release.name} only with --scheduler-placeholder (docs/scheduler.md): skipped"
        )
        return
    await asyncio.to_thread(w.sandbox.start_slurmd, SLURM_NODE, cpus=2, memory_mb=1000, features=[FEATURE])
    w.kube.create("", "v1", "nodes", _host())
    if w.kube.get("", "v1", "namespaces", NAMESPACE) is None:
        w.kube.create("", "v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    holder = _sbatch(w, "-w", SLURM_NODE, "-c", "2", "--mem=100")
    await wait(lambda: _state(w, holder)[0] == "RUNNING", f"Slurm job {holder} to run on {SLURM_NODE}")
    say(
        f"{step}. one pool: Slurm job {holder} holds both CPUs of {SLURM_NODE} (Kubernetes Node {HOST}); "
        f"pod {NAMESPACE}/{POD} (schedulerName {SCHEDULER}, 1 CPU, feature {FEATURE}) is created"
    )
    w.kube.create("", "v1", "pods", _pod(), namespace=NAMESPACE)

    def pending() -> bool:  # with Slurm's reason: a job submitted is read again 1, 2, 4 s after
        scheduled = _scheduled(w.kube.pod(NAMESPACE, POD))
        return scheduled.get("reason") == "SlurmJobPending" and "is pending (" in scheduled.get("message", "")

    await wait(pending, f"pod {POD} to show its Slurm job pending with Slurm's reason")
    detail(f"PodScheduled=False SlurmJobPending: {_scheduled(w.kube.pod(NAMESPACE, POD)).get('message')}")

    say(
        f"{step + 1}. job {holder} ends (scancel): Slurm runs the pod's job on {SLURM_NODE}, the pod is bound"
    )
    ended = time.monotonic()
    w.sandbox.run("scancel", holder, check=True)

    def bound() -> bool:
        pod = w.kube.pod(NAMESPACE, POD) or {}
        return (
            pod.get("spec", {}).get("nodeName") == HOST
            and (pod.get("status") or {}).get("phase") == "Running"
        )

    await wait(bound, f"pod {POD} bound to {HOST} and running", 60)
    job = (w.kube.pod(NAMESPACE, POD) or {})["metadata"].get("annotations", {}).get(JOB_ID, "?")
    detail(
        f"pod {POD} bound to {HOST} and Running {time.monotonic() - ended:.1f} s after the scancel, "
        f"under Slurm job {job} ({_state(w, job)[0]} on {SLURM_NODE})"
    )

    say(f"{step + 2}. a Slurm job needing both CPUs of {SLURM_NODE} waits behind the pod; the pod is deleted")
    waiting = _sbatch(w, "--constraint", FEATURE, "-c", "2", "--mem=100")
    await wait(lambda: _state(w, waiting)[1] == "Resources", f"Slurm job {waiting} to wait for resources", 60)
    detail(f"Slurm job {waiting}: PENDING (Resources): the pod's job {job} holds a CPU")
    deleted = time.monotonic()
    w.kube.api.delete(w.kube.api.resource("", "v1", "pods"), NAMESPACE, POD)
    await wait(lambda: _state(w, waiting)[0] == "RUNNING", f"Slurm job {waiting} to run", 60)
    gone = w.kube.pod(NAMESPACE, POD) is None
    if not gone or _state(w, job)[0] not in ("", "CANCELLED", "COMPLETED"):
        raise DemoError(f"job {waiting} runs while pod {POD} or its job {job} is still there")
    detail(
        f"pod gone, its job {job} ended, Slurm job {waiting} RUNNING on {SLURM_NODE} "
        f"{time.monotonic() - deleted:.1f} s after the delete"
    )
    w.sandbox.run("scancel", waiting)
