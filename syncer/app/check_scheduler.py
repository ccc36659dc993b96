"""`check`'s scheduler items (issue 44, docs/scheduler.md): whether the one-pool scheduler is on, for which
name and namespaces, whether this Slurm can stand a job for a pod (external jobs, or the placeholder on
24.11), whether Slurm can preempt a pod's job without the grace that keeps the preemptor off its node until
the pod is gone, and the pods that wait with why (their PodScheduled condition). `(ok, what, fix, warn)`
lines out, as check_power's (check_cmd makes them items)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from syncer.controllers.scheduler import marker
from syncer.controllers.scheduler import settings as job_settings
from syncer.controllers.scheduler.edges import other_release
from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeError
from syncer.model.jobs import SlurmJob
from syncer.model.keys import Keys
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmError
from syncer.slurm.models import SlurmctldConf
from syncer.slurm.partitions import PartitionState

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


# Preemption (docs/scheduler.md "Preemption"): with GraceTime a preempted pod's job stays RUNNING with a
# preempt_time; the job cache reads it within its detail interval, then the pod is deleted and its node held
# before Slurm ends the job. Without, Slurm ends the job at once and a preemptor may start beside the
# stopping pod (measured on 26.05.5: 3 of 10 rounds).
READ_S = 5  # the job cache's detail_interval_s: how late a preemption's preempt_time may be seen
POD_GRACE_S = 30  # Kubernetes' default terminationGracePeriodSeconds
SUSPENDS = frozenset({"SUSPEND", "GANG"})  # a job paused, not ended: a pod cannot be paused


@dataclass(frozen=True)
class Landing:
    """The partitions the scheduler's pods may run in: those named (a Namespace's or a pod's
    `slurm-syncer.dev/partition`), Slurm's default one where a pod names none, or any where a Namespace
    lets its pods choose."""

    named: frozenset[str] = frozenset()
    default: bool = False
    any: bool = False

    def of(self, partitions: Iterable[PartitionState]) -> list[PartitionState]:
        return [
            p for p in partitions
            if self.any or p.name in self.named or (self.default and p.settings.default is not False)
        ]  # fmt: skip


def landing(
    namespaces: Mapping[str, Mapping[str, str] | None],
    default_overrides: frozenset[str] = job_settings.DEFAULT_POD_OVERRIDES,
) -> Landing:
    """Where the pods of these Namespaces (name -> annotations; None: not readable) may run."""
    named: set[str] = set()
    default = anywhere = False
    for namespace, found in namespaces.items():
        if found is None:
            anywhere = True  # not known: any
            continue
        try:
            allowed = job_settings.pod_overrides(namespace, found, default_overrides)
        except job_settings.RefusedSetting:
            continue  # its pods are refused (the Namespace's annotation is bad): they run nowhere
        anywhere |= job_settings.PARTITION in allowed
        listed = [p.strip() for p in found.get(Keys.JOB_PARTITION, "").split(",") if p.strip()]
        named.update(listed)
        default |= not listed
    return Landing(frozenset(named), default, anywhere)


def _tier(partition: PartitionState) -> int:
    tier = partition.settings.priority_tier
    return 1 if tier is None else tier


def preemptible(partition: PartitionState, partitions: Sequence[PartitionState]) -> bool:
    """With preempt/partition_prio: a job of a partition of a higher PriorityTier over one of its nodes can
    preempt its jobs (unless its PreemptMode is OFF)."""
    if partition.preempt_mode == ("OFF",):
        return False
    return any(
        other.name != partition.name and _tier(other) > _tier(partition) and other.nodes & partition.nodes
        for other in partitions
    )


def preemption(
    conf: SlurmctldConf | None,
    partitions: Sequence[PartitionState],
    where: Landing,
    longest_grace_s: int | None,
    api: str,
) -> Line:
    """Whether Slurm can preempt a pod's job with less GraceTime than the pod needs to be gone first.

    `longest_grace_s`: the longest terminationGracePeriodSeconds of the scheduler's pods (None: no pod);
    `api`: the REST API version, named where it has no GET /conf."""
    docs = 'docs/scheduler.md "Preemption"'
    if conf is None:
        return (
            True,
            f"scheduler: preemption of pods' jobs not checked, {api} has no GET /conf (Slurm 26.05+)",
            f"without GraceTime a preemptor can start beside a stopping pod: {docs}",
            True,
        )
    kind = conf.preempt_type or "preempt/none"
    if kind == "preempt/none":
        return True, "scheduler: Slurm preempts no job (PreemptType=preempt/none)", "", False
    pod_s = POD_GRACE_S if longest_grace_s is None else longest_grace_s
    need = pod_s + READ_S
    whose = (
        f"the pods' longest terminationGracePeriodSeconds {pod_s} s"
        if longest_grace_s is not None
        else f"terminationGracePeriodSeconds {pod_s} s, Kubernetes' default (no pod now)"
    )
    if kind != "preempt/partition_prio":
        return (
            True,
            f"scheduler: PreemptType={kind}: a preempted pod's job gets its QOS's GraceTime, not checked "
            "here",
            f"give the QOS that can be preempted GraceTime={need} or more ({whose} + {READ_S} s) and "
            f"PreemptMode=CANCEL: {docs}",
            True,
        )
    mine = where.of(partitions)
    at_risk = [p for p in mine if preemptible(p, partitions)]
    short = [
        p for p in at_risk if p.settings.grace_time is None or p.settings.grace_time < need
        or SUSPENDS & set(p.preempt_mode)
    ]  # fmt: skip
    if not at_risk:
        return (
            True,
            f"scheduler: no partition its pods may use ({', '.join(p.name for p in mine) or 'none'}) can be "
            f"preempted (PreemptType={kind}: no higher PriorityTier over its nodes)",
            "",
            False,
        )
    if not short:
        names = ", ".join(p.name for p in at_risk)
        return (
            True,
            f"scheduler: partition(s) {names} its pods may use can be preempted (PreemptType={kind}) with "
            f"GraceTime >= {need} s ({whose} + {READ_S} s): a pod is deleted and its node held before Slurm "
            "ends its job",
            "",
            False,
        )
    listed = ", ".join(
        f"{p.name} (GraceTime {p.settings.grace_time or 0} s, PreemptMode={','.join(p.preempt_mode) or '?'})"
        for p in short
    )
    return (
        True,
        f"scheduler: partition(s) {listed} its pods may use can be preempted (PreemptType={kind}) with less "
        f"than {need} s of GraceTime or by a pause: Slurm can end a pod's job at once and start the "
        "preemptor beside the stopping pod (measured: 3 of 10 preemptions without GraceTime)",
        f"set GraceTime={need} or more ({whose} + {READ_S} s) and PreemptMode=CANCEL on "
        f"{', '.join(p.name for p in short)}, or keep the pods out of them ({Keys.JOB_PARTITION} on their "
        f"Namespaces): {docs}",
        True,
    )


def longest_grace(pods: Iterable[Mapping[str, Any]]) -> int | None:
    """The longest terminationGracePeriodSeconds of these pods (Kubernetes' default where unset)."""
    graces = [(pod.get("spec") or {}).get("terminationGracePeriodSeconds") for pod in pods]
    return max((POD_GRACE_S if g is None else int(g) for g in graces), default=None)


async def preemption_line(
    slurm: SlurmClient, kube: KubeClient, namespaces: tuple[str, ...], pods: Sequence[Mapping[str, Any]]
) -> Line:
    """Reads what `preemption` needs: /conf, the partitions, the Namespaces served (those of the pods when
    every namespace is)."""
    version = slurm.version.name if slurm.version else "?"
    try:
        conf = await slurm.slurmctld_conf()
        partitions = await slurm.partition_states()
    except SlurmError as exc:
        return False, f"scheduler: preemption not checked: {exc}", "see slurmrestd's log", False
    names = namespaces or tuple(sorted({str((p.get("metadata") or {}).get("namespace", "")) for p in pods}))
    read: dict[str, Mapping[str, str] | None] = {}
    for name in names:
        try:
            found = await kube.get(f"/api/v1/namespaces/{name}")
            read[name] = dict((found.get("metadata") or {}).get("annotations") or {})
        except KubeError:
            read[name] = None
    where = landing(read)
    if not namespaces:
        where = Landing(where.named, True, where.any)  # any other Namespace's pods: the default at least
    return preemption(conf, partitions, where, longest_grace(pods), f"API {version}")


async def scheduler_pods(kube: KubeClient, name: str, namespaces: Iterable[str]) -> list[dict[str, Any]]:
    """The pods with that schedulerName in the served namespaces (all when none is listed)."""
    found: list[dict[str, Any]] = []
    params = {"fieldSelector": f"spec.schedulerName={name}"}
    for namespace in tuple(namespaces) or ("",):
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        found += (await kube.get(path, params)).get("items") or []
    return found


def shared(pods: Iterable[Mapping[str, Any]], jobs: Iterable[SlurmJob], release: str) -> Line:
    """Live jobs under another release's marker naming pods of this scheduler name: two releases serve it
    (docs/scheduler.md "Two releases, one schedulerName"). Each leaves the other's bound pods alone, but a new
    pod may get a job from each. "Live" as the controller judges it (`edges.other_release`: a COMPLETING job
    has ended), so the check names exactly the jobs the controller leaves to another release."""
    uids = {str((pod.get("metadata") or {}).get("uid") or "") for pod in pods} - {""}
    others: dict[str, list[int]] = {}
    for job in jobs:
        other = other_release(job, release)
        if other and marker.named_uids(job.marker) & uids:
            others.setdefault(other, []).append(job.job_id)
    if not others:
        return True, "scheduler: no other release's job names its pods", "", False
    said = "; ".join(
        f"{other}: Slurm job(s) {', '.join(map(str, sorted(ids)))}" for other, ids in sorted(others.items())
    )
    return (
        False,
        f"scheduler: another slurm-syncer release serves this scheduler name too (this is {release}): {said}",
        "run one release per --scheduler-name: uninstall the other (its bound pods are left to it), or give "
        "one a name of its own",
        True,
    )


async def lines(
    slurm: SlurmClient,
    kube: KubeClient,
    name: str,
    namespaces: tuple[str, ...],
    placeholder: bool,
    release: str = "",
) -> list[Line]:
    out = [switched(name, namespaces)]
    if not name:
        return out
    try:
        pods = await scheduler_pods(kube, name, namespaces)
    except KubeError as exc:
        pods = None
        listed: Line = (
            False, f"scheduler: its pods cannot be listed: {exc.message}", "see the rights above", False
        )  # fmt: skip
    if slurm.version is not None:
        out.append(slurm_side(slurm, placeholder))
        out.append(await preemption_line(slurm, kube, namespaces, pods or []))
        if pods and release:
            out.append(await shared_line(slurm, pods, release))
    out.append(listed if pods is None else pending(pods))
    return out


async def shared_line(slurm: SlurmClient, pods: Sequence[Mapping[str, Any]], release: str) -> Line:
    """`shared` over one whole job list (only slurm-syncer markers decoded whole)."""
    try:
        listing = await slurm.list_job_details(keep=lambda text: text.startswith(marker.PREFIX))
    except SlurmError as exc:
        return False, f"scheduler: the job list cannot be read: {exc}", "see the Slurm items above", True
    return shared(pods, listing.jobs if listing is not None else (), release)
