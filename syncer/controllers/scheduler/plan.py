"""The scheduler's decision for one gang, pure: its pods, the Slurm jobs of ours standing for them, the
binding of Slurm nodes to Kubernetes Nodes -> what to do now (docs/scheduler.md, "States -> actions").

Level-triggered: computed from current state alone, so a restart or a missed event changes nothing; the
only memory it takes is the controller's own (`held`: the nodes it holds for this gang; `submitted`: a
job it submitted that the job cache does not show yet; `unplaced`: jobs it cancelled as they could not be
placed, whose pods' conditions the pod cache may not show yet; `cancelled`: jobs it cancelled that the job
cache still shows live, from a read made before the cancel; `bound`: binds it made that the pod cache does not
show yet; `foreign`: jobs named by a bound pod's job-id annotation that a fresh read found live under another
release's marker). Rules:
- One job per pod: a pod a live job stands for gets no other; a second live job for a pod is cancelled.
- All or nothing: a gang's pods are bound together once every one passes kube-scheduler's checks, or
  none is and the job is cancelled (and submitted again after `retry_after_s`).
- Never both at once: a job is cancelled only once no pod of it holds resources (gone, or in a terminal
  phase); a pod whose job Slurm ends (or is ending: preemption's grace window, the time limit ahead, a
  suspend, a requeue) is deleted, and its node held (drained) until the pod is gone.
- Our own cancel is not Slurm's: a job the controller cancelled that the job cache still shows live keeps its
  pods (no other job for them) and gets nothing else: no bind, no condition, no deletion, no second cancel;
  once the cache shows it ended the usual rules apply (a placement retry: submitted again later).
- Our own bind is a bind: a pod in `bound` that the pod cache shows unbound is planned as bound there under
  that job (`shown_bound`): never placed again, its job never cancelled for placement, no condition on it.
- Ours wins over an edited job-id annotation: a bound pod whose annotation names no job of the gang, nor one
  in `foreign`, while a job of ours names it and ran on its Node, runs under that job (a live one first).
- Another release's pod is not ours to judge: a bound pod whose job-id names a job in `foreign` (two releases
  serve one scheduler name) is left alone: no deletion, no hold. A job the fresh read finds without any
  slurm-syncer marker is gone (Slurm lost its state and reused the id): the pod goes.
- A live job of ours whose every pod is bound under another job (both releases submitted for a new pod, and
  the other's bound it) is cancelled (`duplicate`): never its pods deleted for its end.
- Fail closed: on stale data nothing at all; a job state it does not know stops the gang.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from syncer.controllers.scheduler.gang import Gang
from syncer.controllers.scheduler.options import Options
from syncer.controllers.scheduler.placement import misfit, placed
from syncer.controllers.scheduler.request import JobRequest, canonical_requests
from syncer.controllers.scheduler.settings import Refusal
from syncer.controllers.scheduler.values import Job, Node, Pod, PodRef, Scheduled, World
from syncer.model.keys import Keys

# PodScheduled=False reasons (and the Event reasons beside them)
PENDING: Final = "SlurmJobPending"
STARTING: Final = "SlurmJobStarting"
REFUSED: Final = "SlurmRequestRefused"
WAITING: Final = "SlurmGangWaiting"
PLACEMENT_FAILED: Final = "SlurmPlacementFailed"

STALE: Final = "data is stale or missing: nothing is submitted, bound, cancelled or deleted until it is fresh"
# Why a pod is deleted or a job cancelled (a metric's label): Slurm's side first, then Kubernetes'.
SLURM_CAUSES: Final = {
    "CANCELLED": "cancelled",
    "TIMEOUT": "time-limit",
    "DEADLINE": "time-limit",
    "PREEMPTED": "preempted",
    "NODE_FAIL": "node-failure",
    "BOOT_FAIL": "node-failure",
}
SAID: Final = {
    "cancelled": "was cancelled in Slurm",
    "time-limit": "reaches its time limit",
    "preempted": "is being preempted",
    "suspended": "was suspended by Slurm (preemption)",
    "node-failure": "lost a node",
    "requeued": "was requeued by Slurm",
    "job-ended": "ended",
    "job-gone": "is no longer in Slurm",
    "node-deleted": "has a pod on a Kubernetes Node that no longer exists",
    "placement": "cannot run where Slurm placed it",
    "pod-deleted": "lost a pod (deleted)",
    "pod-failed": "has a pod that failed",
    "pod-succeeded": "has no pod left running",
}
_JOB_IN_MESSAGE: Final = re.compile(r"Slurm job (\d+)\b")


@dataclass(frozen=True, kw_only=True)
class Submit:
    request: JobRequest


@dataclass(frozen=True, kw_only=True)
class SetScheduled:
    """Set the pod's PodScheduled condition to False with this reason and message (and say it in an Event)."""

    pod: PodRef
    reason: str
    message: str


