"""The edges' structs -> the core's values: what the controller reads (syncer/kube's SchedulerPod, KubeJob,
KubeNode and PodUsage) as `plan` takes it. Pure; the Slurm side maps its job struct with `marker.read`."""

from __future__ import annotations

from collections.abc import Iterable

from syncer.controllers.scheduler.values import (
    TERMINAL_PHASES,
    BatchJob,
    Node,
    Owner,
    Pod,
    Requirement,
    Scheduled,
    SelectorTerm,
    Taint,
    Toleration,
)
from syncer.model.kube import KubeJob, KubeNode, NodeSelectorRequirement, PodUsage, SchedulerPod


def _requirements(found: Iterable[NodeSelectorRequirement]) -> tuple[Requirement, ...]:
    return tuple(Requirement(key=r.key, operator=r.operator, values=r.values) for r in found)


def pod(found: SchedulerPod) -> Pod:
    owner = found.controller
    scheduled = found.condition("PodScheduled")
    return Pod(
        namespace=found.namespace,
        name=found.name,
        uid=found.uid,
        requests=found.requests,
        resources_error=found.resources_error,
        gated=bool(found.scheduling_gates),
        annotations=found.annotations,
        labels=found.labels,
        owner=Owner(kind=owner.kind, name=owner.name, uid=owner.uid, api_version=owner.api_version)
        if owner
        else None,
        phase=found.phase or "Pending",
        node_name=found.node_name,
        deleting=found.terminating,
        grace_period_s=found.termination_grace_period_s,
        tolerations=tuple(
            Toleration(key=t.key, operator=t.operator, value=t.value, effect=t.effect)
            for t in found.tolerations
        ),
        node_selector=found.node_selector,
        affinity=tuple(
            SelectorTerm(
                match_expressions=_requirements(t.match_expressions),
                match_fields=_requirements(t.match_fields),
            )
            for t in found.affinity
        ),
        scheduled=Scheduled(status=scheduled.status, reason=scheduled.reason, message=scheduled.message)
        if scheduled
        else None,
    )


def batch_job(found: KubeJob) -> BatchJob:
    return BatchJob(
        namespace=found.namespace,
        name=found.name,
        uid=found.uid,
        parallelism=found.parallelism,
        completions=found.completions,
    )


def node(found: KubeNode, on_node: Iterable[PodUsage]) -> Node:
    """The Node with what the pods bound there take (kube-scheduler counts every pod until its phase is
    terminal, terminating ones too)."""
    used: dict[str, int] = {}
    count = 0
    for other in on_node:
        if other.phase in TERMINAL_PHASES:
            continue
        count += 1
        for name, amount in other.requests.items():
            used[name] = used.get(name, 0) + amount
    return Node(
        name=found.name,
        labels=found.labels,
        allocatable=found.allocatable,
        requested=used,
        pods=count,
        taints=tuple(Taint(key=t.key, value=t.value, effect=t.effect) for t in found.taints),
        unschedulable=found.unschedulable,
    )
