"""Raw Kubernetes JSON into what the one-pool scheduler reads (syncer.model.kube): `SchedulerPod` (a pod its
scheduler name owns), `PodUsage` (a pod holding room on a Node), `KubeJob`, and a Node's allocatable and
taints. Only these fields are materialised; the rest of each object is skipped unparsed.

A pod's effective requests and limits are computed as kube-scheduler does (k8s.io/component-helpers
resource.PodRequests): the containers summed; each init container's need against the peak, where a sidecar
(an init container with `restartPolicy: Always`) runs on beside the others and so adds to the sum; the pod's
`overhead` added; pod-level `spec.resources` in place of the containers' for the resources it names.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import msgspec

from syncer.kube.decode_base import (
    RawCondition,
    RawObject,
    RawOwner,
    conditions,
    epoch,
    identity,
    shared,
    shared_keys,
)
from syncer.model.kube import (
    KubeJob,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodUsage,
    Resources,
    SchedulerPod,
    Taint,
    Toleration,
)
from syncer.model.quantity import QuantityError, scheduler_units

# the pod conditions the scheduler reads: its own (PodScheduled), whether the pod serves (Ready), and why it
# is being disrupted (DisruptionTarget: preempted, evicted, its Node tainted); the kubelet's others dropped
KEPT_CONDITIONS = frozenset({"PodScheduled", "Ready", "DisruptionTarget"})
Quantities = dict[str, Any]  # resource name -> quantity as served (a string; a number is read too)


class RawResources(msgspec.Struct):
    requests: Quantities | None = None
    limits: Quantities | None = None


class _RawContainer(msgspec.Struct):
    resources: RawResources | None = None
    restartPolicy: str = ""  # "Always" makes an init container a sidecar


class _RawRequirement(msgspec.Struct):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class _RawTerm(msgspec.Struct):
    matchExpressions: list[_RawRequirement] | None = None
    matchFields: list[_RawRequirement] | None = None


class _RawNodeSelector(msgspec.Struct):
    nodeSelectorTerms: list[_RawTerm] | None = None


class _RawNodeAffinity(msgspec.Struct):
    requiredDuringSchedulingIgnoredDuringExecution: _RawNodeSelector | None = None


class _RawAffinity(msgspec.Struct):
    nodeAffinity: _RawNodeAffinity | None = None


class RawTaint(msgspec.Struct):
    key: str = ""
    value: str = ""
    effect: str = ""


class _RawToleration(RawTaint):
    """The taint it tolerates (an empty key or effect: any) and how it matches."""

    operator: str = ""
    tolerationSeconds: int | None = None


class _RawGate(msgspec.Struct):
    name: str = ""


class _RawUsageSpec(msgspec.Struct):
    nodeName: str = ""
    containers: list[_RawContainer] | None = None
    initContainers: list[_RawContainer] | None = None
    overhead: Quantities | None = None
    resources: RawResources | None = None  # pod-level resources


class _RawPodSpec(_RawUsageSpec):
    schedulerName: str = ""
    terminationGracePeriodSeconds: int | None = None
    nodeSelector: dict[str, str] | None = None
    affinity: _RawAffinity | None = None
    tolerations: list[_RawToleration] | None = None
    schedulingGates: list[_RawGate] | None = None
    priority: int | None = None


class _RawUsageStatus(msgspec.Struct):
    phase: str = ""


class RawPodUsage(RawObject):
    spec: _RawUsageSpec = msgspec.field(default_factory=_RawUsageSpec)
    status: _RawUsageStatus = msgspec.field(default_factory=_RawUsageStatus)


class _RawPodStatus(_RawUsageStatus):
    conditions: list[RawCondition] | None = None


class RawSchedulerPod(RawPodUsage):
    """A pod its scheduler name owns: what any pod's usage reads, and what scheduling it reads."""

    spec: _RawPodSpec = msgspec.field(default_factory=_RawPodSpec)
    status: _RawPodStatus = msgspec.field(default_factory=_RawPodStatus)


