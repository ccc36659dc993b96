"""Pod -> what its Slurm job asks of each node: CPUs, memory and GRES from the pod's requests, counted as
Kubernetes counts them (k8s.io/component-helpers PodRequests: the app containers and sidecars summed, the
largest init container step if larger, plus the RuntimeClass overhead).

- CPU: Slurm allocates whole CPUs, so the job asks for the request rounded up (4100m -> 5); asking for less
  would let Slurm give the rest of a CPU the pod uses to another job. Refusing such pods instead would turn
  away nearly every pod with an injected sidecar (100m).
- Memory: rounded up to whole MiB (Slurm's unit).
- Extended resources (a name with a domain outside kubernetes.io, e.g. nvidia.com/gpu) become GRES through
  the scheduler's table (`nvidia.com/gpu` -> `gpu`); a table entry of "" means Kubernetes alone counts it
  (checked on the Node, not asked of Slurm). One missing from the table, or a fraction of one, is refused:
  Slurm cannot allocate part of a GPU.
- Other Kubernetes resources (ephemeral-storage, hugepages-*) are checked on the Node only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from syncer.controllers.scheduler import quantity
from syncer.controllers.scheduler.settings import Refusal, Settings
from syncer.controllers.scheduler.values import Container, Pod, PodRef

CPU: Final = "cpu"
MEMORY: Final = "memory"
MIB: Final = 1024 * 1024
OVERHEAD: Final = "spec.overhead"
SUMMED: Final = "spec.containers[*].resources.requests"  # the edge summed them: no one container to name
DEFAULT_GRES: Final = {"nvidia.com/gpu": "gpu", "amd.com/gpu": "gpu"}
UNMAPPED: Final = (
    'so Slurm cannot allocate it; ask the admin to map it to a GRES (or to "" if Kubernetes alone counts it)'
)
NO_CPU: Final = (
    "no container requests CPU; Slurm allocates CPUs to the job: request at least 1 (a fraction is "
    "rounded up to whole CPUs)"
)
NO_MEMORY: Final = (
    "no container requests memory; Slurm allocates memory to the job: request it (in whole MiB)"
)
POD_LEVEL: Final = "pod-level resources are not supported yet; set the requests on the containers"


@dataclass(frozen=True, kw_only=True)
class PerNode:
    """What one pod asks of its node: in Slurm's units, and in Kubernetes' (for placement)."""

    cpus: int
    memory_mib: int
    gres: tuple[tuple[str, int], ...] = ()  # (GRES name, count), sorted: ("gpu", 2), ("gpu:a100", 1)
    requests: Mapping[str, int]  # canonical (quantity.canonical), every resource the pod requests
    cpu_note: str = ""  # set when the CPU request was rounded up


@dataclass(frozen=True, kw_only=True)
class JobRequest:
    """The Slurm job a gang (one pod or several) becomes: `nodes` nodes, each with one of its pods."""

    key: str  # the gang's (gang.py)
    name: str  # the Slurm job name: "<namespace>/<pod, group or Job name>"
    comment: str  # the marker (marker.py), as the job's admin comment
    pods: tuple[PodRef, ...]
    nodes: int
    cpus_per_node: int
    memory_mib_per_node: int
    gres_per_node: tuple[tuple[str, int], ...] = ()
    settings: Settings = field(default_factory=Settings)
    notes: tuple[str, ...] = ()  # said in the submission's Event (e.g. a CPU request rounded up)

    @property
    def tres_per_node(self) -> str:
        return tres_per_node(self.gres_per_node)


def extended(resource: str) -> bool:
    """Kubernetes' extended resources: a domain-qualified name outside kubernetes.io."""
    return "/" in resource and "kubernetes.io/" not in resource and not resource.startswith("requests.")


def _own(container: Container) -> dict[str, str]:
    """A container's requests as the API server defaults them: a limit stands in for a missing request."""
    return {**container.limits, **container.requests}


def _source(container: Container, resource: str) -> str:
    return "requests" if resource in container.requests else "limits"


def _read(
    containers: Iterable[tuple[str, Container]], gres: Mapping[str, str] | None
) -> dict[str, dict[str, Fraction]]:
    """Each container's requests (by its field path), exact; raises _Refused naming a bad one (and, given a
    GRES table, an extended resource Slurm cannot be asked for)."""
    result: dict[str, dict[str, Fraction]] = {}
    for path, container in containers:
        values: dict[str, Fraction] = {}
        for resource, text in sorted(_own(container).items()):
            field = path if path == OVERHEAD else f"{path}.resources.{_source(container, resource)}"
            where = f"{field}[{resource}]"
            try:
                values[resource] = quantity.parse(text)
            except quantity.BadQuantity as error:
                raise _refused(where, f"{error}; give a Kubernetes quantity") from None
            if gres is not None and extended(resource):
                _check_extended(where, resource, values[resource], gres)
        result[path] = values
    return result


def _check_extended(where: str, resource: str, value: Fraction, gres: Mapping[str, str]) -> None:
    if resource not in gres:
        raise _refused(where, f"{resource} is not in the scheduler's GRES table, {UNMAPPED}")
    if value.denominator != 1:
        raise _refused(where, f"{value} {resource}: Slurm allocates whole GRES; request a whole number")


