"""Pods -> gangs: the unit one Slurm job stands for, and the job request it makes.

A gang is keyed `<namespace>/<kind>/<name>`:
- `group`: pods sharing the label `slurm-syncer.dev/group` (in one namespace, as every Kubernetes grouping
  is), each with the annotation `slurm-syncer.dev/group-size`;
- `job`: the pods of a `batch/v1` Job with parallelism > 1 (keyed by the Job's UID: a Job deleted and made
  again is another gang), size = parallelism (the Job as syncer/model's KubeJob: no copy of it here);
- `pod`: any other pod alone.
A pod a job of ours names keeps that job's key (the job it is bound to first), so relabelling a pod never
makes a second job for it. The request is made once every pod of the gang is there, unbound and alive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from syncer.controllers.scheduler import marker
from syncer.controllers.scheduler.options import Options
from syncer.controllers.scheduler.request import JobRequest, PerNode, per_node
from syncer.controllers.scheduler.settings import (
    ANNOTATIONS,
    FIELDS,
    Refusal,
    Settings,
    annotation_field,
    resolve,
)
from syncer.controllers.scheduler.values import Job, Pod
from syncer.model.keys import Keys
from syncer.model.kube import KubeJob

POD: Final = "pod"
GROUP: Final = "group"
JOB: Final = "job"
GROUP_FIELD: Final = f"metadata.labels[{Keys.GROUP_LABEL}]"
SIZE_FIELD: Final = annotation_field(Keys.GROUP_SIZE)
MAX_SIZE: Final = 100_000  # more nodes than any Slurm cluster: a typo, not a gang


@dataclass(frozen=True, kw_only=True)
class Waiting:
    """No job yet, and nothing wrong: the gang is not complete, or an object it needs is not known yet."""

    message: str


Want = JobRequest | Refusal | Waiting | None  # None: no pod waits for a job


@dataclass(frozen=True, kw_only=True)
class Gang:
    key: str
    pods: tuple[Pod, ...]  # every pod of the gang, by name
    jobs: tuple[Job, ...]  # every job of ours standing for it, by id
    want: Want

    @property
    def namespace(self) -> str:
        return self.key.split("/", 1)[0]


def key_of(pod: Pod, batch_jobs: Mapping[str, KubeJob]) -> str:
    """The gang a pod belongs to by its own labels and owner."""
    group = pod.labels.get(Keys.GROUP_LABEL)
    if group is not None:
        return f"{pod.namespace}/{GROUP}/{group}"
    owner = pod.owner
    if owner is not None and owner.kind == "Job" and owner.api_version == "batch/v1":
        job = batch_jobs.get(owner.uid)
        if job is None or job.parallelism > 1:  # unknown yet: no job until it is known
            return f"{pod.namespace}/{JOB}/{owner.uid}"
    return f"{pod.namespace}/{POD}/{pod.name}"


def group(
    pods: Iterable[Pod],
    jobs: Iterable[Job],
    batch_jobs: Mapping[str, KubeJob],
    namespaces: Mapping[str, Mapping[str, str]],
    options: Options,
    *,
    only: str | None = None,
) -> dict[str, Gang]:
    """Every gang of these pods and jobs (the jobs ours, by marker). `namespaces`: each Namespace's
    annotations (one missing: not known yet, nothing submitted there). `only`: that gang alone, as the
    whole grouping makes it (a reconcile plans one gang: the others' requests are not made)."""
    jobs = sorted(jobs, key=lambda job: job.job_id)
    by_id = {job.job_id: job for job in jobs}
    claimed: dict[str, str] = {}  # pod UID -> the key of the first job naming it
    for job in reversed(jobs):
        claimed.update(dict.fromkeys(job.marker.uids, job.marker.key))
    members: dict[str, list[Pod]] = {}
    for pod in pods:
        key = _key(pod, by_id.get(pod.job_id or 0), claimed) or key_of(pod, batch_jobs)
        members.setdefault(key, []).append(pod)
    standing: dict[str, list[Job]] = {}
    for job in jobs:
        standing.setdefault(job.marker.key, []).append(job)
    live = [job for job in jobs if not job.ended]
    taken = frozenset().union(*(job.marker.uids for job in live))
    return {
        key: Gang(
            key=key,
            pods=tuple(sorted(members.get(key, ()), key=lambda pod: pod.name)),
            jobs=tuple(standing.get(key, ())),
            want=want(
                key,
                [pod for pod in members.get(key, ()) if pod.uid not in taken],
                batch_jobs,
                namespaces,
                options,
            ),
        )
        for key in sorted(members.keys() | standing.keys())
        if only is None or key == only
    }


def _key(pod: Pod, bound: Job | None, claimed: Mapping[str, str]) -> str:
    """The gang of a pod a job of ours names or its job-id annotation names (`bound`): that job's if it names
    the pod, else the first job's naming it (an annotation anyone may overwrite never takes a pod from its
    job's gang: that job would see it gone and end under it), else the annotation's (a copy: planned beside
    the job it names, which does not name it, so it is left alone); "" when none."""
    if bound is not None and pod.uid in bound.marker.uids:
        return bound.marker.key
    return claimed.get(pod.uid) or (bound.marker.key if bound is not None else "")


def want(
    key: str,
    pods: Sequence[Pod],
    batch_jobs: Mapping[str, KubeJob],
    namespaces: Mapping[str, Mapping[str, str]],
    options: Options,
) -> Want:
    """What the gang's waiting pods (alive, unbound, not gated; `pods` holds none a live job stands for)
    make: a job request, a refusal, or a wait."""
    waiting = sorted(
        (pod for pod in pods if not (pod.ended or pod.node_name or pod.gated)), key=lambda pod: pod.name
    )
    if not waiting:
        return None
    namespace, kind, name = key.split("/", 2)
    sized = _size(kind, name, waiting, batch_jobs)
    if not isinstance(sized, tuple):
        return sized
    size, title = sized
    if len(waiting) < size:
        here = f"{len(waiting)} of the {size} pods of {title} are here"
        return Waiting(
            message=f"{here}; its Slurm job is submitted when all are (pods of namespace {namespace} only)"
        )
    if len(waiting) > size:
        field = GROUP_FIELD if kind == GROUP else "metadata.ownerReferences"
        extra = f"{len(waiting)} pods wait in {title}, more than its size {size}"
        return Refusal(field=field, message=f"{extra}; delete the extra pods or raise the size")
    strangers = [pod for pod in waiting if pod.namespace != namespace]
    if strangers:
        stranger = f"Pod {strangers[0].namespace}/{strangers[0].name}"
        return Refusal(
            field="metadata.namespace",
            object=stranger,
            message=f"a gang's pods share one namespace: {namespace}",
        )
    annotations = namespaces.get(namespace)
    if annotations is None:
        return Waiting(message=f"namespace {namespace} is not known yet")
    shown = batch_jobs[name].name if kind == JOB else name
    return _request(key, namespace, shown, waiting, annotations, options)


Sized = tuple[int, str] | Refusal | Waiting


def _size(kind: str, name: str, waiting: Sequence[Pod], batch_jobs: Mapping[str, KubeJob]) -> Sized:
    """The gang's size and how to call it, from its label or its Job."""
    if kind == POD:
        return 1, f"pod {name}"
    if kind == JOB:
        job = batch_jobs.get(name)
        if job is None:
            owner = waiting[0].owner
            return Waiting(message=f"Job {owner.name if owner else name} is not known yet")
        if job.completions is not None and job.completions != job.parallelism:
            waves = f"{job.completions} with parallelism {job.parallelism}: a gang runs all its pods at once"
            return Refusal(
                field="spec.completions",
                object=f"Job {job.namespace}/{job.name}",
                message=f"{waves} and ends together; set completions to parallelism or leave it unset",
            )
        return job.parallelism, f"Job {job.name}"
    if not name:
        return Refusal(field=GROUP_FIELD, message="empty: name the group, or remove the label")
    sizes = {pod.annotations.get(Keys.GROUP_SIZE, "") for pod in waiting}
    text = min(sizes)
    if len(sizes) > 1:
        listed = ", ".join(sorted(repr(size) for size in sizes))
        return Refusal(
            field=SIZE_FIELD, message=f"the pods of group {name} disagree ({listed}); give them one size"
        )
    if not (text.isascii() and text.isdecimal()) or not 1 <= int(text) <= MAX_SIZE:
        what = f"{text!r} is not a group size (a whole number of pods, 1 to {MAX_SIZE}, one per Slurm node)"
        return Refusal(field=SIZE_FIELD, message=f"{what}; set it on every pod of group {name}")
    return int(text), f"group {name}"


def _request(
    key: str,
    namespace: str,
    name: str,
    pods: Sequence[Pod],
    annotations: Mapping[str, str],
    options: Options,
) -> JobRequest | Refusal:
    first: tuple[Pod, PerNode, Settings] | None = None
    for pod in pods:
        where = f"Pod {namespace}/{pod.name}" if len(pods) > 1 else ""
        asks = per_node(pod, options.gres)
        if isinstance(asks, Refusal):
            return replace(asks, object=where)
        settings = resolve(namespace, pod.annotations, annotations, options.pod_overrides)
        if isinstance(settings, Refusal):
            return settings if settings.object else replace(settings, object=where)
        if first is None:
            first = (pod, asks, settings)
            continue
        mixed = _mixed(first, asks, settings)
        if mixed:
            same = "a gang's pods ask the same of every node (one Slurm job)"
            return Refusal(
                field=mixed[0],
                object=where,
                message=f"{mixed[1]} here, {mixed[2]} on pod {first[0].name}: {same}",
            )
    assert first is not None
    _, asks, settings = first
    refs = tuple(pod.ref for pod in pods)
    return JobRequest(
        key=key, name=f"{namespace}/{name}", comment=marker.write(options.release, key, refs), pods=refs,
        nodes=len(pods), cpus_per_node=asks.cpus, memory_mib_per_node=asks.memory_mib,
        gres_per_node=asks.gres, settings=settings, notes=(asks.cpu_note,) if asks.cpu_note else (),
    )  # fmt: skip


First = tuple[Pod, PerNode, Settings]


def _mixed(first: First, asks: PerNode, settings: Settings) -> tuple[str, str, str] | None:
    """The first field where a pod's ask differs from the gang's first pod: (field, this, first's)."""
    _, their, their_settings = first
    resources = "spec.containers[*].resources.requests"
    for field, mine, theirs in (
        (f"{resources}[cpu]", f"{asks.cpus} CPUs", f"{their.cpus} CPUs"),
        (f"{resources}[memory]", f"{asks.memory_mib} MiB", f"{their.memory_mib} MiB"),
        (resources, f"GRES {_gres(asks)}", f"GRES {_gres(their)}"),
    ):
        if mine != theirs:
            return field, mine, theirs
    for name, key in ANNOTATIONS.items():
        mine, theirs = getattr(settings, FIELDS[name]), getattr(their_settings, FIELDS[name])
        if mine != theirs:
            return annotation_field(key), f"{name} {mine!r}", f"{name} {theirs!r}"
    return None


def _gres(asks: PerNode) -> str:
    return ",".join(f"{name}:{count}" for name, count in asks.gres) or "none"
