"""msgspec shapes of slurmrestd responses, holding only the fields the syncer reads.

The node shape is the same for v0.0.40 .. v0.0.45 (checked live on 24.11 and 26.05).
"""

from __future__ import annotations

import msgspec
import structlog

from syncer.model.slurm import KNOWN_FLAGS, SlurmNode

log = structlog.get_logger("syncer.slurm")


class Number(msgspec.Struct, gc=False):
    """Slurm's wrapper for numbers that may be unset or infinite."""

    set: bool = False
    infinite: bool = False
    number: int = 0


MaybeNumber = Number | int | None


def unwrap(value: MaybeNumber) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    return value.number if value.set and not value.infinite else 0


class Message(msgspec.Struct):
    description: str = ""
    error_number: int = 0
    error: str = ""
    source: str = ""


class Envelope(msgspec.Struct):
    errors: list[Message] = []
    warnings: list[Message] = []


class RawNode(msgspec.Struct, gc=False):
    name: str
    state: list[str] = []
    reason: str | None = None
    reason_set_by_user: str | None = None
    reason_changed_at: MaybeNumber = None
    comment: str | None = None
    features: list[str] | str = []
    active_features: list[str] | str = []
    topology: str | None = None
    partitions: list[str] = []
    cpus: int = 0
    alloc_cpus: int = 0
    real_memory: int = 0
    alloc_memory: int = 0
    gres: str | None = None
    gres_used: str | None = None
    boot_time: MaybeNumber = None
    last_busy: MaybeNumber = None

    def to_node(self) -> SlurmNode:
        return SlurmNode(
            name=self.name,
            state=_flags(self.state),
            reason=self.reason or "",
            reason_set_by=self.reason_set_by_user or "",
            reason_changed_at=unwrap(self.reason_changed_at),
            comment=self.comment or "",
            features=_names(self.features),
            active_features=_names(self.active_features),
            topology=self.topology or "",
            partitions=tuple(self.partitions),
            cpus=self.cpus,
            alloc_cpus=self.alloc_cpus,
            real_memory_mb=self.real_memory,
            alloc_memory_mb=self.alloc_memory,
            gres=self.gres or "",
            gres_used=self.gres_used or "",
            boot_time=unwrap(self.boot_time),
            last_busy=unwrap(self.last_busy),
        )


_FLAG_SETS: dict[tuple[str, ...], frozenset[str]] = {}


def _flags(state: list[str]) -> frozenset[str]:
    """Few distinct state lists exist in a cluster: share one frozenset per list."""
    key = tuple(state)
    flags = _FLAG_SETS.get(key)
    if flags is None:
        if len(_FLAG_SETS) > 4096:  # bounded: unusual clusters must not grow this forever
            _FLAG_SETS.clear()
        flags = _FLAG_SETS[key] = frozenset(flag.upper() for flag in state)
        _note_unknown(flags - KNOWN_FLAGS)
    return flags


_UNKNOWN_SEEN: set[str] = set()


def _note_unknown(unknown: frozenset[str]) -> None:
    """A flag no supported Slurm lists: said once per flag (it never causes an action)."""
    for flag in sorted(unknown - _UNKNOWN_SEEN):
        if len(_UNKNOWN_SEEN) < 256:
            _UNKNOWN_SEEN.add(flag)
            log.warning(
                "slurm_state_flag_unknown",
                flag=flag,
                effect="shown in the state annotation, never a cause of an action",
            )


def _names(value: list[str] | str) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part for part in value.split(",") if part)
    return tuple(value)


class NodesResponse(Envelope):
    nodes: list[RawNode] = []
    last_update: MaybeNumber = None


class NodeListResponse(Envelope):
    """A full list: each node kept as its raw JSON here and decoded a chunk at a time (client.py)."""

    nodes: list[msgspec.Raw] = []
    last_update: MaybeNumber = None


class PartitionNodes(msgspec.Struct, frozen=True):
    configured: str = ""
    total: int = 0


class PartitionCpus(msgspec.Struct, frozen=True):
    total: int = 0


class RawPartition(msgspec.Struct):
    name: str
    nodes: PartitionNodes = PartitionNodes()
    cpus: PartitionCpus = PartitionCpus()


class PartitionsResponse(Envelope):
    partitions: list[RawPartition] = []


class Partition(msgspec.Struct, frozen=True):
    name: str
    node_list: str
    total_nodes: int
    total_cpus: int


class RawJob(msgspec.Struct):
    job_id: int = 0
    name: str = ""
    job_state: list[str] | str = []
    partition: str = ""
    nodes: str = ""
    user_name: str = ""
    end_time: MaybeNumber = None  # a running job: its start plus its time limit


class JobsResponse(Envelope):
    jobs: list[RawJob] = []


class Job(msgspec.Struct, frozen=True):
    job_id: int
    name: str
    states: frozenset[str]
    partition: str
    nodes: str
    user: str
    end_time: int = 0  # epoch seconds; 0 when Slurm gives none