class _Refused(Exception):
    """Carries a Refusal (its only argument) out of the reading of one container."""


def _refused(where: str, message: str) -> _Refused:
    return _Refused(Refusal(field=where, message=message))


def _add(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for resource, value in more.items():
        total[resource] = total.get(resource, Fraction(0)) + value


def _max(total: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for resource, value in other.items():
        total[resource] = max(total.get(resource, Fraction(0)), value)


def _combine(pod: Pod, read: Mapping[str, Mapping[str, Fraction]]) -> dict[str, Fraction]:
    """Kubernetes' PodRequests over already-read container values."""
    total: dict[str, Fraction] = {}
    for index in range(len(pod.containers)):
        _add(total, read[f"spec.containers[{index}]"])
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for index, container in enumerate(pod.init_containers):
        own = read[f"spec.initContainers[{index}]"]
        if container.sidecar:  # runs on beside everything started after it
            _add(total, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:  # runs alone, beside the sidecars started before it
            step = dict(own)
            _add(step, sidecars)
        _max(init_peak, step)
    _max(total, init_peak)
    _add(total, read[OVERHEAD])
    return total


def _paths(pod: Pod) -> list[tuple[str, Container]]:
    app = [(f"spec.containers[{i}]", c) for i, c in enumerate(pod.containers)]
    init = [(f"spec.initContainers[{i}]", c) for i, c in enumerate(pod.init_containers)]
    return [*app, *init, (OVERHEAD, Container(requests=pod.overhead))]


def pod_requests(pod: Pod, gres: Mapping[str, str] = DEFAULT_GRES) -> dict[str, Fraction] | Refusal:
    """The pod's requests as kube-scheduler counts them, exact; or a Refusal naming a quantity that is
    not one, or an extended resource Slurm cannot be asked for."""
    if pod.requests is not None:
        return _summed(pod.requests, pod.resources_error, gres)
    try:
        return _combine(pod, _read(_paths(pod), gres))
    except _Refused as refused:
        refusal: Refusal = refused.args[0]
        return refusal


def _summed(
    requests: Mapping[str, int], error: str, gres: Mapping[str, str]
) -> dict[str, Fraction] | Refusal:
    """The edge's summed requests (kube-scheduler's units) as exact values; its reading error a refusal."""
    if error:
        field, _, message = error.partition(": ")
        return Refusal(field=field, message=f"{message}; give a Kubernetes quantity")
    unmapped = sorted(name for name in requests if extended(name) and name not in gres)
    if unmapped:
        where = f"{SUMMED}[{unmapped[0]}]"
        return Refusal(field=where, message=f"{unmapped[0]} is not in the scheduler's GRES table, {UNMAPPED}")
    return {
        name: Fraction(value, 1000) if name == CPU else Fraction(value) for name, value in requests.items()
    }


def canonical_requests(pod: Pod) -> dict[str, int]:
    """For a Node's usage: any pod's requests in canonical units, every extended resource counted (the API
    server admits no bad quantity; should one come, the pod counts as requesting nothing)."""
    if pod.requests is not None:
        return {name: value for name, value in pod.requests.items() if value}
    try:
        counted = _combine(pod, _read(_paths(pod), None))
    except _Refused:
        return {}
    return {name: quantity.canonical(name, value) for name, value in counted.items() if value}


def per_node(pod: Pod, gres: Mapping[str, str] = DEFAULT_GRES) -> PerNode | Refusal:
    """What the pod's Slurm job asks of its node, or a Refusal naming the field to fix."""
    if pod.requests is None and pod.pod_resources:
        return Refusal(field="spec.resources", message=POD_LEVEL)
    counted = pod_requests(pod, gres)
    if isinstance(counted, Refusal):
        return counted
    first = "spec.containers[0].resources.requests" if pod.requests is None else SUMMED
    if counted.get(CPU, 0) <= 0:
        return Refusal(field=f"{first}[{CPU}]", message=NO_CPU)
    if counted.get(MEMORY, 0) <= 0:
        return Refusal(field=f"{first}[{MEMORY}]", message=NO_MEMORY)
    cpus = math.ceil(counted[CPU])
    milli = quantity.canonical(CPU, counted[CPU])
    note = (
        ""
        if cpus == counted[CPU]
        else f"CPU request {milli}m rounded up to {cpus}: Slurm allocates whole CPUs"
    )
    counts: dict[str, int] = {}
    for resource, value in counted.items():
        name = gres[resource] if extended(resource) else ""  # _read refused one not in the table
        if name and value:
            counts[name] = counts.get(name, 0) + int(value)
    return PerNode(
        cpus=cpus,
        memory_mib=math.ceil(counted[MEMORY] / MIB),
        gres=tuple(sorted(counts.items())),
        requests={name: quantity.canonical(name, value) for name, value in counted.items() if value},
        cpu_note=note,
    )


def tres_per_node(gres: Iterable[tuple[str, int]]) -> str:
    """Slurm's `tres_per_node` text: `gres/gpu:2,gres/gpu:a100:1`."""
    return ",".join(f"gres/{name}:{count}" for name, count in gres)
