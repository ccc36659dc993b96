"""One node update as slurmrestd takes it (`POST /node/{name}`, or `POST /nodes/` for many nodes): a value,
so identical updates of many nodes can be recognised and sent together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syncer.model.slurm import SlurmNode


@dataclass(frozen=True)
class NodeUpdate:
    state: tuple[str, ...] | None = None  # ("DRAIN",) with a reason, ("UNDRAIN",)
    reason: str | None = None
    comment: str | None = None
    # Both lists are replaced by an update: the caller sends the features it does not own unchanged.
    features: tuple[str, ...] | None = None
    features_act: tuple[str, ...] | None = None
    topology: str | None = None  # `topology_str` (REST v0.0.43+): "<topology>:<unit>[,...]"

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.state is not None:
            body["state"] = list(self.state)
        if self.reason is not None:
            body["reason"] = self.reason
        if self.comment is not None:
            body["comment"] = self.comment
        if self.features is not None:
            body["features"] = list(self.features)
        if self.features_act is not None:
            body["features_act"] = list(self.features_act)
        if self.topology is not None:
            body["topology_str"] = self.topology
        if not body:
            raise ValueError("a node update needs at least one field")
        return body

    def applied_to(self, node: SlurmNode) -> bool:
        """Whether `node`, as read back from Slurm, shows this update (a refused bulk update is sorted
        into nodes it changed and nodes it did not with this)."""
        if self.state is not None:
            if "DRAIN" in self.state and not (node.drain_flag and self.reason in (None, node.reason)):
                return False
            if "UNDRAIN" in self.state and node.drain_flag:
                return False
        if self.features is not None and set(node.features) != set(self.features):
            return False
        if self.features_act is not None and set(node.active_features) != set(self.features_act):
            return False
        return self.topology is None or node.topology == self.topology