@dataclass(frozen=True, kw_only=True)
class Bind:
    """Create the pod's binding to `node`, annotated with the job id (Keys.SCHEDULER_JOB_ID)."""

    pod: PodRef
    node: str
    job_id: int
    slurm_node: str


@dataclass(frozen=True, kw_only=True)
class Teardown:
    """Ends what job `job_id` holds, for `cause` (the tear-downs' metric label), said in `message`."""

    job_id: int
    cause: str
    message: str


@dataclass(frozen=True, kw_only=True)
class Cancel(Teardown):
    """Cancel the job."""


@dataclass(frozen=True, kw_only=True)
class DeletePod(Teardown):
    """Delete the pod with this grace period; `job_id`: the job whose end causes it (read it fresh first)."""

    pod: PodRef
    grace_s: int


@dataclass(frozen=True, kw_only=True)
class Hold:
    """Keep Slurm from starting jobs on this node (a drain with the owner prefix) while a pod still runs;
    `gone`: the job, absent from our jobs, the hold rests on (read it fresh first: another release's?)."""

    slurm_node: str
    reason: str
    gone: int | None = None


@dataclass(frozen=True, kw_only=True)
class Release:
    slurm_node: str


Action = Submit | SetScheduled | Bind | Cancel | DeletePod | Hold | Release


@dataclass(frozen=True, kw_only=True)
class Plan:
    actions: tuple[Action, ...] = ()  # in order; stop at the first that fails, then plan again
    blocked: str = ""  # why the gang waits, for logs and `status`
    recheck_at: float | None = None  # plan again then at the latest (a deadline or a retry is due)


@dataclass
class _Out:
    world: World
    options: Options
    actions: list[Action] = field(default_factory=list)
    foreign: frozenset[int] = frozenset()  # plan's `foreign`
    holds: dict[str, str] = field(default_factory=dict)  # Slurm node -> why
    gone: dict[str, int] = field(default_factory=dict)  # Slurm node -> the job gone from Slurm it is held for
    deleted: set[str] = field(default_factory=set)  # pod UIDs
    released: set[str] = field(default_factory=set)  # pod UIDs whose job we cancelled: their condition stays
    deferred: set[str] = field(default_factory=set)  # ... and not submitted again yet
    times: list[float] = field(default_factory=list)
    blocked: str = ""

    def condition(self, pod: Pod, reason: str, message: str) -> None:
        if pod.scheduled != Scheduled(status="False", reason=reason, message=message):
            self.actions.append(SetScheduled(pod=pod.ref, reason=reason, message=message))

    def delete(self, pod: Pod, cause: str, job_id: int, grace: int | None = None, said: str = "") -> None:
        if pod.deleting or pod.uid in self.deleted:
            return
        self.deleted.add(pod.uid)
        grace_s = pod.grace_period_s if grace is None else min(pod.grace_period_s, grace)
        message = f"Slurm job {job_id} {said or SAID[cause]}: pod deleted (grace period {grace_s} s)"
        self.actions.append(
            DeletePod(pod=pod.ref, grace_s=grace_s, cause=cause, message=message, job_id=job_id)
        )

    def cancel(self, job: Job, cause: str, why: str = "", said: str = "") -> None:
        message = f"Slurm job {job.job_id} {said or SAID[cause]}: cancelled" + (f" ({why})" if why else "")
        self.actions.append(Cancel(job_id=job.job_id, cause=cause, message=message))


