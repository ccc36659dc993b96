"""When a job on powered-up nodes may start (issue 47): the answer to slurm-syncer's PrologSlurmctld. Pure.

slurmctld keeps a job on a node it powers up CONFIGURING until its periodic check (every 30 s) finds the
node registered, or until the job's PrologSlurmctld ends while the nodes are ready (`prolog_running_decr`
-> `test_job_nodes_ready`: none powered down or powering up). The prolog asks the syncer, which answers
once every node that was powering up is registered (Slurm shows it neither powering up, powered down nor
NOT_RESPONDING) and its pods are Ready; at once for a job with no such node, or for a node that failed
(DOWN, forced down: Slurm requeues the job; waiting would only hold it). Nodes that were never seen powering
up are not waited on, whatever their pods show: an ordinary job is never held by this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from syncer.model.kube import KubePod
from syncer.model.slurm import SlurmNode


class NodeReadiness(Enum):
    UNKNOWN = "unknown"  # not in the syncer's Slurm data: nothing to wait for
    POWERING = "powering"  # powered down (the job's power-up comes) or powering up: slurmd not registered
    SILENT = "notResponding"  # not powering, but slurmctld cannot reach its slurmd: waited on only if watched
    FAILED = "failed"  # DOWN, or being powered down: the job is requeued or ends, it will not start here
    POD_NOT_READY = "podNotReady"  # registered, but a pod of it is not Ready
    READY = "ready"  # registered and every pod of it Ready (or none)


# not POWER_UP: requested, it comes with POWERED_DOWN; left on a node whose slurmd registered before Slurm's
# power-save pass took the request, it stays set while the node is up (Slurm's own readiness ignores it)
POWERING_FLAGS = frozenset({"POWERING_UP", "POWERED_DOWN"})
FAILED_FLAGS = frozenset({"POWERING_DOWN", "POWER_DOWN", "POWER_DOWN_FORCE"})


def pod_ready(pod: KubePod) -> bool:
    cond = pod.condition("Ready")
    return cond is not None and cond.status == "True" and not pod.terminating


def node_readiness(slurm: SlurmNode | None, pods: Sequence[KubePod]) -> NodeReadiness:
    if slurm is None:
        return NodeReadiness.UNKNOWN
    if slurm.base_state == "DOWN" or slurm.state & FAILED_FLAGS:
        return NodeReadiness.FAILED
    if slurm.state & POWERING_FLAGS:
        return NodeReadiness.POWERING
    if "NOT_RESPONDING" in slurm.state:
        return NodeReadiness.SILENT
    if not all(pod_ready(pod) for pod in pods):
        return NodeReadiness.POD_NOT_READY
    return NodeReadiness.READY


@dataclass(frozen=True)
class JobVerdict:
    done: bool  # the prolog may end now
    waiting_for: tuple[str, ...]  # the nodes it still waits for (empty once done)
    failed: tuple[str, ...]  # watched nodes that failed


def job_verdict(readiness: Mapping[str, NodeReadiness], watched: Iterable[str]) -> JobVerdict:
    """`readiness` of every node of the job; `watched`: those seen powering up since the prolog asked
    (the caller adds this call's POWERING nodes before it asks). Done once no watched node is powering or
    waits for its pods, or at once when one failed."""
    seen = set(watched)
    failed = tuple(sorted(n for n in seen if readiness.get(n) is NodeReadiness.FAILED))
    if failed:
        return JobVerdict(True, (), failed)
    waiting = tuple(
        sorted(
            n
            for n in seen
            if readiness.get(n) in (NodeReadiness.POWERING, NodeReadiness.SILENT, NodeReadiness.POD_NOT_READY)
        )
    )
    return JobVerdict(not waiting, waiting, ())


def newly_watched(readiness: Mapping[str, NodeReadiness]) -> set[str]:
    """The nodes to watch from now on: those powering up (or powered down, their power-up to come)."""
    return {name for name, state in readiness.items() if state is NodeReadiness.POWERING}
