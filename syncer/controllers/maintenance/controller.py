"""The maintenance controller: Nodes' maintenance windows become Slurm MAINT reservations over their
bound Slurm nodes, and each Node shows its reservation in the `SlurmMaintenanceReserved` condition.

One key for the whole cluster: nodes with the same window share a reservation, so a Node's change can
move a Slurm node from one reservation to another (the old one shrinks, the new one grows). A single key
decides all reservations from one list of Slurm's, never two reconciles at once, and reads only the
Nodes (cheap: a dict scan) and one `GET /reservations/`. A window over many nodes is one request; the
safety valve is not involved (a reservation drains nothing: jobs that end before it still run there)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from syncer.control.binding import resolve, slurm_nodes_on
from syncer.control.context import ControllerContext
from syncer.control.registration import Registration
from syncer.controllers.maintenance.options import OPTIONS, options_from
from syncer.controllers.maintenance.plan import (
    FLAGS,
    RULE_PAST,
    STAMP,
    USERS,
    Desired,
    MaintenanceOptions,
    NodeWindow,
    Write,
    group,
    owned,
    owner_tag,
    plan,
    running_at,
    window_of,
)
from syncer.kube.events import ObjectRef
from syncer.kube.writer import node_path
from syncer.model.keys import Keys
from syncer.model.kube import Condition, KubeNode, KubePod
from syncer.runtime.controller import Controller, Result
from syncer.runtime.watch import Watch, Watches, every
from syncer.slurm.errors import SlurmError
from syncer.slurm.hostlist import expand

log = structlog.get_logger("syncer.controllers.maintenance")
KEY = "cluster"
Recorder = Callable[[str, str, str, dict[str, Any]], None]  # (kind, direction, object, details)

EVENT_CREATED = "MaintenanceReservationCreated"
EVENT_UPDATED = "MaintenanceReservationUpdated"
EVENT_REMOVED = "MaintenanceReservationRemoved"
EVENT_FAILED = "MaintenanceReservationFailed"
EVENT_INVALID = "MaintenanceWindowInvalid"
EVENT_UNSUPPORTED = "MaintenanceWindowUnsupported"
# a change is looked at this long after it arrives, so Nodes annotated together (a rack's window) land
# in one reservation write instead of one growing update per informer event
BATCH_S = 0.5
CONDITION_WRITES_AT_ONCE = 16
NEEDS = "maintenance windows need Slurm 25.05+ (REST API v0.0.43+ creates reservations)"


@dataclass
class Summary:
    """The last reconcile's figures, read by the exporter at scrape time."""

    reserved: int = 0  # Nodes whose window has its reservation
    invalid: int = 0  # Nodes whose window input was refused
    unsupported: int = 0  # Nodes whose window Slurm cannot take (24.11)
    reservations: int = 0  # reservations of ours in Slurm


