"""Allocate at once, else submit (docs/scheduler.md, "Allocate at once"), pure: whether the syncer's own view
says a gang's job could start now, so that it is worth asking Slurm for an immediate allocation first; and
which job records are such a try that Slurm refused.

Slurm decides in either case (`job_allocate()` allocates an immediate job only when it is first in line and
nodes are free, else refuses it at once); this only spares refused tries, as each leaves a FAILED job record
(a job id, an accounting row). So it errs towards "no" (submit, as without it) wherever it cannot tell:
a reservation, a constraint other than plain features joined by `&`, a job of ours still pending (it is
ahead), a node not plainly idle or mixed, GRES where the node's `gres` and `gres_used` do not say plainly how
many of each are free (`gres_free`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from syncer.controllers.scheduler.request import JobRequest
from syncer.controllers.scheduler.values import Job

VIA: Final = "allocate"  # the marker's `via=` of a job asked for by an immediate allocation
# base states Slurm starts jobs on; any other flag than these leaves the node out (DRAIN, DOWN, RESERVED, ...)
_USABLE: Final = frozenset({"IDLE", "MIXED"})
_HARMLESS: Final = frozenset({"CLOUD", "DYNAMIC_NORM"})
# GRES that share a GPU between jobs: a GPU a shard or MPS job uses does not show in the gpu count used, so a
# node that has them says nothing plain about its free GPUs
_SHARING: Final = frozenset({"shard", "mps"})
_ANNOTATION: Final = re.compile(r"\([^)]*\)")  # `(S:0-1)`, `(IDX:0,2-3)` after a count: not read


@dataclass(frozen=True, kw_only=True)
class Room:
    """One Slurm node as the syncer's node cache last read it."""

    name: str
    state: frozenset[str]
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    free_cpus: int = 0
    free_memory_mb: int = 0
    # GRES free now, by name (`gpu`: every type) and by name:type (`gpu:a100`), sorted; None: not known
    free_gres: tuple[tuple[str, int], ...] | None = None


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


def _counts(text: str) -> Counter[str] | None:
    """Slurm's GRES list (`gpu:4`, `gpu:a100:2(S:0-1),gpu:v100:2`, `gpu:a100:1(IDX:0,2)`) as counts by name
    and by name:type; None for anything else (a count with a unit, `no_consume`, a part it cannot read)."""
    counts: Counter[str] = Counter()
    for part in _ANNOTATION.sub("", text).split(","):
        fields = part.split(":")
        if len(fields) not in (2, 3) or not fields[-1].isdigit() or not all(fields[:-1]):
            return None
        count = int(fields[-1])
        counts[fields[0]] += count
        if len(fields) == 3:
            counts[f"{fields[0]}:{fields[1]}"] += count
    return counts


def gres_free(gres: str, used: str) -> tuple[tuple[str, int], ...] | None:
    """What a node's GRES leave free now, by name (`gpu`, every type) and by name:type (`gpu:a100`), from
    slurmrestd's node `gres` and `gres_used` (the same form on 24.11 and 26.05, measured: `gpu:4` / `gpu:2`;
    `gpu:a100:2,gpu:v100:2` / `gpu:a100:2(IDX:0-1),gpu:v100:0(IDX:N/A)`). `()` for a node without GRES;
    None where the two do not say it plainly (a form it cannot read, the used list not naming exactly the
    node's GRES and types, more used than there is, GPUs shared by shards or MPS)."""
    if not gres or gres == "(null)":
        return ()
    total, taken = _counts(gres), _counts(used)
    if total is None or taken is None or _SHARING & total.keys():
        return None
    if taken.keys() != total.keys() or any(taken[key] > total[key] for key in total):
        return None  # slurmrestd lists each GRES (each type) of the node as used, 0 included (measured)
    return tuple(sorted((key, total[key] - taken[key]) for key in total))


def _gres_fit(wanted: Iterable[tuple[str, int]], free: Mapping[str, int]) -> bool:
    """Each typed GRES asked for (`gpu:a100`) is free of its type, and all asked of one name (typed or not)
    together of that name: an untyped `gpu` takes any type the typed ones leave."""
    demand: Counter[str] = Counter()
    for key, count in wanted:
        demand[key] += count
        name, _, kind = key.partition(":")
        if kind:
            demand[name] += count
    return all(free.get(key, 0) >= count for key, count in demand.items())


def could_start(request: JobRequest, nodes: Iterable[Room], *, ours_pending: bool) -> bool:
    """True when `request.nodes` nodes each show room for one of its pods (CPUs, memory and its GRES free, in
    its partition, with its features) and no job of ours waits ahead of it."""
    settings = request.settings
    if ours_pending or settings.reservation:
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
        if request.gres_per_node and (
            node.free_gres is None or not _gres_fit(request.gres_per_node, dict(node.free_gres))
        ):
            continue
        if node.free_cpus >= request.cpus_per_node and node.free_memory_mb >= request.memory_mib_per_node:
            fitting += 1
    return fitting >= request.nodes