class _RawJobSpec(msgspec.Struct):
    parallelism: int | None = None
    completions: int | None = None
    completionMode: str = "NonIndexed"
    suspend: bool = False
    backoffLimit: int = 6


class _RawJobStatus(msgspec.Struct):
    active: int = 0
    ready: int | None = None
    succeeded: int = 0
    failed: int = 0
    conditions: list[RawCondition] | None = None


class RawJob(RawObject):
    spec: _RawJobSpec = msgspec.field(default_factory=_RawJobSpec)
    status: _RawJobStatus = msgspec.field(default_factory=_RawJobStatus)


# -- sharing ---------------------------------------------------------------------------------------------
# The pods of one Deployment or Job repeat their labels, requests, tolerations, owner and conditions: one
# copy of each distinct value is held for all of them (benchmarks/scheduler_pods.py measured 3,062 bytes
# held per pod without this). The maps handed out are shared: read only, like the frozen structs.
_CANONICAL: dict[Any, Any] = {}
_CANONICAL_MAX = 65_536


def _one(value: Any, key: Any = None) -> Any:
    """The one held copy equal to `value` (found by `key`, else by the value itself)."""
    key = value if key is None else key
    found = _CANONICAL.get(key)
    if found is None:
        if len(_CANONICAL) >= _CANONICAL_MAX:
            _CANONICAL.clear()  # held values stay valid; sharing starts over
        _CANONICAL[key] = found = value
    return found


def pooled(raw: dict[str, Any] | None, *, keys_only: bool = False) -> dict[str, Any]:
    """A shared copy of a small map (labels, annotations, a node selector, resources)."""
    if not raw:
        return _EMPTY
    shared_map = shared_keys(raw) if keys_only else raw
    return _one(shared_map, ("map", tuple(sorted(shared_map.items()))))  # type: ignore[no-any-return]


_EMPTY: dict[str, Any] = {}


# -- resources ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8192)  # a cluster repeats few quantities ("1", "500m", "16Gi")
def _units(resource: str, text: str) -> int:
    return scheduler_units(resource, text)


def resources_of(raw: Quantities | None, where: str, errors: list[str]) -> Resources:
    """One resource list in scheduler units; a value that is not a quantity is left out and named."""
    found: Resources = {}
    for name, value in (raw or {}).items():
        try:
            found[sys.intern(name)] = _units(name, str(value) if not isinstance(value, str) else value)
        except QuantityError:
            errors.append(f"{where}[{name}]: {value!r} is not a quantity")
    return found


def _add(total: Resources, more: Resources) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _at_least(total: Resources, other: Resources) -> None:
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value


def effective(spec: _RawUsageSpec, field: str, errors: list[str]) -> Resources:
    """The pod's requests (field "requests") or limits ("limits") as kube-scheduler sums them."""
    total: Resources = {}
    for i, container in enumerate(spec.containers or ()):
        _add(
            total,
            resources_of(
                getattr(container.resources, field, None), f"spec.containers[{i}].resources.{field}", errors
            ),
        )
    sidecars: Resources = {}
    peak: Resources = {}
    for i, container in enumerate(spec.initContainers or ()):
        own = resources_of(
            getattr(container.resources, field, None), f"spec.initContainers[{i}].resources.{field}", errors
        )
        if container.restartPolicy == "Always":
            _add(total, own)
            _add(sidecars, own)
            need = dict(sidecars)
        else:
            need = dict(own)
            _add(need, sidecars)
        _at_least(peak, need)
    _at_least(total, peak)
    pod_level = resources_of(getattr(spec.resources, field, None), f"spec.resources.{field}", errors)
    total.update(pod_level)
    if field == "requests":
        _add(total, resources_of(spec.overhead, "spec.overhead", errors))
    return total