def plan(
    gang: Gang,
    world: World,
    options: Options,
    *,
    held: frozenset[str] = frozenset(),
    submitted: int | None = None,
    unplaced: frozenset[int] = frozenset(),
    cancelled: frozenset[int] = frozenset(),
    bound: frozenset[Bind] = frozenset(),
    foreign: frozenset[int] = frozenset(),
) -> Plan:
    if not world.fresh:
        return Plan(blocked=STALE)
    gang = _ours_win(shown_bound(gang, bound), world, foreign)
    unknown = [job for job in gang.jobs if not job.known]
    if unknown:
        job = unknown[0]
        return Plan(blocked=f"Slurm job {job.job_id} is {job.state}, a state the scheduler does not know")
    out = _Out(world=world, options=options, foreign=foreign)
    claimed: dict[str, Job] = {}  # pod UID -> the best-ranked live job standing for it
    # a job we cancelled ranks last: it never makes a job that stands a duplicate
    live = sorted(
        (job for job in gang.jobs if not job.ended),
        key=lambda job: (job.job_id in cancelled, _rank(job, gang.pods)),
    )
    for job in live:
        members = [pod for pod in gang.pods if _stands_for(job, pod)]
        better = next((claimed[pod.uid] for pod in members if pod.uid in claimed), None)
        if job.job_id in cancelled:  # the cache shows it from before our cancel: its end is awaited
            out.blocked = f"Slurm job {job.job_id} was cancelled by the scheduler: its end is awaited"
        elif better is not None:
            _duplicate(job, members, better, gang.pods, out)
        else:
            _live(job, members, gang, out)
        for pod in members:
            claimed.setdefault(pod.uid, job)
    _unclaimed(gang, set(claimed), submitted, unplaced, out)
    _holds(gang, out)
    hold = [
        Hold(slurm_node=node, reason=why, gone=out.gone.get(node))
        for node, why in sorted(out.holds.items())
        if node not in held
    ]
    release = [Release(slurm_node=node) for node in sorted(held - out.holds.keys())]
    return Plan(
        actions=(*hold, *out.actions, *release),
        blocked=out.blocked,
        recheck_at=min(out.times, default=None),
    )


def shown_bound(gang: Gang, bound: Iterable[Bind]) -> Gang:
    """The gang as the pod cache will show it once it shows our binds: a pod it shows unbound that we bound is
    on that Node, annotated with the job (the API server copies the Binding's annotation onto the pod)."""
    binds = {bind.pod.uid: bind for bind in bound}
    return replace(gang, pods=tuple(_as_bound(pod, binds.get(pod.uid)) for pod in gang.pods))


def _as_bound(pod: Pod, bind: Bind | None) -> Pod:
    if bind is None or pod.node_name:  # the cache shows a bind: its word wins
        return pod
    annotations = {**pod.annotations, Keys.SCHEDULER_JOB_ID: str(bind.job_id)}
    return replace(pod, node_name=bind.node, annotations=annotations)


def _ours_win(gang: Gang, world: World, foreign: frozenset[int]) -> Gang:
    """The gang with each bound pod's job-id annotation as our bind wrote it, where someone overwrote it (any
    who may patch the pod may): one naming no job of the gang (a number Slurm does not have, a job of another
    gang) nor one another release runs (`foreign`: the controller reads such a job before it plans), while a
    job of ours names the pod and ran on its Node, is planned as naming that job (the oldest live one, else
    the last that ended): never that job cancelled as a duplicate of the number written, nor the pod deleted
    for it while it runs, nor its end missed (a hold and the pod's deletion for it, where the number written
    would be read as the job of another gang, not the pod's, every pass). An annotation naming a job of the
    gang is taken at its word (one that ended: the pod goes, its node held)."""
    return replace(gang, pods=tuple(_vouched(pod, gang.jobs, world, foreign) for pod in gang.pods))


def _vouched(pod: Pod, jobs: Sequence[Job], world: World, foreign: frozenset[int]) -> Pod:
    if pod.job_id is None or pod.job_id in foreign or any(job.job_id == pod.job_id for job in jobs):
        return pod  # unbound or no annotation (ours by the marker), another release's, or a job of the gang
    ran = [
        job
        for job in jobs
        if _stands_for(job, pod) and any(world.bindings.get(node) == pod.node_name for node in job.nodes)
    ]
    if not ran:
        return pod
    # the oldest live one (another is a duplicate), else the last that ended (the pod goes, its node held)
    live = [job for job in ran if not job.ended]
    runs = live[0] if live else ran[-1]
    return replace(pod, annotations={**pod.annotations, Keys.SCHEDULER_JOB_ID: str(runs.job_id)})


def _stands_for(job: Job, pod: Pod) -> bool:
    """The job's marker names the pod: only the marker, as anyone may write the job-id annotation on a pod
    (`kubectl debug --copy-to` copies it onto a copy; a copy bound by hand keeps it)."""
    return pod.uid in job.marker.uids