class RawReservation(msgspec.Struct):
    """A reservation as GET /reservations/ answers it (v0.0.42 .. v0.0.45 alike). slurmrestd does not
    return a reservation's comment (measured on 26.05.5), so ownership cannot be read from it."""

    name: str
    node_list: str | list[str] = ""
    start_time: MaybeNumber = None
    end_time: MaybeNumber = None
    flags: list[str] = []


class ReservationsResponse(Envelope):
    reservations: list[RawReservation] = []


class Reservation(msgspec.Struct, frozen=True):
    name: str
    nodes: tuple[str, ...]  # expanded, sorted
    start: int  # epoch seconds
    end: int
    flags: frozenset[str]


class PingEntry(msgspec.Struct):
    hostname: str = ""
    pinged: str = ""
    responding: bool | None = None  # absent before v0.0.42: `pinged` says "UP" there
    mode: str = ""  # "primary" or "backup" (v0.0.42; v0.0.43+ has only `primary`)
    primary: bool | None = None

    # The properties delegate to plain functions: mutmut 3 does not mutate decorated functions.
    @property
    def up(self) -> bool:
        return ping_up(self.responding, self.pinged)

    @property
    def is_primary(self) -> bool:
        return ping_primary(self.primary, self.mode)


def ping_up(responding: bool | None, pinged: str) -> bool:
    """`responding` where the API gives it, else whether `pinged` says UP (before v0.0.42)."""
    return responding if responding is not None else pinged.upper() == "UP"


def ping_primary(primary: bool | None, mode: str) -> bool:
    """`primary` where the API gives it, else whether `mode` says primary (v0.0.42)."""
    return primary if primary is not None else mode == "primary"


class PingResponse(Envelope):
    pings: list[PingEntry] = []


class ConfController(msgspec.Struct):
    machine: str = ""  # SlurmctldHost's name (what ping calls `hostname`)
    address: str = ""  # its address when slurm.conf gives one: SlurmctldHost=machine(address)


class SlurmctldConf(msgspec.Struct):
    """What `GET /conf` (v0.0.45+) tells about where slurmctld listens and whether it serves metrics."""

    port: int = msgspec.field(default=0, name="SlurmctldPort")
    controllers: list[ConfController] = []
    metrics_type: str = msgspec.field(default="", name="MetricsType")
    # ["KeepPartInfo", ...]: without KeepPartInfo a reconfigure deletes partitions made over REST and
    # kills their jobs (measured on 26.05.5), so partitions are written only where it is present
    reconfig_flags: list[str] = msgspec.field(default_factory=list, name="ReconfigFlags")

    # Power saving (issue 39). SuspendTime is {"set","infinite","number"}: NONE and INFINITE both read
    # set=false, infinite=true (measured on 26.05.5); the others are plain values, "" and [] when unset.
    suspend_time: MaybeNumber = msgspec.field(default=None, name="SuspendTime")
    resume_timeout: int = msgspec.field(default=0, name="ResumeTimeout")
    suspend_program: str = msgspec.field(default="", name="SuspendProgram")
    resume_program: str = msgspec.field(default="", name="ResumeProgram")
    suspend_exc_nodes: list[str] = msgspec.field(default_factory=list, name="SuspendExcNodes")
    suspend_exc_parts: list[str] = msgspec.field(default_factory=list, name="SuspendExcParts")
    suspend_exc_states: list[str] = msgspec.field(default_factory=list, name="SuspendExcStates")
    # slurm-syncer's PrologSlurmctld (issue 47): a list on 26.05.5 (slurm.conf may name several); the
    # timeout {"set": false, ...} when unset
    prolog_slurmctld: list[str] | str = msgspec.field(default_factory=list, name="PrologSlurmctld")
    prolog_timeout: MaybeNumber = msgspec.field(default=None, name="PrologTimeout")

    # Preemption (issue 45): with preempt/partition_prio a node joining a higher-tier partition has its
    # running lower-tier jobs preempted (measured on 26.05.5: PREEMPTED 2 s after the join)
    preempt_type: str = msgspec.field(default="", name="PreemptType")
    preempt_mode: list[str] | str = msgspec.field(default_factory=list, name="PreemptMode")

    @property
    def keeps_partitions(self) -> bool:
        return keeps_partitions(self.reconfig_flags)

    @property
    def preempts_by_partition(self) -> str:
        """How slurmctld preempts by partition priority ("PreemptType=..., PreemptMode=..."), or ""."""
        return preempts_by_partition(self.preempt_type, self.preempt_mode)


def keeps_partitions(reconfig_flags: list[str]) -> bool:
    return any(flag.lower() == "keeppartinfo" for flag in reconfig_flags)


def preempts_by_partition(preempt_type: str, preempt_mode: list[str] | str) -> str:
    listed = preempt_mode.split(",") if isinstance(preempt_mode, str) else preempt_mode
    modes = [m.strip().upper() for m in listed if m.strip()]
    if preempt_type != "preempt/partition_prio" or not modes or modes == ["OFF"]:
        return ""
    return f"PreemptType={preempt_type}, PreemptMode={','.join(modes)}"


class ConfResponse(Envelope):
    slurm_conf: SlurmctldConf = msgspec.field(default_factory=SlurmctldConf)


class DiagResponse(Envelope):
    statistics: dict[str, object] = {}
