"""The scheduler core's plain inputs: what the controller maps the edges' structs onto (docs/scheduler.md).

Frozen values, no I/O; quantities stay the strings the API server serves (`quantity.py` reads them exactly),
except on a Node, whose figures the controller passes already in canonical units (`quantity.canonical`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from syncer.model.jobs import BASE_STATES, ENDED_STATES
from syncer.model.keys import Keys

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
# Slurm's base job states (syncer/model/jobs.py): the ones after which a job holds nothing, and all there are
KNOWN_STATES: Final = BASE_STATES


@dataclass(frozen=True, kw_only=True)
class Container:
    name: str = ""
    requests: Mapping[str, str] = field(default_factory=dict)
    # a resource with a limit and no request requests its limit (the API server's defaulting)
    limits: Mapping[str, str] = field(default_factory=dict)
    sidecar: bool = False  # an init container with restartPolicy Always: runs beside the app containers


@dataclass(frozen=True, kw_only=True)
class Toleration:
    key: str = ""  # "" with Exists: every taint
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "": every effect


@dataclass(frozen=True, kw_only=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """One node selector requirement (a matchExpressions or matchFields entry)."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SelectorTerm:
    """One of the pod's required node affinity terms (the terms are ORed, their requirements ANDed)."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()  # Kubernetes allows only metadata.name here


@dataclass(frozen=True, kw_only=True)
class Owner:
    """A pod's controlling ownerReference."""

    kind: str
    name: str
    uid: str
    api_version: str = "batch/v1"


@dataclass(frozen=True, kw_only=True)
class Named:
    """A pod's identity: what an action names it by, and what a Pod starts with."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, kw_only=True)
class Scheduled:
    """The pod's PodScheduled condition as the API server has it."""

    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class PodRef(Named):
    """A pod as an action names it."""


@dataclass(frozen=True, kw_only=True)
class Pod(Named):
    """A pod with `schedulerName: slurm-syncer` (spec, the fields placement reads, and status)."""

    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    # spec.overhead (RuntimeClass): counted as Kubernetes counts it
    overhead: Mapping[str, str] = field(default_factory=dict)
    # spec.resources.requests (pod-level resources): not supported yet, refused
    pod_resources: Mapping[str, str] = field(default_factory=dict)
    # or the pod's requests as the edge already summed them (SchedulerPod.requests, kube-scheduler's units):
    # when set, the containers are not read; `resources_error` is the edge's "<field>: <what>" for a bad one
    requests: Mapping[str, int] | None = None
    resources_error: str = ""
    gated: bool = False  # spec.schedulingGates: not to be scheduled yet
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    owner: Owner | None = None
    phase: str = "Pending"
    node_name: str = ""  # spec.nodeName: bound
    deleting: bool = False  # metadata.deletionTimestamp set
    grace_period_s: int = 30  # spec.terminationGracePeriodSeconds
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[SelectorTerm, ...] = ()  # requiredDuringSchedulingIgnoredDuringExecution terms
    scheduled: Scheduled | None = None

    @property
    def ref(self) -> PodRef:
        return PodRef(namespace=self.namespace, name=self.name, uid=self.uid)

    @property
    def ended(self) -> bool:
        return pod_ended(self.deleting, self.phase)

    @property
    def holds(self) -> bool:
        return pod_holds(self.node_name, self.phase)

    @property
    def job_id(self) -> int | None:
        return bound_job_id(self.annotations, self.node_name)


# The logic of the values' properties, as functions (mutation testing reaches functions, not the methods of a
# decorated class).


def pod_ended(deleting: bool, phase: str) -> bool:
    """Over on the Kubernetes side: being deleted, or its containers are done."""
    return deleting or phase in TERMINAL_PHASES


def pod_holds(node_name: str, phase: str) -> bool:
    """Its containers may run on its Node: bound and not in a terminal phase (deleting or not)."""
    return bool(node_name) and phase not in TERMINAL_PHASES


def bound_job_id(annotations: Mapping[str, str], node_name: str) -> int | None:
    """The Slurm job the scheduler bound the pod for (the binding's annotation). None on a pod not bound: the
    annotation comes with the binding, so an unbound pod's is a copy's (`kubectl debug --copy-to` copies the
    annotations) or its author's, never ours."""
    text = annotations.get(Keys.SCHEDULER_JOB_ID, "")
    return int(text) if node_name and text.isascii() and text.isdecimal() else None


def job_ended(state: str, flags: frozenset[str]) -> bool:
    """Over in Slurm: its resources are free (or being cleaned up: COMPLETING)."""
    return state in ENDED_STATES or "COMPLETING" in flags


@dataclass(frozen=True, kw_only=True)
class Marker:
    """What a job's admin comment says: which syncer made it, for which gang, standing for which pods."""

    release: str
    key: str
    pods: tuple[tuple[str, str], ...]  # (name, uid), in the gang's namespace
    via: str = ""  # "allocate": asked for by an immediate allocation (allocate.py); "": submitted

    @property
    def uids(self) -> frozenset[str]:
        return frozenset(uid for _, uid in self.pods)


@dataclass(frozen=True, kw_only=True)
class Job:
    """A Slurm job that is ours: its marker names our release."""

    job_id: int
    state: str  # the base state: PENDING, RUNNING, SUSPENDED, COMPLETED, CANCELLED, TIMEOUT, ...
    marker: Marker
    flags: frozenset[str] = frozenset()  # CONFIGURING, COMPLETING, REQUEUED, ...
    reason: str = ""  # state_reason: Priority, Resources, ...
    nodes: tuple[str, ...] = ()  # the allocated Slurm nodes
    start_time: float = 0.0  # running: when it started
    end_time: float = 0.0  # running: when Slurm ends it (time limit, or preempt_time + GraceTime)
    preempt_time: float = 0.0  # set when Slurm starts preempting it

    @property
    def ended(self) -> bool:
        return job_ended(self.state, self.flags)

    @property
    def known(self) -> bool:
        return self.state in KNOWN_STATES


@dataclass(frozen=True, kw_only=True)
class Node:
    """A Kubernetes Node as placement sees it; amounts canonical (`quantity.canonical`)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    # the requests of the non-terminal pods already on it (request.canonical_requests, summed)
    requested: Mapping[str, int] = field(default_factory=dict)
    pods: int = 0  # how many such pods
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True, kw_only=True)
class World:
    """Everything the plan reads besides the gang."""

    bindings: Mapping[str, str]  # Slurm node -> its Kubernetes Node (the sync engine's binding table)
    nodes: Mapping[str, Node]  # Kubernetes Nodes by name
    fresh: bool  # both caches synced and current: else nothing is submitted, cancelled or deleted
    now: float  # epoch seconds
