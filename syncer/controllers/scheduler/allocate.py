"""Allocate at once, else submit (docs/scheduler.md, "Allocate at once"), pure: whether the syncer's own view
says a gang's job could start now, so that it is worth asking Slurm for an immediate allocation first; and
which job records are such a try that Slurm refused.

Slurm decides in either case (`job_allocate()` allocates an immediate job only when it is first in line and
nodes are free, else refuses it at once); this only spares refused tries, as each leaves a FAILED job record
(a job id, an accounting row). So it errs towards "no" (submit, as without it) wherever it cannot tell:
a reservation, GRES, a constraint other than plain features joined by `&`, a job of ours still pending (it is
ahead), a node not plainly idle or mixed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.values import Job

VIA: Final = "allocate"  # the marker's `via=` of a job asked for by an immediate allocation
# base states Slurm starts jobs on; any other flag than these leaves the node out (DRAIN, DOWN, RESERVED, ...)
_USABLE: Final = frozenset({"IDLE", "MIXED"})
_HARMLESS: Final = frozenset({"CLOUD", "DYNAMIC_NORM"})


@dataclass(frozen=True, kw_only=True)
class Room:
    """One Slurm node as the syncer's node cache last read it."""

    name: str
    state: frozenset[str]
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    free_cpus: int = 0
    free_memory_mb: int = 0


def refused_try(job: Job) -> bool:
    """A record an immediate allocation left when Slurm refused it (FAILED, never given a node): never a
    pod's job, so never adopted and never a reason to delete the pod."""
    return job.marker.via == VIA and job.ended and not job.nodes


def _features(constraint: str) -> tuple[str, ...] | None:
    """The features a plain `a&b` constraint asks for; None for anything else (`|`, counts, brackets)."""
    names = tuple(name.strip() for name in constraint.split("&"))
    if not all(name and all(c.isalnum() or c in "_-." for c in name) for name in names):
        return None
    return names


def could_start(request: JobRequest, nodes: Iterable[Room], *, ours_pending: bool) -> bool:
    """True when `request.nodes` nodes each show room for one of its pods (CPUs and memory free, in its
    partition, with its features) and no job of ours waits ahead of it."""
    settings = request.settings
    if ours_pending or request.gres_per_node or settings.reservation:
        return False
    features = _features(settings.constraint) if settings.constraint else ()
    if features is None:
        return False
    partitions = set(settings.partition.split(",")) if settings.partition else None
    fitting = 0
    for node in nodes:
        flags = node.state - _USABLE - _HARMLESS
        if flags or not node.state & _USABLE:
            continue
        if partitions is not None and not partitions & set(node.partitions):
            continue
        if not set(features) <= set(node.features):
            continue
        if node.free_cpus >= request.cpus_per_node and node.free_memory_mb >= request.memory_mib_per_node:
            fitting += 1
    return fitting >= request.nodes
