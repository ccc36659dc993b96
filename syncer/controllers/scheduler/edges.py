"""The edges' structs <-> the core's values: what the controller reads (syncer/kube's SchedulerPod, KubeNode
and PodUsage; syncer/slurm's SlurmJob) as `plan` takes it, and a `Submit`'s request as the Slurm client's
JobSubmission (a batch/v1 Job, KubeJob, the core reads as it is). Pure."""

from __future__ import annotations

from collections.abc import Iterable

from syncer.controllers.scheduler import marker
from syncer.controllers.scheduler.allocate import Room, gres_free, refused_try
from syncer.controllers.scheduler.placement import summed
from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.values import (
    TERMINAL_PHASES,
    Job,
    Node,
    Owner,
    Pod,
    Requirement,
    Scheduled,
    SelectorTerm,
    Taint,
    Toleration,
)
from syncer.model.jobs import BASE_STATES, JobSubmission, SlurmJob
from syncer.model.kube import KubeNode, NodeSelectorRequirement, PodUsage, SchedulerPod
from syncer.model.slurm import SlurmNode


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


def node(found: KubeNode, on_node: Iterable[PodUsage]) -> Node:
    """The Node with what the pods bound there take (kube-scheduler counts every pod until its phase is
    terminal, terminating ones too)."""
    used, count = summed(other.requests for other in on_node if other.phase not in TERMINAL_PHASES)
    return Node(
        name=found.name,
        labels=found.labels,
        allocatable=found.allocatable,
        requested=used,
        pods=count,
        taints=tuple(Taint(key=t.key, value=t.value, effect=t.effect) for t in found.taints),
        unschedulable=found.unschedulable,
    )


def job(found: SlurmJob, release: str) -> Job | None:
    """A job of this release (its marker), or None: not ours (another release's, an admin's comment), or the
    FAILED record of an immediate allocation Slurm refused (allocate.refused_try: never the pod's job)."""
    read = marker.read(found.marker, release)
    if read is None:
        return None
    base = found.state & BASE_STATES
    mapped = Job(
        job_id=found.job_id,
        state=min(base) if base else "+".join(sorted(found.state)) or "UNKNOWN",  # unknown: the plan stops
        marker=read,
        flags=found.state - BASE_STATES,
        reason=found.reason,
        nodes=found.nodes,
        start_time=float(found.start_time),
        end_time=float(found.end_time),
        preempt_time=float(found.preempt_time),
    )
    return None if refused_try(mapped) else mapped


def other_release(found: SlurmJob, release: str) -> str:
    """The release of another slurm-syncer whose live job this is ("" when it is not: ended, ours, or without
    a slurm-syncer marker). Two releases serving one scheduler name: a pod bound for it is that release's to
    judge, never gone from Slurm (plan's `foreign`)."""
    theirs = marker.release_of(found.marker)
    ended = found.ended or "COMPLETING" in found.state  # as the core's job_ended reads it
    return theirs if theirs != release and not ended else ""  # theirs "": no marker, nobody's


def room(node: SlurmNode) -> Room:
    """The node as allocate.could_start reads it: what is free on it now, as the node cache last read it."""
    return Room(
        name=node.name,
        state=node.state,
        partitions=node.partitions,
        features=node.active_features or node.features,
        free_cpus=node.cpus - node.alloc_cpus,
        free_memory_mb=node.real_memory_mb - node.alloc_memory_mb,
        free_gres=gres_free(node.gres, node.gres_used),
    )


def submission(request: JobRequest) -> JobSubmission:
    """One pod per node: N nodes, one task each with the pod's CPUs, its memory and GRES per node. A time
    limit of slurmtime.UNLIMITED goes as that number, which slurmctld reads as INFINITE (its data parser
    takes any number >= NO_VAL so; read in Slurm's source, not measured)."""
    settings = request.settings
    return JobSubmission(
        name=request.name,
        marker=request.comment,
        nodes=request.nodes,
        tasks_per_node=1,
        cpus_per_task=request.cpus_per_node,
        memory_per_node_mb=request.memory_mib_per_node,
        tres_per_node=request.tres_per_node,
        partition=settings.partition or "",
        account=settings.account or "",
        qos=settings.qos or "",
        reservation=settings.reservation or "",
        constraints=settings.constraint or "",
        time_limit_min=settings.time_limit_min,
        nice=settings.nice,
    )