class MaintenanceController(Controller):
    name = "maintenance"
    workers = 1  # one key

    def __init__(self, context: ControllerContext, options: MaintenanceOptions) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.options = options
        self.record: Recorder = context.actions
        self.clock = context.clock
        # the reservations' owner tag: one per syncer deployment (its Lease), so two never share names
        self.tag = owner_tag(context.owner)
        self.summary = Summary()
        self._told: dict[tuple[str, str], str] = {}  # (Node, Event reason) -> what it said, said once
        self._live: set[tuple[tuple[str, str], str]] = set()  # what the last reconcile would have said

    def watches(self) -> Watches:
        # Nodes annotated together (a rack's window) land in one reservation write
        return (
            Watch(self.context.kube_cache.nodes.subscribe, self._node_moved, after_s=BATCH_S),
            Watch(self.context.kube_cache.pods.subscribe, self._pod_moved, after_s=BATCH_S),
            # another REST API version (Slurm upgraded to 25.05+): windows can become reservations now
            Watch(self.context.slurm.subscribe_versions, every(KEY)),
        )

    async def keys(self) -> list[str]:
        return [KEY]  # one key: every reservation is decided from one list of Slurm's

    # -- what names the key -------------------------------------------------------------------------
    def _inputs(self, node: KubeNode) -> tuple[object, ...]:
        conditions = tuple(node.condition(spec.type) for spec in self.options.conditions)
        return (
            node.annotations.get(Keys.MAINTENANCE_WINDOW),
            node.labels.get(Keys.NODE_NAME_LABEL),
            conditions,
        )

    def _node_moved(self, old: KubeNode | None, new: KubeNode | None) -> tuple[str, ...]:
        """A Node's window inputs changed (or it came or went)."""
        if old is None or new is None or self._inputs(old) != self._inputs(new):
            return (KEY,)
        return ()

    def _pod_moved(self, old: KubePod | None, new: KubePod | None) -> tuple[str, ...]:
        """A pod moved a Slurm node to another Kubernetes Node (or came or went)."""
        names = self.context.kube_cache.slurm_name_of
        if old is None or new is None or (old.node_name, names(old)) != (new.node_name, names(new)):
            return (KEY,)
        return ()

    # -- one reconcile ---------------------------------------------------------------------------------
    async def reconcile(self, key: str) -> Result:
        if not self.context.kube_cache.synced or self.context.slurm_cache.stale:
            return Result(requeue_after=1.0)  # fail closed: no reservation removed on stale data
        self._live = set()
        result = await self._reconcile(self.clock())
        # forget what was said about inputs that are gone, so the same mistake made again is told again
        self._told = {k: v for k, v in self._told.items() if (k, v) in self._live}
        return result

    async def _reconcile(self, now: float) -> Result:
        found = [
            w
            for n in list(self.context.kube_cache.nodes.items.values())
            if (w := window_of(n, self.options, now))
        ]
        ended = {w.node for w in found if w.problem == RULE_PAST and self._was_reserved(w.node)}
        for window in found:
            if window.problem and window.node not in ended:
                await self._tell_invalid(window)
        windows = {w.node: w for w in found if w.window is not None}
        slurm_of = {node: self._slurm_nodes(node) for node in windows}
        if not self.context.slurm.reservation_writes:
            await self._unsupported(windows, found, now)
            return Result(requeue_after=self.context.resync_s)
        wanted = {s: w.window for node, w in windows.items() for s in slurm_of[node] if w.window is not None}
        desired = group(wanted)
        mine = [r for r in await self.context.slurm.list_reservations() if owned(r, self.tag)]
        writes, names = plan(desired, mine, self.tag, now)
        failed = {w.name for w in writes if not await self._write(w)}
        counts = await self._jobs_at({s: w.start for s, w in wanted.items()}) if wanted else {}
        conditions: dict[str, Condition] = {}
        for node, window in windows.items():
            assert window.window is not None
            name = names.get(window.window, "")
            if not slurm_of[node] or name in failed or not name:
                continue
            on = slurm_of[node]
            jobs = sum(counts.get(s, 0) for s in on)
            conditions[node] = Condition(
                type=Keys.CONDITION_MAINTENANCE, status="True", reason="Reserved",
                message=f"Slurm reservation {name} (MAINT) for {window.window.text} over {', '.join(on)}; "
                f"{jobs} running job(s) there will still run at its start",
            )  # fmt: skip
        self._conditions_for_problems(found, conditions)
        await self._write_conditions(conditions)
        self.summary = Summary(
            reserved=len([n for n in conditions.values() if n.status == "True"]),
            invalid=len([w for w in found if w.problem and w.node not in ended]),
            reservations=len(mine)
            + sum(w.action == "create" for w in writes)
            - sum(w.action == "delete" for w in writes),
        )
        if writes:
            log.info(
                "maintenance reservations reconciled", windows=len(desired), slurm_nodes=len(wanted),
                writes=len(writes), failed=len(failed), seconds=round(self.clock() - now, 3),
            )  # fmt: skip
        if failed:
            raise SlurmError(f"maintenance reservations not written: {', '.join(sorted(failed))}")
        return Result(requeue_after=self._next_edge(desired, now))

    def _next_edge(self, desired: Iterable[Desired], now: float) -> float:
        """Until the next window starts (its job counts) or ends (its removal), at most a resync."""
        edges = [t - now for d in desired for t in (d.window.start, d.window.end) if t > now]
        return max(1.0, min([self.context.resync_s, *edges]))

    def _slurm_nodes(self, node: str) -> tuple[str, ...]:
        """The Slurm nodes Slurm knows that are bound to this Kubernetes Node (pod- or node-bound)."""
        return slurm_nodes_on(node, self.context.kube_cache, self.context.slurm_cache.nodes)

    async def _jobs_at(self, starts: dict[str, int]) -> dict[str, int]:
        try:
            jobs = await self.context.slurm.list_jobs()
        except SlurmError as exc:
            log.warning("jobs not read: the maintenance condition keeps its last job counts", error=str(exc))
            return {}
        running = [(expand(j.nodes), j.end_time) for j in jobs if "RUNNING" in j.states and j.nodes]
        return running_at(running, starts)

    # -- Slurm writes ------------------------------------------------------------------------------------
    async def _write(self, write: Write) -> bool:
        """One reservation write through the Slurm writer (the gate), with its metric and Events; False when
        Slurm refused it."""
        kind = f"reservation_{write.action}"
        what = f"{write.name} for {write.window.text}" if write.window else write.name
        try:
            if write.action == "delete":
                written = await self.context.slurm_writer.delete_reservation(write.name)
            else:
                written = await self.context.slurm_writer.put_reservation(
                    write.name, nodes=write.nodes, end=write.window.end if write.window else 0,
                    start=write.start, flags=FLAGS, users=USERS,
                    comment=f"{STAMP} owner={self.context.owner} window={what}",
                )  # fmt: skip
        except SlurmError as exc:
            log.warning(f"reservation {write.action} refused", reservation=what, error=str(exc))
            self.record(kind, "k8s_to_slurm", write.name, {"result": "error"})
            for node in self._kube_nodes(write.nodes or (write.before.nodes if write.before else ())):
                await self._event(
                    node,
                    "Warning",
                    EVENT_FAILED,
                    f"Slurm refused to {write.action} reservation {what}: {exc}",
                )
            return False
        if not written:
            self.record(kind, "k8s_to_slurm", write.name, {"result": "dry_run"})
            return True
        log.info(f"reservation {write.action}d", name=write.name, reservation=what, nodes=len(write.nodes))
        self.record(kind, "k8s_to_slurm", write.name, {"result": "ok"})
        await self._tell_written(write)
        return True

    async def _tell_written(self, write: Write) -> None:
        before = set(write.before.nodes) if write.before else set()
        now_in = set(write.nodes)
        if write.action in ("create", "update"):
            reason = EVENT_CREATED if write.action == "create" else EVENT_UPDATED
            verb = "created" if write.action == "create" else "changed"
            assert write.window is not None
            same_times = (
                write.before is not None
                and write.before.end == write.window.end
                and (write.start is None or write.before.start == write.start)
            )
            # a reservation that only grew: its Event goes to the Nodes that joined it, not to all again
            told = now_in - before if same_times else now_in
            for node in self._kube_nodes(sorted(told)):
                await self._event(
                    node, "Normal", reason,
                    f"Slurm reservation {write.name} (MAINT) {verb} for the maintenance window "
                    f"{write.window.text} over {len(now_in)} node(s): jobs that would run into it are not "
                    "started there, shorter ones still are",
                )  # fmt: skip
        for node in self._kube_nodes(sorted(before - now_in)):
            await self._event(
                node, "Normal", EVENT_REMOVED,
                f"Slurm reservation {write.name} removed"
                + (" (window gone or past)" if write.action == "delete" else " for this node (window moved)"),
            )  # fmt: skip

    def _kube_nodes(self, slurm_nodes: Iterable[str]) -> list[str]:
        return sorted({n.name for s in slurm_nodes if (n := self._bound_node(s)) is not None})

    def _bound_node(self, slurm_name: str) -> KubeNode | None:
        """The Kubernetes Node a Slurm node is bound to (SPEC "Binding"); None when unbound or in conflict."""
        binding = resolve(slurm_name, self.context.kube_cache)
        return binding.node if binding.bound else None

    # -- Kubernetes: conditions and Events ----------------------------------------------------------------
    def _was_reserved(self, node: str) -> bool:
        """The Node shows our condition as reserved or ended (its window was accepted before)."""
        kube_node = self.context.kube_cache.node(node)
        cond = kube_node.condition(Keys.CONDITION_MAINTENANCE) if kube_node is not None else None
        return cond is not None and (cond.status == "True" or cond.reason == "WindowEnded")

    def _conditions_for_problems(self, found: list[NodeWindow], conditions: dict[str, Condition]) -> None:
        """Refused input: False naming the rule. A Node that showed our condition and has no window: False."""
        for window in found:
            if window.problem == RULE_PAST and self._was_reserved(window.node):
                # a window that was reserved and has now ended: no mistake, nothing to warn about
                conditions[window.node] = Condition(
                    type=Keys.CONDITION_MAINTENANCE, status="False", reason="WindowEnded",
                    message=f"the maintenance window {window.value!r} from {window.source} has ended",
                )  # fmt: skip
            elif window.problem:
                conditions[window.node] = Condition(
                    type=Keys.CONDITION_MAINTENANCE, status="False", reason="InvalidWindow",
                    message=f"{window.source} {window.value!r} not used: {window.problem}",
                )  # fmt: skip
        asked = {w.node for w in found}
        for node in list(self.context.kube_cache.nodes.items.values()):
            if (
                node.name not in asked
                and node.name not in conditions
                and node.condition(Keys.CONDITION_MAINTENANCE)
            ):
                conditions[node.name] = Condition(
                    type=Keys.CONDITION_MAINTENANCE,
                    status="False",
                    reason="NoWindow",
                    message="no maintenance window",
                )

    async def _write_conditions(self, conditions: dict[str, Condition]) -> None:
        """Only conditions that differ from the cached Node, a few at a time (a window over a rack)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock()))
        at_once = asyncio.Semaphore(CONDITION_WRITES_AT_ONCE)

        async def write(name: str, wanted: Condition) -> None:
            node = self.context.kube_cache.node(name)
            have = node.condition(wanted.type) if node is not None else None
            if node is None or (
                have is not None
                and (have.status, have.reason, have.message) == (wanted.status, wanted.reason, wanted.message)
            ):
                return
            # the cached Node with only our condition: the writer's diff and 409 retry need no more
            mine = [
                {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                for c in [have]
                if c
            ]
            current = {"metadata": {"resourceVersion": node.resource_version}, "status": {"conditions": mine}}
            async with at_once:
                written = await self.context.writer.set_status(
                    node_path(name), [wanted], stamp, current=current, what="maintenance"
                )
            if written is not None:
                self.record("maintenance_condition", "slurm_to_k8s", name, {"result": "ok"})

        await asyncio.gather(*(write(name, wanted) for name, wanted in conditions.items()))

    async def _event(self, node: str, type_: str, reason: str, message: str) -> None:
        await self.context.events.record(ObjectRef.node(node), type_, reason, message)

    async def _tell_once(self, node: str, type_: str, reason: str, message: str) -> bool:
        """An Event for a Node's input, once per distinct message (resyncs do not repeat it)."""
        self._live.add(((node, reason), message))
        if self._told.get((node, reason)) == message:
            return False
        await self._event(node, type_, reason, message)
        self._told[(node, reason)] = message
        return True

    async def _tell_invalid(self, window: NodeWindow) -> None:
        message = (
            f"maintenance window from {window.source} {window.value!r} not used: {window.problem}; "
            "nothing written to Slurm"
        )
        if await self._tell_once(window.node, "Warning", EVENT_INVALID, message):
            log.warning(
                "maintenance window refused",
                node=window.node,
                source=window.source,
                value=window.value,
                rule=window.problem,
            )
            self.record("maintenance_window", "k8s_to_slurm", window.node, {"result": "invalid"})

    async def _unsupported(self, windows: dict[str, NodeWindow], found: list[NodeWindow], now: float) -> None:
        """24.11 (REST v0.0.42): no reservation can be made. Said on each Node, counted, never silent."""
        version = self.context.slurm.version.name if self.context.slurm.version else "?"
        release = f"Slurm {self.context.slurm.release}" if self.context.slurm.release else "this Slurm"
        conditions: dict[str, Condition] = {}
        for node, window in windows.items():
            assert window.window is not None
            message = (
                f"maintenance window {window.window.text} not reserved: {release} (REST {version}) "
                f"cannot create reservations; {NEEDS}"
            )
            if await self._tell_once(node, "Warning", EVENT_UNSUPPORTED, message):
                log.warning("maintenance window not reserved: Slurm too old", node=node, api_version=version)
                self.record("reservation_create", "k8s_to_slurm", node, {"result": "unsupported"})
            conditions[node] = Condition(
                type=Keys.CONDITION_MAINTENANCE, status="False", reason="SlurmTooOld", message=message
            )
        self._conditions_for_problems(found, conditions)
        await self._write_conditions(conditions)
        self.summary = Summary(unsupported=len(windows), invalid=len([w for w in found if w.problem]))


REGISTRATION = Registration("maintenance", MaintenanceController, MaintenanceOptions(), OPTIONS, options_from)