def _bound_to(job: Job, pod: Pod) -> bool:
    """The pod holds resources under this job: the job names it, and its binding names no other job."""
    return pod.holds and pod.uid in job.marker.uids and pod.job_id in (None, job.job_id)


def _rank(job: Job, pods: Sequence[Pod]) -> tuple[bool, int, bool, int]:
    """Which of several live jobs for one pod stands: one a pod runs under, then the one standing for the
    most of the gang's pods (a job naming part of a gang never leaves the rest without one), then one
    running, the oldest."""
    bound = any(_bound_to(job, pod) for pod in pods)
    return not bound, -sum(_stands_for(job, pod) for pod in pods), job.state != "RUNNING", job.job_id


def _duplicate(job: Job, members: Sequence[Pod], better: Job, pods: Sequence[Pod], out: _Out) -> None:
    """A live job naming pods a better-ranked one stands for (`_rank`): its pods go, then it (`duplicate`)."""
    said = _gives_way(job, better, pods)
    holders = [pod for pod in members if _bound_to(job, pod)]
    for pod in holders:
        out.delete(pod, "duplicate", job.job_id, said=said)
    if not holders:
        out.cancel(job, "duplicate", said=said)


def _gives_way(job: Job, better: Job, pods: Sequence[Pod]) -> str:
    """Why `job` gives way to `better`, in the order `_rank` weighs it: a pod runs under the better one, the
    better one names more of the gang (`job` names part of it: the gang grew after its submit), or the two
    name the same number of pods (the better runs, or is older)."""
    runs = next((pod for pod in pods if _bound_to(better, pod)), None)
    if runs is not None:
        return f"gives way to Slurm job {better.job_id}, which pod {runs.namespace}/{runs.name} runs under"
    mine, theirs = (sum(_stands_for(one, pod) for pod in pods) for one in (job, better))
    if mine < theirs:
        return f"names {mine} of the gang's pods, Slurm job {better.job_id} names {theirs}"
    return f"duplicates Slurm job {better.job_id} for pods both name"


def _slurm_end(job: Job, members: Sequence[Pod], now: float) -> str:
    """Why Slurm is taking this live job's resources back from its pods ("" while it is not)."""
    if job.state == "SUSPENDED":
        return "suspended"
    if job.preempt_time > 0:
        return "preempted"
    if job.state == "PENDING":
        return "requeued" if any(_bound_to(job, pod) for pod in members) else ""
    due = _deadline(job, members)
    return "time-limit" if due is not None and now >= due else ""


def _deadline(job: Job, members: Sequence[Pod]) -> float | None:
    """When the pods must start stopping to be gone by the job's end (its time limit): None without one. A
    grace period longer than half the job's run is cut to that half: a pod is never stopped for the time
    limit before it has run half of it (deleted as the job starts, it would run nothing)."""
    grace = max((pod.grace_period_s for pod in members), default=0)
    return job.end_time - min(grace, _half_run(job)) if job.end_time > 0 else None


def _half_run(job: Job) -> float:
    """Half the job's run, start to end: the most of it its pods' stop takes (unbounded without a start)."""
    return (job.end_time - job.start_time) / 2 if job.start_time > 0 else math.inf


def _cut(job: Job, pod: Pod, end: str) -> str:
    """What the deletion says when the pod's grace period was cut to half its job's run ("": it was not)."""
    run = job.end_time - job.start_time
    if end != "time-limit" or pod.grace_period_s <= _half_run(job):
        return ""
    return (
        f"{SAID[end]} (spec.terminationGracePeriodSeconds {pod.grace_period_s} s is more than half its run "
        f"of {run:g} s: cut to the time left)"
    )


