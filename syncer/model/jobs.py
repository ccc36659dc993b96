"""A Slurm job as the one-pool scheduler sees it (issue 44), and what it asks Slurm for: plain values, decoded
once at the edge (syncer/slurm/jobs.py), read by the scheduler's pure plan and its controller.

Job states as slurmrestd lists them (v0.0.40+): one base state (PENDING, RUNNING, SUSPENDED, COMPLETED,
CANCELLED, FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY) and flags (COMPLETING,
CONFIGURING, REQUEUED, SIGNALING, ...). A job has ended when its base state is not one of the live ones; its
resources are free again once it is not COMPLETING as well (docs/slurm-releases.md, "Jobs for pods").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

LIVE_STATES: frozenset[str] = frozenset({"PENDING", "RUNNING", "SUSPENDED"})
ENDED_STATES: frozenset[str] = frozenset(
    {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
     "OUT_OF_MEMORY"}
)  # fmt: skip
BASE_STATES: frozenset[str] = LIVE_STATES | ENDED_STATES


class NodeAllocation(msgspec.Struct, frozen=True, gc=False):
    """What one node gives a job: its CPUs, memory and GRES (`gres` as Slurm writes it, e.g.
    `gpu:2(IDX:0-1)`; `gpu_indices` reads the device indices)."""

    node: str
    cpus: int
    memory_mb: int
    gres: str = ""

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        return gres_indices(self.gres, "gpu")


class SlurmJob(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One Slurm job: only the fields the scheduler reads. Times are epoch seconds, 0 when Slurm has none."""

    job_id: int
    name: str = ""
    state: frozenset[str] = frozenset()
    reason: str = ""  # the pending reason (`state_reason`: Priority, Resources, ...); "" when "None"
    reason_detail: str = ""  # `state_description`, when Slurm gives one
    marker: str = ""  # `admin_comment`: the pods the job stands for (written by the syncer only)
    partition: str = ""
    account: str = ""
    qos: str = ""
    user: str = ""
    nodes: tuple[str, ...] = ()  # allocated nodes, expanded (empty while pending)
    allocation: tuple[NodeAllocation, ...] = ()  # per allocated node, in `nodes` order
    external: bool = False  # an external job (EXTERNAL_JOB: Slurm allocates, nothing runs); else a batch job
    priority: int = 0
    hold: bool = False
    nice: int = 0
    requeue: bool = False
    restart_count: int = 0  # times Slurm requeued it
    submit_time: int = 0
    start_time: int = 0  # for a pending job: Slurm's expected start, when it has one
    end_time: int = 0  # a running job: its time limit; during a preemption's grace: when it will be ended
    preempt_time: int = 0  # set when Slurm decided to preempt it (the grace window begins)
    time_limit_min: int | None = None  # None: no limit

    @property
    def base_state(self) -> str:
        return base_state_of(self.state)

    @property
    def pending(self) -> bool:
        return "PENDING" in self.state

    @property
    def running(self) -> bool:
        return "RUNNING" in self.state

    @property
    def ended(self) -> bool:
        """Slurm has ended it (it may still be COMPLETING: see `released`)."""
        return job_ended(self.state)

    @property
    def released(self) -> bool:
        """Ended and nothing of it left on its nodes: Slurm may give its CPUs to another job now."""
        return job_ended(self.state) and "COMPLETING" not in self.state

    @property
    def preempting(self) -> bool:
        """Slurm has decided to preempt it and it still runs: the grace window, until `end_time`."""
        return self.preempt_time > 0 and not job_ended(self.state)


def base_state_of(state: frozenset[str]) -> str:
    """The base state in a job's state list ("" when none is known: a newer Slurm's)."""
    for name in state:
        if name in BASE_STATES:
            return name
    return ""


def job_ended(state: frozenset[str]) -> bool:
    return bool(state & ENDED_STATES)


# one GRES of a node's detail: name, optional type and count, then the device indices
_GRES = re.compile(r"([A-Za-z0-9_]+)(?::[^(,]*)?\(IDX:([0-9,-]*)\)")


def gres_indices(detail: str, name: str) -> tuple[int, ...]:
    """Device indices of GRES `name` in Slurm's per-node detail: `gpu:2(IDX:0-1)`, `gpu:a100:1(IDX:3)`,
    several comma-separated; () when none (a GRES without device files has no indices)."""
    found: list[int] = []
    for match in _GRES.finditer(detail):
        if match[1] != name:
            continue
        for item in match[2].split(","):
            bounds = item.split("-")
            if len(bounds) <= 2 and all(bound.isdigit() for bound in bounds):
                found.extend(range(int(bounds[0]), int(bounds[-1]) + 1))
    return tuple(found)


@dataclass(frozen=True)
class JobSubmission:
    """What to ask Slurm for: one job standing for one pod or a gang of pods, with exactly their resources.

    Per node (one pod per node): `nodes=N, tasks_per_node=1, cpus_per_task=C, memory_per_node_mb=M,
    tres_per_node="gres/gpu:G"`. Packed (pods may share a node): `tasks=N, cpus_per_task=C,
    memory_per_cpu_mb=M/C, tres_per_task="gres/gpu:G"`; a node's share of pods is then its CPUs / C.
    Memory must be given: a job without it gets each node's whole memory (measured, docs/slurm-releases.md).
    Where the release has no external jobs (24.11) the client submits a placeholder batch job instead, when
    the caller allows it (`SlurmClient.submit_job`)."""

    name: str
    marker: str  # written to `admin_comment`: only Slurm administrators can change it afterwards
    cpus_per_task: int = 1
    nodes: int | None = None  # exactly this many nodes (None: as many as the tasks need)
    tasks: int | None = None
    tasks_per_node: int | None = None
    memory_per_node_mb: int | None = None
    memory_per_cpu_mb: int | None = None
    tres_per_node: str = ""  # "gres/gpu:1", "gres/gpu:a100:2"
    tres_per_task: str = ""
    partition: str = ""
    account: str = ""
    qos: str = ""
    reservation: str = ""
    constraints: str = ""  # node features, Slurm's --constraint syntax
    time_limit_min: int | None = None
    priority: int | None = None  # an administrator's absolute priority (0 holds the job)
    nice: int | None = None
    hold: bool = False
    requeue: bool = False  # a pod cannot move: by default Slurm must not run the job again elsewhere
    required_nodes: tuple[str, ...] = ()
    excluded_nodes: tuple[str, ...] = ()
