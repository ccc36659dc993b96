"""What a sync reconcile reports instead of deciding, once each: Slurm node names claimed by several pods or
Nodes (a conflict: the node is left alone), and a label naming a Slurm node that Slurm does not know (a typo,
or slurmd never registered). A Warning Event on the objects concerned and a log line; the engine's stats
hold which names are in either state."""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from syncer.control.binding import Binding
from syncer.control.context import ControllerContext
from syncer.controllers.sync.read import Reading
from syncer.controllers.sync.stats import EngineStats
from syncer.kube.events import ObjectRef
from syncer.model.keys import Keys
from syncer.model.kube import KubePod

log = structlog.get_logger("syncer.controllers.sync")


Warning = tuple[ObjectRef, str, str]  # where, the Event's reason, its message


@dataclass(frozen=True)
class Reported:
    decide: bool = True  # False: a conflict, or no binding: nothing to decide
    look_again_s: float | None = None  # a missing node's grace runs: when to look again


class Reports:
    def __init__(self, context: ControllerContext, *, stats: EngineStats, missing_grace_s: float) -> None:
        self.context = context
        self.stats = stats
        self.missing_grace_s = missing_grace_s
        self._missing_since: dict[str, float] = {}

    async def report(self, reading: Reading) -> Reported:
        """Whether to decide, and the Warnings to record first (each once, while its state lasts)."""
        warnings, reported = self._judged(reading)
        for ref, reason, message in warnings:
            await self.context.events.record(ref, "Warning", reason, message)
        return reported

    def _judged(self, reading: Reading) -> tuple[list[Warning], Reported]:
        binding = reading.binding
        name = binding.slurm_name
        if binding.conflict:
            return self._conflict(reading), Reported(decide=False)
        self.stats.conflicts.discard(name)
        if not binding.bound:
            self.forget_missing(name)
            return [], Reported(decide=False)
        if reading.fresh and reading.slurm_node is None and not reading.echo_owed:
            warnings, look_again_s = self._missing(binding)
            return warnings, Reported(look_again_s=look_again_s)
        self.forget_missing(name)
        return [], Reported()

    def _conflict(self, reading: Reading) -> list[Warning]:
        """A Warning on every pod and Node that claims the name (as read), when the conflict is first seen."""
        binding = reading.binding
        name = binding.slurm_name
        if name in self.stats.conflicts:
            return []
        self.stats.conflicts.add(name)
        log.warning("conflicting bindings: Slurm node left alone", slurm_node=name, conflict=binding.conflict)
        refs = [
            ObjectRef.pod(c.namespace, c.name, c.uid) if isinstance(c, KubePod) else ObjectRef.node(c.name)
            for c in reading.claimants
        ]
        return [(ref, "SlurmBindingConflict", binding.conflict) for ref in refs]

    def _missing(self, binding: Binding) -> tuple[list[Warning], float | None]:
        """A label naming a Slurm node that Slurm does not know is reported once it has lasted
        `missing_grace_s` with slurmd's pod running: slurmd registers a dynamic node only after its pod has
        started. Returns the Warning to record, and when to look again if the grace runs."""
        name, pod = binding.slurm_name, binding.pod
        if pod is not None and (pod.phase != "Running" or pod.terminating):
            self.forget_missing(name)
            return [], None
        first = self._missing_since.setdefault(name, time.monotonic())
        waited = time.monotonic() - first
        if waited < self.missing_grace_s:
            return [], self.missing_grace_s - waited + 0.05
        if name in self.stats.missing:
            return [], None
        self.stats.missing.add(name)
        labels = pod.labels if pod is not None else {}
        label = next(
            (key for key in self.context.kube_cache.names.labels if labels.get(key)), Keys.NODE_NAME_LABEL
        )
        named = name if labels.get(label, name) == name else f"{labels[label]} (Slurm node {name})"
        message = (
            f"labelled {label}={named}, but Slurm has no node of that name after "
            f"{self.missing_grace_s:.0f} s: check the label, or why slurmd did not register"
        )
        log.warning(
            "bound Slurm node not found in Slurm",
            slurm_node=name,
            pod=pod.key if pod else None,
            node=binding.node.name if binding.node else None,
        )
        ref = binding.ref("pod")
        return ([(ref, "SlurmNodeNotFound", message)] if ref is not None else []), None

    def forget_missing(self, name: str) -> None:
        self._missing_since.pop(name, None)
        self.stats.missing.discard(name)
