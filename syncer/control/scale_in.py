"""The scale-in marks: which Slurm nodes a NodeSet is removing, by the NodeSet's identity. The NodeSet
controller sets them; the sync controller, told of every change, drains those nodes with the scale-in
reason. Shared here so that neither controller reaches into the other's state."""

from __future__ import annotations

from collections.abc import Callable

from syncer.model.kube import NodeSetRef


class ScaleInMarks:
    def __init__(self) -> None:
        self._marks: dict[str, NodeSetRef] = {}  # Slurm node -> the NodeSet scaling it in
        self._listeners: list[Callable[[str], None]] = []

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """`listener(slurm_node)` after every change of that node's mark."""
        self._listeners.append(listener)

    def get(self, slurm_name: str) -> NodeSetRef | None:
        return self._marks.get(slurm_name)

    def owned_by(self, key: str) -> list[tuple[str, NodeSetRef]]:
        """The marks of the NodeSet `namespace/name`, whatever its UID."""
        return [(name, owner) for name, owner in self._marks.items() if owner.key == key]

    def of(self, ref: NodeSetRef) -> list[str]:
        return [name for name, owner in self._marks.items() if owner == ref]

    def set(self, slurm_name: str, nodeset: NodeSetRef | None) -> None:
        """Marks (or, with None, unmarks) a Slurm node; its listeners look at it again either way."""
        if nodeset is not None:
            self._marks[slurm_name] = nodeset
        else:
            self._marks.pop(slurm_name, None)
        for listener in self._listeners:
            listener(slurm_name)

    def __len__(self) -> int:
        return len(self._marks)