def _live(job: Job, members: Sequence[Pod], gang: Gang, out: _Out) -> None:
    runs = _runs_elsewhere(job, members)
    if runs is not None:  # none of its pods can run under it: it goes, and nothing of theirs is ours to end
        said = f"gives way to Slurm job {runs.job_id}, which pod {runs.namespace}/{runs.name} runs under"
        out.cancel(job, "duplicate", said=said)
        return
    now = out.world.now
    end = _slurm_end(job, members, now)
    if end:  # the pods go (before the deadline, if there is one) and the job once none holds resources
        left = (
            max(0, int(job.end_time - now)) if job.end_time and end in ("preempted", "time-limit") else None
        )
        for pod in members:
            if not pod.ended:
                out.delete(pod, end, job.job_id, left, said=_cut(job, pod, end))
        if not any(_bound_to(job, pod) for pod in members):
            out.cancel(job, end)
        return
    due = _deadline(job, members)
    if due is not None:
        out.times.append(due)
    present = {pod.uid for pod in gang.pods}
    gone = bool(job.marker.uids - present)
    if gone or any(pod.ended for pod in members):
        _over(job, members, gone, out)
        return
    if job.state == "PENDING":
        reason = "" if job.reason in ("", "None") else f" ({job.reason})"
        for pod in members:
            out.condition(pod, PENDING, f"Slurm job {job.job_id} is pending{reason}")
        return
    # its Node object deleted, its kubelet may still run it: deleted with its own grace period (the kubelet's
    # to take), and the job, holding its CPUs in Slurm, stays until it is gone (`_over`)
    lost = [pod for pod in members if pod.node_name and pod.node_name not in out.world.nodes]
    for pod in lost:
        out.delete(pod, "node-deleted", job.job_id)
    unbound = [pod for pod in members if not pod.node_name]
    if lost or not unbound:
        return
    if "CONFIGURING" in job.flags:
        for pod in unbound:
            out.condition(pod, STARTING, f"Slurm job {job.job_id} is starting on {','.join(job.nodes)}")
        return
    _place(job, members, unbound, out)


def _runs_elsewhere(job: Job, members: Sequence[Pod]) -> Pod | None:
    """A pod of the job's, when every one is bound under another job (not ours to rank: another release's,
    which submitted for the same pod, or one of ours that ended): the job never runs a pod, and its end or
    its pods' are not its to act on (deleting them would end pods another job runs)."""
    if all(pod.job_id not in (None, job.job_id) for pod in members):
        return members[0] if members else None
    return None


def _over(job: Job, members: Sequence[Pod], gone: bool, out: _Out) -> None:
    """Kubernetes ended (part of) the gang: the rest goes too (a gang ends together, but a pod that succeeded
    leaves the others to finish), and the job once no pod holds resources."""
    deleted = gone or any(pod.deleting for pod in members)
    failed = any(pod.phase == "Failed" for pod in members)
    cause = "pod-deleted" if deleted else "pod-failed" if failed else "pod-succeeded"
    if deleted or failed:
        for pod in members:
            if not pod.ended:
                out.delete(pod, cause, job.job_id)
    elif not all(pod.ended for pod in members):
        return  # some succeeded, the others still run
    if not any(_bound_to(job, pod) for pod in members):
        out.cancel(job, cause)


def _place(job: Job, members: Sequence[Pod], unbound: Sequence[Pod], out: _Out) -> None:
    """Bind every unbound pod where Slurm allocated its job, or none: cancel the job, say why."""
    used = {pod.node_name for pod in members if pod.node_name}
    free = [node for node in sorted(job.nodes) if out.world.bindings.get(node) not in used]
    binds, why = _fit(job, unbound, free, out.world)
    if len(free) != len(unbound):
        why = f"Slurm allocated {len(job.nodes)} node(s) for {len(members)} pod(s)"
    if not why:
        out.actions.extend(binds)
        return
    if used:  # some were placed before (a restart between binds): the whole gang goes, then its job
        for pod in members:
            out.delete(pod, "placement", job.job_id)
        return
    retry = f"the job is cancelled and submitted again after {out.options.retry_after_s:g} s"
    for pod in unbound:
        out.condition(pod, PLACEMENT_FAILED, f"Slurm job {job.job_id} cannot run here: {why}; {retry}")
    out.cancel(job, "placement", why)


def _fit(job: Job, pods: Sequence[Pod], free: Sequence[str], world: World) -> tuple[list[Bind], str]:
    """Each pod to its Slurm node's Kubernetes Node, checked as kube-scheduler would; or why not."""
    nodes: dict[str, Node] = dict(world.nodes)
    binds: list[Bind] = []
    for pod, slurm_node in zip(pods, free, strict=False):
        kube = world.bindings.get(slurm_node)
        if kube is None:
            return [], f"Slurm node {slurm_node} is not bound to a Kubernetes Node"
        node = nodes.get(kube)
        if node is None:
            return [], f"Kubernetes Node {kube} (Slurm node {slurm_node}) does not exist"
        requests = canonical_requests(pod)
        unfit = misfit(pod, requests, node)
        if unfit:
            return [], f"Node {kube} (Slurm node {slurm_node}): {unfit}"
        nodes[kube] = placed(node, requests)
        binds.append(Bind(pod=pod.ref, node=kube, job_id=job.job_id, slurm_node=slurm_node))
    return binds, ""