# -- conversions -------------------------------------------------------------------------------------
def _requirements(raw: list[_RawRequirement] | None) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(key=r.key, operator=r.operator, values=tuple(r.values or ()))
        for r in raw or ()
    )


def _affinity(raw: _RawAffinity | None) -> tuple[NodeSelectorTerm, ...]:
    required = (
        raw.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution if raw and raw.nodeAffinity else None
    )
    if required is None:
        return ()
    return tuple(
        NodeSelectorTerm(
            match_expressions=_requirements(t.matchExpressions), match_fields=_requirements(t.matchFields)
        )
        for t in required.nodeSelectorTerms or ()
    )


def _tolerations(raw: list[_RawToleration] | None) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=shared(t.key), operator=t.operator or "Equal", value=shared(t.value), effect=t.effect,
            toleration_seconds=t.tolerationSeconds,
        )
        for t in raw or ()
    )  # fmt: skip


def _owners(raw: list[RawOwner] | None) -> tuple[OwnerRef, ...]:
    return tuple(
        OwnerRef(
            api_version=shared(o.apiVersion),
            kind=shared(o.kind),
            name=o.name,
            uid=o.uid,
            controller=o.controller,
        )
        for o in raw or ()
    )


def scheduler_pod(raw: RawSchedulerPod) -> SchedulerPod:
    meta, spec = raw.metadata, raw.spec
    errors: list[str] = []
    requests, limits = effective(spec, "requests", errors), effective(spec, "limits", errors)
    grace = spec.terminationGracePeriodSeconds
    return SchedulerPod(
        **identity(meta),
        creation_timestamp=epoch(meta.creationTimestamp),
        scheduler_name=shared(spec.schedulerName),
        node_name=shared(spec.nodeName),
        phase=sys.intern(raw.status.phase),
        deletion_timestamp=epoch(meta.deletionTimestamp) if meta.deletionTimestamp else None,
        termination_grace_period_s=30 if grace is None else grace,
        labels=pooled(meta.labels, keys_only=True),
        annotations=shared_keys(meta.annotations),  # often one of a kind (a time, a hash): not pooled
        owners=_one(_owners(meta.ownerReferences)),
        requests=pooled(requests),
        limits=pooled(limits),
        resources_error="; ".join(dict.fromkeys(errors)),
        node_selector=pooled(spec.nodeSelector, keys_only=True),
        affinity=_one(_affinity(spec.affinity)),
        tolerations=_one(_tolerations(spec.tolerations)),
        scheduling_gates=tuple(g.name for g in spec.schedulingGates or ()),
        priority=spec.priority,
        conditions=conditions([c for c in raw.status.conditions or () if c.type in KEPT_CONDITIONS]),
    )


def pod_usage(raw: RawPodUsage) -> PodUsage:
    meta = raw.metadata
    return PodUsage(
        namespace=shared(meta.namespace),
        name=meta.name,
        uid=meta.uid,
        node_name=shared(raw.spec.nodeName),
        phase=sys.intern(raw.status.phase),
        terminating=meta.deletionTimestamp is not None,
        requests=pooled(effective(raw.spec, "requests", [])),
    )


def job(raw: RawJob) -> KubeJob:
    meta, spec, status = raw.metadata, raw.spec, raw.status
    return KubeJob(
        **identity(meta),
        labels=shared_keys(meta.labels),
        annotations=shared_keys(meta.annotations),
        parallelism=1 if spec.parallelism is None else spec.parallelism,
        completions=spec.completions,
        completion_mode=spec.completionMode,
        suspend=spec.suspend,
        backoff_limit=spec.backoffLimit,
        active=status.active,
        ready=status.ready or 0,
        succeeded=status.succeeded,
        failed=status.failed,
        terminating=meta.deletionTimestamp is not None,
        conditions=conditions(status.conditions),
    )


def taints(raw: list[RawTaint] | None) -> tuple[Taint, ...]:
    return tuple(Taint(key=shared(t.key), value=shared(t.value), effect=shared(t.effect)) for t in raw or ())
