"""Knobs of the sync decisions (the CLI fills them in; defaults follow the contract)."""

from __future__ import annotations

from dataclasses import dataclass

from syncer.controllers.sync.reason import UNSAFE_CHARS
from syncer.model.keys import DEFAULT_CORDON_REASON_ANNOTATIONS, DEFAULT_CORDON_REASON_LABELS


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
    """

    owner_prefix: str = "k8s: "
    ready_grace_s: float = 60.0
    drain_on_conditions: tuple[tuple[str, str], ...] = ()
    cordon_on_slurm_drain: bool = False
    max_reason_bytes: int = 256
    cordon_reason_annotations: tuple[str, ...] = DEFAULT_CORDON_REASON_ANNOTATIONS
    cordon_reason_labels: tuple[str, ...] = DEFAULT_CORDON_REASON_LABELS

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