def _released(pod: Pod, ended: Sequence[Job], unplaced: frozenset[int]) -> Job | None:
    """The ended job of this pod we cancelled ourselves as it could not be placed: the condition says so, or
    the controller remembers the cancel (the job cache can show it ended before the pod cache shows our
    condition)."""
    if ended and ended[-1].job_id in unplaced:
        return ended[-1]
    scheduled = pod.scheduled
    if scheduled is None or scheduled.reason != PLACEMENT_FAILED:
        return None
    match = _JOB_IN_MESSAGE.match(scheduled.message)
    return next((job for job in ended if match and job.job_id == int(match[1])), None)


def _ran_under(pod: Pod, jobs: Sequence[Job], foreign: frozenset[int]) -> tuple[Job | None, int | None]:
    """The job a bound pod runs under (its binding's annotation, else the last job naming it) and its id;
    (None, None) when none is known: not a pod of ours."""
    if pod.job_id is not None:
        job = next((job for job in jobs if job.job_id == pod.job_id), None)
        if job is not None and pod.uid not in job.marker.uids:
            return None, None  # a copy bound by hand: the annotation names a job that does not name it
        if job is None and pod.job_id in foreign:
            return None, None  # bound by another release for its live job: not gone, not ours
        return job, pod.job_id
    named = [job for job in jobs if pod.uid in job.marker.uids]
    return (named[-1], named[-1].job_id) if named else (None, None)


def _cause(job: Job | None) -> str:
    """Why an ended (or vanished) job's pods go."""
    return "job-gone" if job is None else SLURM_CAUSES.get(job.state, "job-ended")


def _unclaimed(
    gang: Gang, claimed: set[str], submitted: int | None, unplaced: frozenset[int], out: _Out
) -> None:
    """Pods no live job stands for: left by a job Slurm ended (deleted), released by us (submitted again
    after a while), or waiting for their job to be submitted."""
    ended = [job for job in gang.jobs if job.ended]
    for pod in gang.pods:
        if pod.uid in claimed or pod.ended:
            continue
        if pod.node_name:
            job, jid = _ran_under(pod, gang.jobs, out.foreign)
            if jid is not None:  # ours, and its job ended or is gone from Slurm
                out.delete(pod, _cause(job), jid)
            continue
        theirs = [job for job in ended if _stands_for(job, pod)]
        released = _released(pod, theirs, unplaced)
        if released is not None:
            out.released.add(pod.uid)
            due = released.end_time + out.options.retry_after_s
            if out.world.now < due:
                out.deferred.add(pod.uid)
                out.times.append(due)
        elif theirs:
            out.delete(pod, _cause(theirs[-1]), theirs[-1].job_id)
    _submit(gang, claimed, submitted, out)


def _submit(gang: Gang, claimed: set[str], submitted: int | None, out: _Out) -> None:
    want = gang.want
    if want is None:
        return
    if submitted is not None:
        out.blocked = f"waiting for Slurm job {submitted} to show in the job cache"
        return
    if isinstance(want, JobRequest):
        if not {ref.uid for ref in want.pods} & (out.deleted | out.deferred):
            out.actions.append(Submit(request=want))
        return
    # only the pods no live job stands for: the others show their job's state (else the two take turns)
    reason, message = (REFUSED, want.text) if isinstance(want, Refusal) else (WAITING, want.message)
    for pod in gang.pods:
        if not (pod.ended or pod.node_name or pod.uid in claimed | out.deleted | out.released):
            out.condition(pod, reason, message)


def _holds(gang: Gang, out: _Out) -> None:
    """The nodes to hold: where a pod of ours still holds resources Slurm has taken, or is taking, back."""
    for pod in gang.pods:
        if not pod.holds:
            continue
        job, jid = _ran_under(pod, gang.jobs, out.foreign)
        if jid is None:
            continue  # bound by someone else: not ours to hold
        if job is None or job.ended:
            cause = _cause(job)
        else:
            cause = _slurm_end(job, [other for other in gang.pods if _stands_for(job, other)], out.world.now)
        for node, kube in sorted(out.world.bindings.items()):
            if cause and kube == pod.node_name and (job is None or not job.nodes or node in job.nodes):
                out.holds[node] = f"pod {pod.namespace}/{pod.name} still runs: Slurm job {jid} {SAID[cause]}"
                if job is None:
                    out.gone[node] = jid
