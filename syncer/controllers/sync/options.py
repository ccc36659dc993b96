"""Knobs of the sync controller (its decisions, the safety valve, the missing-node grace) and their rows of
the option table (defaults follow the contract)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from syncer.controllers.sync.valve import DrainValve
from syncer.model.keys import DEFAULT_CORDON_REASON_ANNOTATIONS, DEFAULT_CORDON_REASON_LABELS
from syncer.model.reason import UNSAFE_CHARS
from syncer.runtime.options import Option, fraction, label_key, parse_bool, parse_duration, positive_int

_VALVE = DrainValve()


@dataclass(frozen=True)
class SyncOptions:
    """How the syncer decides; see docs/contract.md.

    - `owner_prefix`: drain reasons the syncer writes start with it; any other reason belongs to someone else.
    - `ready_grace_s`: how long a Node's Ready may be other than True before that is a drain cause.
    - `drain_on_conditions`: (condition type, status) pairs that are drain causes,
      e.g. ("GpuUnhealthy", "True").
    - `cordon_on_slurm_drain`: a drain that started in Slurm cordons the Kubernetes Node.
    - `max_reason_bytes`: cap of a drain reason in UTF-8 bytes, prefix included.
    - `cordon_reason_annotations`: Node annotations whose text explains a cordon; the first present wins.
    - `cordon_reason_labels`: Node labels read the same way when no such annotation is present.
    - `max_drain_fraction`, `safety_valve_min_nodes`: the safety valve's (valve.DrainValve).
    - `missing_grace_s`: a bound Slurm node Slurm does not know is reported after this long.

    `owner_prefix` is the syncer's (`ControllerContext.owner_prefix`, --owner-prefix): the controller puts
    the context's in.
    """

    owner_prefix: str = "k8s: "
    ready_grace_s: float = 60.0
    drain_on_conditions: tuple[tuple[str, str], ...] = ()
    cordon_on_slurm_drain: bool = False
    max_reason_bytes: int = 256
    cordon_reason_annotations: tuple[str, ...] = DEFAULT_CORDON_REASON_ANNOTATIONS
    cordon_reason_labels: tuple[str, ...] = DEFAULT_CORDON_REASON_LABELS
    max_drain_fraction: float = _VALVE.max_fraction
    safety_valve_min_nodes: int = _VALVE.min_nodes
    missing_grace_s: float = 60.0

    def __post_init__(self) -> None:
        # An empty or control-laden prefix would make every reason (or none) look like ours.
        if not self.owner_prefix.strip():
            raise ValueError("owner_prefix must not be empty")
        if UNSAFE_CHARS.search(self.owner_prefix):
            raise ValueError("owner_prefix must not contain control characters")
        if len(self.owner_prefix.encode()) >= self.max_reason_bytes:
            raise ValueError("max_reason_bytes must leave room after owner_prefix")
        if self.ready_grace_s < 0:
            raise ValueError("ready_grace_s must not be negative")
        for pair in self.drain_on_conditions:
            if len(pair) != 2 or not pair[0] or not pair[1]:
                raise ValueError(f"drain_on_conditions entries are (type, status) pairs, got {pair!r}")


def condition(text: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*([A-Za-z][A-Za-z0-9_.-]*)=(True|False|Unknown)\s*", text)
    if match is None:
        raise ValueError("Type=Status with Status True, False or Unknown, e.g. GpuUnhealthy=True")
    return match.group(1), match.group(2)


_SYNC = SyncOptions()
OPTIONS = (
    Option(
        "ready-grace-period",
        parse_duration,
        _SYNC.ready_grace_s,
        "Ready not True for this long drains the Slurm node",
        "Sync",
        shown_default="60s",
    ),
    Option(
        "drain-on-condition",
        condition,
        (),
        "Node condition that drains, Type=Status (repeatable), e.g. GpuUnhealthy=True",
        "Sync",
        "list",
    ),
    Option(
        "cordon-on-slurm-drain",
        parse_bool,
        _SYNC.cordon_on_slurm_drain,
        "cordon the Kubernetes Node when a drain starts in Slurm (and lift only such cordons)",
        "Sync",
        "flag",
    ),
    Option(
        "cordon-reason-annotation",
        label_key,
        DEFAULT_CORDON_REASON_ANNOTATIONS,
        "Node annotation whose text becomes the drain reason of a cordon (repeatable, first present wins)",
        "Sync",
        "list",
    ),
    Option(
        "cordon-reason-label",
        label_key,
        DEFAULT_CORDON_REASON_LABELS,
        "Node label whose value becomes the drain reason of a cordon when no cordon-reason-annotation is "
        "present (repeatable, first present wins; NVSentinel's fault-quarantine by default)",
        "Sync",
        "list",
    ),
    Option(
        "max-drain-fraction",
        fraction,
        _SYNC.max_drain_fraction,
        "safety valve: most bound nodes that may newly drain per minute from automatic causes "
        "(Ready past the grace, drain-on-condition); cordons and drain annotations are never held",
        "Sync",
    ),
    Option(
        "safety-valve-min-nodes",
        positive_int,
        _SYNC.safety_valve_min_nodes,
        "safety valve floor: it never trips below this many automatic drains per minute (it trips at the "
        "first drain past max(this - 1, fraction x bound nodes)); at least 2",
        "Sync",
    ),
)


def options_from(values: Mapping[str, Any]) -> SyncOptions:
    """From the loaded option values (`owner_prefix` is the service's: the controller puts it in)."""
    return SyncOptions(
        owner_prefix=values["owner_prefix"],
        ready_grace_s=values["ready_grace_period"],
        drain_on_conditions=tuple(values["drain_on_condition"]),
        cordon_on_slurm_drain=values["cordon_on_slurm_drain"],
        cordon_reason_annotations=values["cordon_reason_annotation"],
        cordon_reason_labels=values["cordon_reason_label"],
        max_drain_fraction=values["max_drain_fraction"],
        safety_valve_min_nodes=values["safety_valve_min_nodes"],
    )
