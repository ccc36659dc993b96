"""The admission of a decision's Slurm action, between `decide` and the applier, asked by the sync
controller's reconcile once per reading it decides on.

On the caches' reading: is Kubernetes current (no watch gap), does the safety valve let a new automatic
drain through, was the same write sent already and the Slurm cache has not caught up? A drain or undrain
admitted there is not sent yet: the reconcile reads the node again from slurmrestd and decides once more,
and on that reading this module admits the action decided again only when it is still the one admitted
(the reason, though, is the one decided again)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from syncer.control.context import ControllerContext
from syncer.controllers.sync.plan import Decision, SlurmAction
from syncer.controllers.sync.read import Reading
from syncer.controllers.sync.stats import EngineStats
from syncer.controllers.sync.valve import DrainValve
from syncer.controllers.sync.written import WrittenSlurm
from syncer.model.keys import Keys
from syncer.model.slurm import SlurmNode

Recorder = Callable[..., None]  # (kind, direction, result, slurm node, **details)


@dataclass(frozen=True)
class Admitted:
    """A Slurm action let through: `confirm` a drain or undrain still to be decided again on the node as read
    from slurmrestd now (else it goes out as it is, on `current`, the node it was decided on)."""

    action: SlurmAction
    current: SlurmNode | None
    repeat: bool  # the same write was sent before and the Slurm cache has not shown it yet
    confirm: bool


class Admission:
    def __init__(
        self, context: ControllerContext, valve: DrainValve, *, slurm_writes: WrittenSlurm,
        stats: EngineStats, record: Recorder, held_for_watch: set[str],
    ) -> None:  # fmt: skip
        self.context = context  # clients, caches, writers (and the clock): shared by every controller
        self.valve = valve
        self.slurm_writes = slurm_writes  # our Slurm writes whose echo the cache still owes
        self.stats = stats
        self.record = record
        # nodes whose Slurm action waited for a watch gap to close: their reconcile looks again soon
        self.held_for_watch = held_for_watch

    async def admit_action(self, reading: Reading, decision: Decision, logger: Any) -> Admitted | None:
        """The Slurm action decided on the caches' reading, if it may go on (None: nothing to send)."""
        name = reading.binding.slurm_name
        action = decision.slurm_action
        if action is None:
            return None
        if not self._kube_current(name):
            logger.info(
                f"{action.kind} held: a Kubernetes watch is reconnecting (a change made meanwhile may be "
                "missing)",
                reason=action.reason,
            )
            self.record(action.kind, "k8s_to_slurm", "watch_gap", name)
            return None
        new_drain = action.kind == "drain" and not action.redrain
        if new_drain and not await self._valve_admits(reading, decision, action.reason, logger):
            return None
        sent = self.slurm_writes.sent.get(name)
        repeat = sent is not None and sent[:2] == (action.kind, action.reason)
        if (
            repeat
            and sent is not None
            and time.monotonic() - sent[2] < self.context.slurm_cache.stale_after_s
        ):
            return None  # already sent; the Slurm cache has not caught up yet
        current = self.context.slurm_cache.nodes.get(name)
        # the cache may be a poll old: a drain or undrain is decided again on the node as read now, so an
        # admin's new reason is never lifted and a drain someone else just made (Slinky's operator reacts to
        # the same cordon) keeps its reason instead of being overwritten by ours
        confirm = action.kind == "undrain" or not action.redrain
        return Admitted(action, current, repeat, confirm)

    def confirm_action(
        self, admitted: Admitted, reading: Reading, decision: Decision, logger: Any
    ) -> Admitted | None:
        """The action `admitted` on the caches' reading, decided again (`decision`) on `reading`: the node as
        read from slurmrestd now and Kubernetes as the cache shows it now; with that node, or None (logged)
        when it is no longer wanted."""
        name, again = reading.binding.slurm_name, decision.slurm_action
        action, current = admitted.action, reading.slurm_node
        if not reading.kube_current:
            # Kubernetes was not decided on: looked at again once the gap closes
            self.held_for_watch.add(name)
        if again is None or again.kind != action.kind:
            # mostly a list older than our own write: the node already is as wanted
            wanted_flag = action.kind == "drain"
            done = again is None and current is not None and current.drain_flag == wanted_flag
            logger.info(
                f"{action.kind} skipped: "
                + ("Slurm already shows it" if done else "Slurm or Kubernetes changed meanwhile"),
                reason=current.reason if current else None,
            )
            return None
        # the reason too is the one decided on what both sides show now (a drain annotation or a condition
        # that arrived during the read joins it)
        return Admitted(again, current, admitted.repeat, confirm=False)

    def _kube_current(self, name: str) -> bool:
        """Kubernetes as the cache shows it may be decided on: no watch gap, in which an uncordon (or a new
        cordon) may have been made and not seen; the written Slurm state would then be a stale decision's
        (a drain after the uncordon). Else `name` is noted to be looked at again once the gap closes."""
        if self.context.kube_cache.current:
            return True
        self.held_for_watch.add(name)
        return False

    async def _valve_admits(self, reading: Reading, decision: Decision, reason: str, logger: Any) -> bool:
        """The safety valve limits automatic drains only; an explicit intent is never held nor counted."""
        binding = reading.binding
        name = binding.slurm_name
        if not decision.automatic:
            if self.valve.holds(name):
                logger.info("safety valve open: explicit drain not held back", reason=reason)
            self.valve.forget(name)
            return True
        bound = len(self.context.kube_cache.slurm_names())
        told = self.valve.holds(name)  # its "held back" Event went out when it was first refused
        if self.valve.admit(name, self.context.clock(), bound):
            return True
        threshold = self.valve.threshold(bound)
        self.stats.valve_refusals += 1
        self.record("drain", "k8s_to_slurm", "valve", name)
        logger.warning("safety valve open: automatic drain held back", reason=reason, threshold=threshold)
        ref = binding.ref("pod" if binding.pod else "node")
        if ref is not None and not told:
            await self.context.events.record(
                ref, "Warning", "SlurmDrainHeldBack",
                f"safety valve open: more than {threshold} of {bound} bound nodes ({self.valve_limit()}) "
                "would newly drain within a minute from automatic causes (Ready past the grace, problem "
                "conditions); this drain waits until the storm subsides or an operator resets the valve "
                f"(annotation {Keys.VALVE_RESET} on the leader Lease; docs/operations.md). Cordons, drain "
                "annotations, terminating pods and scale-in are never held back",
            )  # fmt: skip
        return False

    def valve_limit(self) -> str:
        return f"{self.valve.max_fraction:.0%}, at least {self.valve.min_nodes}"
