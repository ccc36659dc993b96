"""What every controller is built from, built once by the service: the clients, both caches, the writers
(every write of every controller goes through them: the gate is checked there, once), the scale-in marks,
the action recorder, and the runtime's settings (workers, backoff, resync period, reconcile metrics).

    context = ControllerContext(slurm=..., kube=..., ...)
    controller = SomeController(context, options)       # builds its runner: context.runner(controller)
    manager.add(controller.name, controller.runner.serve)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from syncer.control.gate import WriteGate
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
    workers: int = 8
    resync_s: float = 60.0  # every key of every controller again (the level-triggered safety net)
    backoff: Backoff = field(default_factory=Backoff)  # retries of a failed reconcile, every controller
    metrics: ReconcileMetrics | None = None
    scale_in: ScaleInMarks = field(default_factory=ScaleInMarks)
    actions: Actions = field(default_factory=Actions)
    clock: Callable[[], float] = time.time

    def runner(
        self, controller: Controller, *, workers: int | None = None, first_workers: int = 0
    ) -> ControllerRunner:
        return ControllerRunner(
            controller,
            workers=workers or self.workers,
            first_workers=first_workers,
            metrics=self.metrics,
            backoff=self.backoff,
            resync_s=self.resync_s,
            leading=lambda: self.gate.leading,
        )
