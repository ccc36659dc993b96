"""A Slurm node as the syncer sees it: only the fields it reads, decoded once."""

from __future__ import annotations

import msgspec

from syncer.model.reason import MAX_MESSAGE_BYTES, sanitise_capped

# Base states are mutually exclusive; everything else in Slurm's state list is a flag.
BASE_STATES: frozenset[str] = frozenset({"IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN"})
DRAIN_FLAGS: frozenset[str] = frozenset({"DRAIN", "DRAINING", "DRAINED"})
UNHEALTHY_FLAGS: frozenset[str] = frozenset({"DOWN", "FAIL", "NOT_RESPONDING"})
BUSY_FLAGS: frozenset[str] = frozenset({"COMPLETING"})
# Slurm's power saving: a node powering up is NOT_RESPONDING until its slurmd registers, and a powered-down
# one has no slurmd: neither is a health fault (measured on 26.05.5, docs/slurm-releases.md).
POWER_FLAGS: frozenset[str] = frozenset(
    {"POWERING_UP", "POWER_UP", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"}
)
POWERED_DOWN_FLAGS: frozenset[str] = frozenset({"POWERED_DOWN", "POWERING_DOWN"})
# Flags that say nothing about drain, health or jobs to the syncer: shown in the state annotation,
# never a cause of an action. From the node state enum of v0.0.40 .. v0.0.45 (26.05's OpenAPI):
# EXTERNAL and BLOCKED are listed from v0.0.44, POWER_DOWN_ASAP and POWER_DOWN_FORCE from v0.0.45
# (26.05 shows a power-down-asap node as DRAIN+POWER_DOWN with reason "POWER_DOWN_ASAP": a foreign drain).
INFORMATIONAL_FLAGS: frozenset[str] = frozenset(
    {
        "INVALID", "EXTERNAL", "RESERVED", "UNDRAIN", "CLOUD", "RESUME", "POWERED_DOWN", "POWERING_UP",
        "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_CANCELED", "POWERING_DOWN", "DYNAMIC_FUTURE",
        "REBOOT_ISSUED", "PLANNED", "INVALID_REG", "POWER_DOWN", "POWER_UP", "POWER_DRAIN",
        "POWER_DOWN_ASAP", "POWER_DOWN_FORCE", "DYNAMIC_NORM", "BLOCKED",
    }
)  # fmt: skip
# Every flag a supported slurmrestd can list; anything else is logged once (a newer Slurm).
KNOWN_FLAGS: frozenset[str] = BASE_STATES | DRAIN_FLAGS | UNHEALTHY_FLAGS | BUSY_FLAGS | INFORMATIONAL_FLAGS


class SlurmNode(msgspec.Struct, frozen=True, kw_only=True, gc=False):  # no cycles: skip GC tracking
    """One Slurm node. `state` holds upper-case flags exactly as slurmrestd lists them."""

    name: str
    state: frozenset[str]
    reason: str = ""
    reason_set_by: str = ""
    reason_changed_at: int = 0  # epoch seconds; 0 when Slurm has none
    comment: str = ""
    features: tuple[str, ...] = ()
    active_features: tuple[str, ...] = ()
    topology: str = ""  # "<topology>:<unit>[,...]" (REST v0.0.43+; empty before)
    partitions: tuple[str, ...] = ()
    cpus: int = 0
    alloc_cpus: int = 0
    real_memory_mb: int = 0
    alloc_memory_mb: int = 0
    gres: str = ""
    gres_used: str = ""
    boot_time: int = 0
    last_busy: int = 0
    # Derived, never given: `reason` sanitised and capped at MAX_MESSAGE_BYTES, what a condition, an Event or
    # a log may show of it, made safe once here where Slurm's text comes in. `__post_init__` sets it at every
    # construction (the decoder's, a test's, `msgspec.structs.replace`), over whatever was passed, so it
    # always follows `reason`, and equality and hash stay a function of Slurm's data. `reason` itself stays
    # raw: it is compared with our own drain reasons, and a cleaned admin's reason could read as ours.
    reason_message: str = ""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "reason_message", reason_message_of(self.reason))

    # The properties delegate to plain functions: mutmut 3 does not mutate decorated functions, so the
    # logic lives where scripts/mutation can measure its tests.
    @property
    def base_state(self) -> str:
        return base_state_of(self.state)

    @property
    def drain_flag(self) -> bool:
        """True while the DRAIN flag is set (draining or drained)."""
        return "DRAIN" in self.state

    @property
    def drained(self) -> bool:
        """Drain complete: DRAIN set and nothing allocated or completing on the node."""
        return drain_complete(self.state)

    @property
    def unhealthy(self) -> bool:
        return bool(unhealthy_flags(self.state))

    @property
    def busy(self) -> bool:
        """Runs or finishes jobs: must not be removed."""
        return runs_jobs(self.state)

    @property
    def state_text(self) -> str:
        """`IDLE+DRAIN` style text, base state first, flags sorted: stable for annotations."""
        return state_text_of(self.state)


def reason_message_of(reason: str) -> str:
    """`reason` sanitised and capped at MAX_MESSAGE_BYTES: "" for no reason without any regex work, and a
    clean reason is the same string (one copy kept per node, not two)."""
    if not reason:
        return ""
    message = sanitise_capped(reason, MAX_MESSAGE_BYTES)
    return reason if message == reason else message


def base_state_of(state: frozenset[str]) -> str:
    for flag in ("DOWN", "ERROR", "FUTURE", "ALLOCATED", "MIXED", "IDLE", "UNKNOWN"):
        if flag in state:
            return flag
    return "UNKNOWN"


def unhealthy_flags(state: frozenset[str]) -> frozenset[str]:
    """DOWN, FAIL, NOT_RESPONDING; NOT_RESPONDING not while Slurm powers the node up or down."""
    flags = state & UNHEALTHY_FLAGS
    return flags - {"NOT_RESPONDING"} if state & POWER_FLAGS else flags


def powered_down(state: frozenset[str]) -> bool:
    """Slurm powers the node down or has: it runs no new job until powered up, so a drain adds nothing."""
    return bool(state & POWERED_DOWN_FLAGS) and not state & {"POWERING_UP", "POWER_UP"}


def drain_complete(state: frozenset[str]) -> bool:
    return (
        "DRAIN" in state and base_state_of(state) not in ("ALLOCATED", "MIXED") and "COMPLETING" not in state
    )


def runs_jobs(state: frozenset[str]) -> bool:
    return base_state_of(state) in ("ALLOCATED", "MIXED") or "COMPLETING" in state


def state_text_of(state: frozenset[str]) -> str:
    base = base_state_of(state)
    return "+".join([base, *sorted(state - {base})])
