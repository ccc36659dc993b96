"""`check`'s scheduler items (issue 44, docs/scheduler.md): whether the one-pool scheduler is on, for which
name and namespaces, whether this Slurm can stand a job for a pod (external jobs, or the placeholder on
24.11), and the pods that wait with why (their PodScheduled condition). `(ok, what, fix, warn)` lines out,
as check_power's (check_cmd makes them items)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeError
from syncer.slurm.client import SlurmClient

Line = tuple[bool, str, str, bool]  # ok, what, fix, warn
LISTED = 5  # pending pods named one by one; the counts say the rest


def switched(name: str, namespaces: Iterable[str]) -> Line:
    served = ", ".join(namespaces) or "every namespace"
    if not name:
        return True, "scheduler: off (--scheduler-name not set)", "", False
    return True, f"scheduler: on for pods with schedulerName {name} in {served}", "", False


def slurm_side(slurm: SlurmClient, placeholder: bool) -> Line:
    release = f"Slurm {slurm.release}" if slurm.release else "this Slurm"
    version = slurm.version.name if slurm.version else "?"
    if slurm.external_jobs:
        return True, f"scheduler: {release} (REST {version}) takes external jobs for pods", "", False
    if placeholder:
        return (
            True,
            f"scheduler: {release} (REST {version}) has no external jobs: a placeholder batch job stands for "
            "each pod (--scheduler-placeholder)",
            "Slurm 25.05+ makes external jobs, which need no slurmd script",
            True,
        )
    return (
        False,
        f"scheduler: {release} (REST {version}) has no external jobs: every pod is refused",
        "upgrade Slurm to 25.05+ (REST v0.0.43+), or set --scheduler-placeholder",
        False,
    )


def pending(pods: Iterable[Mapping[str, Any]]) -> Line:
    """The unbound, undeleted pods and why they wait (their PodScheduled reason and message)."""
    waiting = []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if spec.get("nodeName") or meta.get("deletionTimestamp"):
            continue
        cond: Mapping[str, Any] = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
            {},
        )
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        waiting.append((key, cond.get("reason") or "NoCondition", cond.get("message") or "not looked at yet"))
    if not waiting:
        return True, "scheduler: no pod waits", "", False
    counts = Counter(reason for _, reason, _ in waiting)
    summary = ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
    named = "; ".join(f"{key}: {message}" for key, _, message in sorted(waiting)[:LISTED])
    more = f" and {len(waiting) - LISTED} more" if len(waiting) > LISTED else ""
    return True, f"scheduler: {len(waiting)} pod(s) wait ({summary}): {named}{more}", "", True


async def scheduler_pods(kube: KubeClient, name: str, namespaces: Iterable[str]) -> list[dict[str, Any]]:
    """The pods with that schedulerName in the served namespaces (all when none is listed)."""
    found: list[dict[str, Any]] = []
    params = {"fieldSelector": f"spec.schedulerName={name}"}
    for namespace in tuple(namespaces) or ("",):
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        found += (await kube.get(path, params)).get("items") or []
    return found


async def lines(
    slurm: SlurmClient, kube: KubeClient, name: str, namespaces: tuple[str, ...], placeholder: bool
) -> list[Line]:
    out = [switched(name, namespaces)]
    if not name:
        return out
    if slurm.version is not None:
        out.append(slurm_side(slurm, placeholder))
    try:
        out.append(pending(await scheduler_pods(kube, name, namespaces)))
    except KubeError as exc:
        out.append(
            (False, f"scheduler: its pods cannot be listed: {exc.message}", "see the rights above", False)
        )
    return out
