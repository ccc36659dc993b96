"""What every controller is built from, built once by the service: the clients, both caches, the writers
(every write of every controller goes through them: the gate is checked there, once), what controllers
offer each other (the scale-in marks, the scheduler's holds, NodeSet members, job counts), the action
recorder, the syncer's identity (its owner prefix, its deployment), and the runtime's settings (workers,
backoff, resync period, reconcile metrics).

    context = ControllerContext(slurm=..., kube=..., ...)
    controller = SomeController(context, options)
    runner = context.runner(controller)     # subscribes its watches; leadership, retries, metrics
    manager.add(runner.name, runner.serve)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from syncer.control.directory import Jobs, NodeSets
from syncer.control.gate import WriteGate
from syncer.control.holds import NodeHolds
from syncer.control.scale_in import ScaleInMarks
from syncer.control.slurm_writer import SlurmWriter
from syncer.kube.cache import KubeCache
from syncer.kube.client import KubeClient
from syncer.kube.events import EventRecorder
from syncer.kube.writer import KubeWriter
from syncer.runtime.backoff import Backoff
from syncer.runtime.controller import Controller, ControllerRunner, ReconcileMetrics
from syncer.slurm.cache import NodeCache
from syncer.slurm.client import SlurmClient

Action = Callable[[str, str, str, dict[str, Any]], None]  # (kind, direction, object, details)


class Actions:
    """Every controller's actions (a drain, a cordon, a reservation written), told to whoever listens:
    the exporter's counters and latencies, test recorders."""

    def __init__(self) -> None:
        self.listeners: list[Action] = []

    def subscribe(self, listener: Action) -> None:
        self.listeners.append(listener)

    def __call__(self, kind: str, direction: str, name: str, details: dict[str, Any]) -> None:
        for listener in self.listeners:
            listener(kind, direction, name, details)


@dataclass(frozen=True)
class ControllerContext:
    slurm: SlurmClient
    kube: KubeClient
    slurm_cache: NodeCache
    kube_cache: KubeCache
    gate: WriteGate
    writer: KubeWriter  # Kubernetes object writes
    events: EventRecorder  # Kubernetes Events
    slurm_writer: SlurmWriter  # Slurm writes (node updates in group commit, reservations, records)
    owner_prefix: str = "k8s: "  # drain and power-down reasons the syncer writes start with it (SPEC)
    owner: str = "default/slurm-syncer"  # this deployment: its Lease's namespace/name (reservation tags)
    # this release's cluster identity: the SlurmPartitions, NodeSets and pods it acts on carry it
    # (syncer/model/cluster.py); and whether it takes those that carry none
    cluster: str = "slurm-syncer"
    adopt_unlabelled: bool = True
    workers: int = 8
    resync_s: float = 60.0  # every key of every controller again (the level-triggered safety net)
    backoff: Backoff = field(default_factory=Backoff)  # retries of a failed reconcile, every controller
    metrics: ReconcileMetrics | None = None
    scale_in: ScaleInMarks = field(default_factory=ScaleInMarks)
    holds: NodeHolds = field(default_factory=NodeHolds)  # the scheduler's held nodes (control/holds.py)
    nodesets: NodeSets = field(default_factory=NodeSets)
    jobs: Jobs = field(default_factory=Jobs)
    actions: Actions = field(default_factory=Actions)
    clock: Callable[[], float] = time.time

    def runner(self, controller: Controller) -> ControllerRunner:
        """The controller's runner (its own `workers`, or the service's): it subscribes the controller's
        watches and reconciles only while the write gate says this replica leads."""
        return ControllerRunner(
            controller,
            workers=controller.workers or self.workers,
            first_workers=controller.first_workers,
            metrics=self.metrics,
            backoff=self.backoff,
            resync_s=self.resync_s,
            leading=lambda: self.gate.leading,
        )
