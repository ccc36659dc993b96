"""Carries out a NodeSet's power decision (power.py): declares members to Slurm (`POST /new/node/`, then
the NodeSet's comment), deletes the pods of members Slurm powered down (after a fresh read confirms it),
deletes our records above a lowered ceiling, forces a power-down where a job must be requeued, and
counts it all (metrics: power-ups, power-downs, failures, POWERING_UP -> slurmd registered)."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from syncer.control.context import ControllerContext
from syncer.controllers.nodeset.plan import ready, removal_stamp
from syncer.controllers.nodeset.pod_failures import start_failure
from syncer.controllers.nodeset.power import (
    PowerDecision,
    declared_stamp,
    made_over_rest,
    powered_down,
    powering_up,
)
from syncer.controllers.nodeset.spec import PowerSpec
from syncer.controllers.nodeset.writes import NodeSetWrites
from syncer.kube.errors import KubeError
from syncer.kube.writer import pod_path
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubeNodeSet, KubePod
from syncer.model.slurm import SlurmNode
from syncer.model.times import rfc3339
from syncer.slurm.errors import SlurmApiError, SlurmNotFound, SlurmVersionError

# POWERING_UP -> slurmd registered: a pod's schedule, image pull and slurmd start (seconds)
REGISTER_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass
class PowerStats:
    power_ups: int = 0  # pods created because Slurm powered their member up
    power_downs: int = 0  # pods deleted because Slurm powered their member down
    failures: int = 0  # forced power-downs (a member that could not come up, or was above the ceiling)
    declared: int = 0  # records created in Slurm
    undeclared: int = 0  # records deleted above a lowered ceiling
    register_counts: list[int] = field(default_factory=lambda: [0] * (len(REGISTER_BUCKETS) + 1))
    register_sum: float = 0.0
    by_state: dict[str, dict[str, int]] = field(default_factory=dict)  # NodeSet key -> power state -> count

    def observe_register(self, seconds: float) -> None:
        self.register_counts[bisect.bisect_left(REGISTER_BUCKETS, seconds)] += 1
        self.register_sum += seconds

    def register_buckets(self) -> list[tuple[str, int]]:
        """Cumulative (le, count) pairs for a Prometheus histogram, +Inf last."""
        out, total = [], 0
        for bound, count in zip((*map(str, REGISTER_BUCKETS), "+Inf"), self.register_counts, strict=True):
            total += count
            out.append((bound, total))
        return out


class PowerActions:
    def __init__(
        self, context: ControllerContext, writes: NodeSetWrites, owner_prefix: str, *, port_base: int = 0,
        node_loss_limit: int = 2, port_of: Callable[[str], int] | None = None,
    ) -> None:  # fmt: skip
        # most members forced down per pass for a lost Node: the safety valve's floor (safety-valve-min-nodes
        # - 1), so a cluster-wide Node blip does not requeue every job at once
        self.node_loss_limit = node_loss_limit
        self.port_base = port_base  # see ServiceConfig.nodeset_power_port_base
        self.port_of = port_of  # see ServiceConfig.nodeset_power_ports
        self.context = context
        self.writes = writes
        self.slurm = context.slurm
        self.clock = context.clock
        self.owner_prefix = owner_prefix
        self.stats = PowerStats()
        self.unsupported = ""  # why this Slurm cannot declare members (24.11), once seen
        self._told: set[str] = set()  # NodeSet uids warned by an Event that this Slurm cannot declare
        self._conf_told: dict[str, set[str]] = {}  # NodeSet uid -> slurm.conf members above the ceiling told
        self._powering: dict[str, float] = {}  # member -> when its pod was created for a power-up
        # pod uids acted on once each (forced down for, deleted for a power-down), by NodeSet key, kept
        # only while the NodeSet still has those pods
        self._forced: dict[str, set[str]] = {}
        self._deleted: dict[str, set[str]] = {}

    async def apply(
        self,
        nodeset: KubeNodeSet,
        power: PowerSpec,
        decision: PowerDecision,
        by_name: dict[str, KubePod],
        slurm_nodes: dict[str, SlurmNode],
        event: Callable[[str, str, str], Any],
        logger: Any,
    ) -> None:
        mine = declared_stamp(removal_stamp(nodeset))
        self.stats.by_state[nodeset.key] = dict(decision.counts)
        live = {pod.uid for pod in by_name.values()}
        forced = self._forced[nodeset.key] = self._forced.get(nodeset.key, set()) & live
        deleted = self._deleted[nodeset.key] = self._deleted.get(nodeset.key, set()) & live
        self._registered(decision, slurm_nodes)
        await self._declare(nodeset, power, decision, mine, event, logger)
        for name in decision.stamp:
            await self.writes.slurm_writer.set_comment(name, mine)
        for name in decision.power_down_pods:
            await self._power_down_pod(by_name[name], deleted, event, logger)
        for name in decision.undeclare:
            await self._undeclare(name, mine, by_name, event, logger)
        await self._conf_above(nodeset, decision, event, logger)
        for name in decision.resume:
            if await self.writes.slurm_writer.resume(name):
                logger.info(
                    "member resumed after a failed power-up: Slurm may power it up again", slurm_node=name
                )
        await self._failures(power, decision, by_name, slurm_nodes, forced, event, logger)
        for name, why in sorted(decision.force_down.items()):
            reason = f"{self.owner_prefix}{why}"
            if not await self._still_powering_up(name, logger):
                continue
            if await self.writes.slurm_writer.power_down_force(name, reason):
                self.stats.failures += 1
                logger.warning("forced Slurm node power-down", slurm_node=name, reason=reason)
                await event("Warning", "PowerDownForced", f"Slurm node {name} powered down: {why}")

    async def _failures(
        self, power: PowerSpec, decision: PowerDecision, by_name: dict[str, KubePod],
        slurm_nodes: dict[str, SlurmNode], forced: set[str], event: Callable[[str, str, str], Any],
        logger: Any,
    ) -> None:  # fmt: skip
        """A member whose pod cannot start while Slurm powers it up, or whose Kubernetes Node is lost under
        it: POWER_DOWN_FORCE with the reason (its jobs are requeued now, not after ResumeTimeout)."""
        nodes = self.context.kube_cache.nodes.items
        now, lost_after = self.clock(), power.start_timeout_s
        node_losses = 0
        for name, pod in sorted(by_name.items()):
            slurm = slurm_nodes.get(name)
            if pod.terminating or name not in decision.members or slurm is None or powered_down(slurm):
                continue
            if pod.uid in forced or slurm.base_state == "DOWN":
                continue
            node = nodes.get(pod.node_name) if pod.node_name else None
            lost = bool(pod.node_name) and (node is None or _not_ready(node, now, lost_after))
            if not lost and not (powering_up(slurm) and not ready(pod)):
                continue
            raw = await self._get(pod_path(pod.namespace, pod.name))
            if raw is None:
                continue
            # the pod as read now may be bound already where the cache still has it unscheduled; a Node
            # missing from the cache is read before it is called lost (the cache may lag behind too)
            node_name = str((raw.get("spec") or {}).get("nodeName") or "")
            node = nodes.get(node_name) if node_name else None
            raw_node = _node_dict(node) if node is not None else None
            if node_name and node is None:
                raw_node = await self._get(f"/api/v1/nodes/{node_name}")
            why = start_failure(
                raw, raw_node, now, unschedulable_after_s=power.start_timeout_s, node_lost_after_s=lost_after
            )
            if why is None:
                continue
            if " lost its Node " in why:
                if node_losses >= self.node_loss_limit:
                    logger.warning("Node loss: member not forced down in this pass (limit)", slurm_node=name)
                    continue
                node_losses += 1
            if await self.writes.slurm_writer.power_down_force(name, f"{self.owner_prefix}{why}"):
                forced.add(pod.uid)
                self.stats.failures += 1
                logger.warning("member could not come up: Slurm node powered down", slurm_node=name, why=why)
                await event(
                    "Warning", "PowerUpFailed", f"Slurm node {name} powered down, jobs requeued: {why}"
                )

    async def _still_powering_up(self, name: str, logger: Any) -> bool:
        """Read again before a ceiling's POWER_DOWN_FORCE: the plan's record may be a second old, and a
        member whose job started meanwhile would have it ended NODE_FAIL (a --no-requeue job). While
        POWERING_UP its job only waits (CONFIGURING); once up it goes the way of any busy member."""
        try:
            current = await self.slurm.get_node(name)
        except SlurmNotFound:
            return False
        if powering_up(current):
            return True
        logger.info("member above the ceiling powered up meanwhile: not forced down", slurm_node=name)
        return False

    async def _get(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.context.kube.get(path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def forget(self, key: str) -> None:
        """The NodeSet is gone."""
        self.stats.by_state.pop(key, None)
        self._forced.pop(key, None)
        self._deleted.pop(key, None)
        self._conf_told.clear()  # keyed by uid; a NodeSet is seldom deleted, a second Event is harmless

    def powering_up(self, name: str) -> None:
        """A pod was created because Slurm powers its member up."""
        self.stats.power_ups += 1
        self._powering[name] = self.clock()

    def _registered(self, decision: PowerDecision, slurm_nodes: dict[str, SlurmNode]) -> None:
        for name, since in list(self._powering.items()):
            slurm = slurm_nodes.get(name)
            if slurm is None or powered_down(slurm):
                del self._powering[name]  # gave up or powered down before registering: not a sample
            elif not powering_up(slurm) and "NOT_RESPONDING" not in slurm.state:
                self.stats.observe_register(max(0.0, self.clock() - since))
                del self._powering[name]

    def _port(self, name: str) -> int:
        if self.port_of is not None:
            return self.port_of(name)
        return self.port_base + int(name.rsplit("-", 1)[1]) if self.port_base else 0

    async def _declare(
        self, nodeset: KubeNodeSet, power: PowerSpec, decision: PowerDecision, mine: str,
        event: Callable[[str, str, str], Any], logger: Any,
    ) -> None:  # fmt: skip
        declared = []
        for name in decision.declare:
            try:
                port = self._port(name)
                created = await self.writes.slurm_writer.create_node(name, power.node.node_conf(name, port))
            except SlurmVersionError as exc:
                self.unsupported = str(exc)
                if nodeset.uid not in self._told:
                    self._told.add(nodeset.uid)
                    logger.warning("Slurm cannot declare power-managed members", error=str(exc))
                    await event(
                        "Warning", "PowerSavingUnsupported",
                        f"{exc}; name the members in slurm.conf (see the PowerSaving condition)",
                    )  # fmt: skip
                return
            if created:
                await self.writes.slurm_writer.set_comment(name, mine)
                self.stats.declared += 1
                declared.append(name)
        self.unsupported = ""
        if declared:
            logger.info("declared members to Slurm as powered-down CLOUD nodes", count=len(declared))
            await event(
                "Normal", "Declared",
                f"declared {len(declared)} powered-down member(s) to Slurm: {', '.join(declared[:10])}"
                + (" ..." if len(declared) > 10 else ""),
            )  # fmt: skip

    async def _conf_above(
        self,
        nodeset: KubeNodeSet,
        decision: PowerDecision,
        event: Callable[[str, str, str], Any],
        logger: Any,
    ) -> None:
        """A slurm.conf member above a lowered ceiling stays (powered down by Slurm, no pod): only the
        admin can remove it. Said once per member and NodeSet."""
        told = self._conf_told.setdefault(nodeset.uid, set())
        for name in decision.conf_above:
            if name in told:
                continue
            told.add(name)
            logger.warning("member above the ceiling is named in slurm.conf: kept", slurm_node=name)
            await event(
                "Warning", "SlurmConfMemberAboveCeiling",
                f"Slurm node {name} is above spec.power.maxReplicas but named in slurm.conf (Slurm "
                f"refuses to delete it): remove NodeName={name} from slurm.conf, then scontrol reconfigure",
            )  # fmt: skip

    async def _power_down_pod(
        self, pod: KubePod, deleted: set[str], event: Callable[[str, str, str], Any], logger: Any
    ) -> None:
        try:
            current = await self.slurm.get_node(pod.name)  # the cache may be a second old
        except SlurmNotFound:
            return
        if not powered_down(current) or current.busy:
            return  # powered up again meanwhile, or still finishing a job
        if pod.uid in deleted:
            return  # a graceful delete answers again until the cache shows the pod terminating
        if Keys.POWER_DOWN not in pod.annotations:
            # first the mark that keeps the sync engine from draining the node as the pod terminates
            await self.context.writer.set_annotations(
                pod_path(pod.namespace, pod.name), {Keys.POWER_DOWN: current.state_text}, what="power-down"
            )
        if not await self.writes.delete_pod(pod):
            return
        deleted.add(pod.uid)
        self.stats.power_downs += 1
        logger.info("Slurm powered the member down: pod deleted", pod=pod.name)
        await event("Normal", "PoweredDown", f"Slurm powered {pod.name} down: deleted its pod")

    async def _undeclare(
        self, name: str, mine: str, by_name: dict[str, KubePod], event: Callable[[str, str, str], Any],
        logger: Any,
    ) -> None:  # fmt: skip
        if name in by_name:
            return
        try:
            current = await self.slurm.get_node(name)
        except SlurmNotFound:
            return
        if current.comment != mine or current.busy or powering_up(current) or not made_over_rest(current):
            return
        try:
            if not await self.writes.slurm_writer.delete_node(name):
                return
        except SlurmApiError as exc:  # one refused delete must not stop the rest of the reconcile
            logger.warning(
                "Slurm refused to delete a member above the ceiling", slurm_node=name, error=str(exc)
            )
            await event("Warning", "DeleteSlurmNodeFailed", f"Slurm refused to delete node {name}: {exc}")
            return
        self.stats.undeclared += 1
        logger.info("member above the ceiling removed from Slurm", slurm_node=name)
        await event("Normal", "DeletedSlurmNode", f"deleted Slurm node {name}: above spec.power.maxReplicas")


def _not_ready(node: KubeNode, now: float, after_s: float) -> bool:
    """NotReady or Unknown for `after_s` (a moment's NotReady is a kubelet restart or an apiserver blip)."""
    cond = node.condition("Ready")
    if cond is None or cond.status == "True":
        return False
    return not cond.last_transition_time or now - cond.last_transition_time >= after_s


def _node_dict(node: KubeNode | None) -> dict[str, Any] | None:
    """The Node as pod_failures reads it (its Ready condition)."""
    if node is None:
        return None
    conditions = [
        {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "lastTransitionTime": rfc3339(c.last_transition_time),
        }
        for c in node.conditions
    ]
    return {"metadata": {"name": node.name}, "status": {"conditions": conditions}}
