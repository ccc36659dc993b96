"""Carries out a NodeSet's power decision (power.py): declares members to Slurm (`POST /new/node/`, then
the NodeSet's comment), deletes the pods of members Slurm powered down (after a fresh read confirms it),
deletes our records above a lowered ceiling, forces a power-down where a job must be requeued, and
counts it all (metrics: power-ups, power-downs, failures, POWERING_UP -> slurmd registered)."""

from __future__ import annotations

import bisect
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from syncer.control.context import ControllerContext
from syncer.controllers.nodeset.disruption import ZONE_LABEL, ZoneHealth
from syncer.controllers.nodeset.plan import ready, removal_stamp
from syncer.controllers.nodeset.pod_failures import NODE_NOT_READY, may_have_failed, start_failure
from syncer.controllers.nodeset.power import (
    PowerDecision,
    declare_failed_message,
    declared_stamp,
    made_over_rest,
    name_collision_message,
    powered_down,
    powering_up,
    registered_before,
    slurmd_silent,
)
from syncer.controllers.nodeset.spec import PowerSpec
from syncer.controllers.nodeset.writes import NodeSetWrites
from syncer.kube.errors import KubeError
from syncer.kube.writer import pod_path
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubeNodeSet, KubePod
from syncer.model.slurm import SlurmNode
from syncer.model.times import rfc3339
from syncer.slurm.errors import SlurmApiError, SlurmError, SlurmNotFound, SlurmVersionError

T = TypeVar("T")
DECLARE_EXPECTATION_S = 30.0
Event = Callable[[str, str, str], Any]


class Problems(list[str]):
    """What failed in one pass, one line each (`<what>: <error>`): one member's failed write never stops the
    others; the pass raises once at its end, so the runner retries it with its backoff."""

    async def guard(self, what: str, step: Awaitable[T], logger: Any) -> T | None:
        try:
            return await step
        except (SlurmError, KubeError) as exc:  # NotLeader is neither: it ends the pass, as it should
            self.append(f"{what}: {exc}")
            logger.warning("power write failed; the pass goes on", what=what, error=str(exc))
            return None

    async def done(self, what: str, step: Awaitable[Any], logger: Any) -> bool:
        """As `guard`; True when the step raised nothing."""
        before = len(self)
        await self.guard(what, step, logger)
        return len(self) == before


class PassIncomplete(Exception):
    """Some of a pass's writes failed (each logged, and evented where an admin looks); the rest were done."""

    def __init__(self, problems: list[str]) -> None:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        super().__init__("; ".join(problems[:3]) + more)
        self.problems = problems


# POWERING_UP -> slurmd registered: a pod's schedule, image pull and slurmd start (seconds)
REGISTER_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass
class PowerStats:
    power_ups: int = 0  # pods created because Slurm powered their member up
    power_downs: int = 0  # pods deleted because Slurm powered their member down
    failures: int = 0  # forced power-downs (a member that could not come up, or was above the ceiling)
    declared: int = 0  # records created in Slurm
    undeclared: int = 0  # records deleted above a lowered ceiling
    held: int = 0  # lost-Node power-downs not done (member-passes) because the Node's zone was disrupted
    # NodeSet key -> GETs of its members' pods (and Nodes) to judge whether they can still come up
    pod_reads: dict[str, int] = field(default_factory=dict)
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
        # NodeSet key -> why the REST version cannot declare its members (24.11), from its last pass that
        # had members to declare; only another version lets them be (the controller waits for one)
        self.unsupported: dict[str, str] = {}
        self._told: set[str] = set()  # NodeSet uids warned by an Event that this Slurm cannot declare
        self._conf_told: dict[str, set[str]] = {}  # NodeSet uid -> slurm.conf members above the ceiling told
        # NodeSet key -> member -> Slurm's refusal of its declare (this pass), for the DeclareFailed condition
        self.declare_failed: dict[str, dict[str, str]] = {}
        self._declare_told: dict[str, str] = {}  # NodeSet key -> the DeclareFailed Event last sent
        self._collision_told: dict[str, tuple[str, ...]] = {}  # NodeSet key -> foreign records told
        # NodeSet key -> members declared (or to stamp) with no comment written yet: status.power.declaring
        self.declaring: dict[str, list[str]] = {}
        self.zones = ZoneHealth()  # fed by the controller's Node informer
        # NodeSet key -> member -> when its declare was sent, until the Slurm cache shows the record (or 30 s
        # pass): a pass before the next poll (its own status write wakes one) would declare it again for a 422
        self._declared_at: dict[str, dict[str, float]] = {}
        # NodeSet keys whose pass wrote an intent: the pass's status is written at its end whatever the
        # informer's copy shows (it may not show the intent yet, and the intent must not outlive the pass)
        self.intent_written: dict[str, bool] = {}
        # NodeSet key -> whether its last pass sent declares: only then is the next one queued at once
        self.progressed: dict[str, bool] = {}
        self.held: dict[str, int] = {}  # NodeSet key -> members whose lost-Node power-down is held now
        self._disruption_told: dict[str, set[str]] = {}  # NodeSet key -> disrupted zones told by an Event
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
        event: Event,
        logger: Any,
    ) -> Problems:
        """Carries the decision out, member by member: a write that fails is logged and listed in what it
        returns, and the next member's writes go on (a refused declare used to end the pass before any pod
        was created)."""
        mine = declared_stamp(removal_stamp(nodeset))
        problems = Problems()
        self.stats.by_state[nodeset.key] = dict(decision.counts)
        live = {pod.uid for pod in by_name.values()}
        forced = self._forced[nodeset.key] = self._forced.get(nodeset.key, set()) & live
        deleted = self._deleted[nodeset.key] = self._deleted.get(nodeset.key, set()) & live
        self._registered(decision, slurm_nodes)
        pending: set[str] = set()  # declared (or to stamp) and not yet commented: the intent stays recorded
        await self._declare(nodeset, power, decision, mine, problems, pending, event, logger)
        if decision.stamp or decision.undeclare:  # their writes go out whatever the cache shows
            self.progressed[nodeset.key] = True
        await self._collisions(nodeset, decision, event, logger)
        for name in decision.stamp:
            if not await problems.done(
                f"comment of {name}", self.writes.slurm_writer.set_comment(name, mine), logger
            ):
                pending.add(name)  # still ours by the recorded intent: stamped on a later pass
        for name in decision.power_down_pods:
            step = self._power_down_pod(by_name[name], deleted, event, logger)
            await problems.guard(f"power-down of {name}", step, logger)
        for name in decision.replace:
            step = self._replace_pod(by_name[name], deleted, event, logger)
            await problems.guard(f"replacement of pod {name}", step, logger)
        for name in decision.undeclare:
            await problems.guard(
                f"delete of {name}",
                self._undeclare(name, (mine, removal_stamp(nodeset)), by_name, event, logger),
                logger,
            )
        await self._conf_above(nodeset, decision, event, logger)
        for name in decision.resume:
            if await problems.guard(f"resume of {name}", self.writes.slurm_writer.resume(name), logger):
                logger.info(
                    "member resumed after a failed power-up: Slurm may power it up again", slurm_node=name
                )
        for name in decision.undrain:
            await problems.guard(f"undrain of {name}", self._undrain(name, by_name, event, logger), logger)
        await self._failures(nodeset, power, decision, by_name, slurm_nodes, forced, problems, event, logger)
        for name, why in sorted(decision.force_down.items()):
            await problems.guard(f"power-down of {name}", self._force_down(name, why, event, logger), logger)
        self.declaring[nodeset.key] = sorted(pending)
        others = [p for p in problems if not p.startswith("declare of ")]  # DeclareFailed says those
        if others:
            more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
            await event("Warning", "PowerWriteFailed", others[0] + more)
        return problems

    async def _force_down(self, name: str, why: str, event: Event, logger: Any) -> None:
        reason = f"{self.owner_prefix}{why}"
        if not await self._still_powering_up(name, logger):
            return
        if await self.writes.slurm_writer.power_down_force(name, reason):
            self.stats.failures += 1
            logger.warning("forced Slurm node power-down", slurm_node=name, reason=reason)
            await event("Warning", "PowerDownForced", f"Slurm node {name} powered down: {why}")

    async def _failures(
        self, nodeset: KubeNodeSet, power: PowerSpec, decision: PowerDecision, by_name: dict[str, KubePod],
        slurm_nodes: dict[str, SlurmNode], forced: set[str], problems: Problems, event: Event, logger: Any,
    ) -> None:  # fmt: skip
        """A member whose pod cannot start while Slurm powers it up, or whose Kubernetes Node is lost under
        it: POWER_DOWN_FORCE with the reason (its jobs are requeued now, not after ResumeTimeout). A Node
        NotReady is lost only while Slurm agrees the slurmd is gone, and never in a disrupted zone."""
        nodes = self.context.kube_cache.nodes.items
        now, lost_after = self.clock(), power.start_timeout_s
        node_losses = 0
        held: dict[str, list[str]] = {}  # zone -> members not forced down there: the zone is disrupted
        for name, pod in sorted(by_name.items()):
            slurm = slurm_nodes.get(name)
            if pod.terminating or name not in decision.members or slurm is None or powered_down(slurm):
                continue
            if pod.uid in forced or slurm.base_state == "DOWN":
                continue
            node = nodes.get(pod.node_name) if pod.node_name else None
            # a NotReady Node is worth a look only while Slurm cannot reach the slurmd either (it never
            # registered, or slurmctld's pings fail): a busy member whose slurmd answers keeps its jobs
            lost = bool(pod.node_name) and (
                node is None or (_not_ready(node, now, lost_after) and slurmd_silent(slurm))
            )
            # the informer's pod first: read it only where it may have failed (or its Node is lost)
            starting = powering_up(slurm) and not ready(pod)
            if not lost and not (
                starting
                and may_have_failed(pod, now, unschedulable_after_s=lost_after, slurmd_path=power.slurmd_path)
            ):
                continue
            judged = await self._judge(nodeset.key, pod, power, now, problems, logger)
            if judged is None:
                continue
            why, zone = judged
            if NODE_NOT_READY in why:
                if self.zones.count(zone).disrupted:
                    held.setdefault(zone, []).append(name)
                    continue
                if not await self._slurm_agrees(name, logger):
                    continue
            if " lost its Node " in why:
                if node_losses >= self.node_loss_limit:
                    logger.warning("Node loss: member not forced down in this pass (limit)", slurm_node=name)
                    continue
                node_losses += 1
            step = self.writes.slurm_writer.power_down_force(name, f"{self.owner_prefix}{why}")
            if await problems.guard(f"power-down of {name}", step, logger):
                forced.add(pod.uid)
                self.stats.failures += 1
                logger.warning("member could not come up: Slurm node powered down", slurm_node=name, why=why)
                await event(
                    "Warning", "PowerUpFailed", f"Slurm node {name} powered down, jobs requeued: {why}"
                )
        await self._disruption(nodeset, held, event, logger)

    async def _judge(
        self, key: str, pod: KubePod, power: PowerSpec, now: float, problems: Problems, logger: Any
    ) -> tuple[str, str] | None:
        """(why the member cannot run, its Node's zone), from the pod and its Node as read now; None while it
        may still run. The pod as read now may be bound already where the cache still has it unscheduled;
        a Node missing from the cache is read before it is called lost (the cache may lag behind too)."""
        raw = await problems.guard(
            f"read of pod {pod.key}", self._get(pod_path(pod.namespace, pod.name), key), logger
        )
        if raw is None:
            return None
        node_name = str((raw.get("spec") or {}).get("nodeName") or "")
        node = self.context.kube_cache.nodes.items.get(node_name) if node_name else None
        raw_node = _node_dict(node) if node is not None else None
        if node_name and node is None:
            raw_node = await problems.guard(
                f"read of Node {node_name}", self._get(f"/api/v1/nodes/{node_name}", key), logger
            )
        lost_after = power.start_timeout_s
        why = start_failure(
            raw, raw_node, now, unschedulable_after_s=lost_after, node_lost_after_s=lost_after
        )
        if why is None:
            return None
        labels = ((raw_node or {}).get("metadata") or {}).get("labels") or {}
        return why, str(labels.get(ZONE_LABEL, ""))

    async def _slurm_agrees(self, name: str, logger: Any) -> bool:
        """Read again before forcing a member down for a NotReady Node: only while slurmctld still cannot
        reach its slurmd (the cache may be a second old; a slurmd that answers runs its jobs on)."""
        current = await self._read_again(name)
        if current is None:
            return False
        if slurmd_silent(current) and current.base_state != "DOWN" and not powered_down(current):
            return True
        logger.info("Node NotReady but Slurm reaches the slurmd: not forced down", slurm_node=name)
        return False

    async def _disruption(
        self, nodeset: KubeNodeSet, held: dict[str, list[str]], event: Event, logger: Any
    ) -> None:
        """Says once per NodeSet and zone (while it stays disrupted) which members are not forced down."""
        told = self._disruption_told.setdefault(nodeset.key, set())
        told &= {zone for zone in told if self.zones.count(zone).disrupted}
        self.held[nodeset.key] = sum(len(names) for names in held.values())
        for zone, names in sorted(held.items()):
            self.stats.held += len(names)
            if zone in told:
                continue
            told.add(zone)
            count = self.zones.count(zone)
            where = f"zone {zone}" if zone else "the Nodes without a zone label"
            logger.warning("zone disrupted: lost-Node power-downs held", zone=zone, members=names)
            await event(
                "Warning", "NodeDisruption",
                f"{count.not_ready} of {count.total} Nodes in {where} are NotReady at once: members there "
                f"({', '.join(sorted(names)[:10])}) are not powered down for a lost Node until the zone "
                "recovers, as Kubernetes stops evicting in a disruption; jobs run on where slurmd answers",
            )  # fmt: skip

    async def _undrain(self, name: str, by_name: dict[str, KubePod], event: Event, logger: Any) -> None:
        """Lifts the drain the sync engine left on a powered-down member whose pod is gone (read again: the
        cache may be a second old; an admin's drain, a job, or Slurm powering it up meanwhile stop it)."""
        if name in by_name:
            return
        current = await self._read_again(name)
        if current is None:
            return
        ours = current.drain_flag and current.reason.startswith(self.owner_prefix)
        if not ours or current.busy or powering_up(current) or not powered_down(current):
            return
        reason = current.reason
        try:
            if not await self.writes.slurm_writer.update(name, state=["UNDRAIN"]):
                return
        except SlurmNotFound:  # deleted meanwhile: nothing to lift
            return
        logger.info("member powered down with our drain and no pod: undrained", slurm_node=name)
        await event(
            "Normal", "MemberUndrained",
            f"Slurm node {name} undrained ({reason}): its pod is gone and the drain would keep Slurm from "
            "powering it up again",
        )  # fmt: skip

    async def _still_powering_up(self, name: str, logger: Any) -> bool:
        """Read again before a ceiling's POWER_DOWN_FORCE: the plan's record may be a second old, and a
        member whose job started meanwhile would have it ended NODE_FAIL (a --no-requeue job). While
        POWERING_UP its job only waits (CONFIGURING); once up it goes the way of any busy member."""
        current = await self._read_again(name)
        if current is None:
            return False
        if powering_up(current):
            return True
        logger.info("member above the ceiling powered up meanwhile: not forced down", slurm_node=name)
        return False

    async def _get(self, path: str, nodeset: str) -> dict[str, Any] | None:
        self.stats.pod_reads[nodeset] = self.stats.pod_reads.get(nodeset, 0) + 1
        try:
            return await self.context.kube.get(path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def in_flight(self, key: str, slurm_nodes: dict[str, SlurmNode]) -> frozenset[str]:
        """The NodeSet's members declared a moment ago that the Slurm data does not show yet (the rest are
        forgotten here: shown, or sent 30 s ago)."""
        now, recent = self.clock(), self._declared_at.get(key, {})
        kept = {n: t for n, t in recent.items() if n not in slurm_nodes and now - t < DECLARE_EXPECTATION_S}
        self._declared_at[key] = kept
        return frozenset(kept)

    def forget(self, key: str) -> None:
        """The NodeSet is gone."""
        per_nodeset: tuple[MutableMapping[str, Any], ...] = (
            self.stats.by_state, self.declare_failed, self.unsupported, self._declare_told,
            self._collision_told, self.declaring, self.stats.pod_reads, self.progressed, self.intent_written,
            self._declared_at, self.held, self._disruption_told, self._forced, self._deleted,
        )  # fmt: skip
        for table in per_nodeset:
            table.pop(key, None)
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
        self, nodeset: KubeNodeSet, power: PowerSpec, decision: PowerDecision, mine: str, problems: Problems,
        pending: set[str], event: Event, logger: Any,
    ) -> None:  # fmt: skip
        """Creates the members' records. First the intent, in the NodeSet's status (`power.declaring`): a
        record with no comment yet is ours only if we said we were making it (a `slurmd -Z` registration
        under a member's name looks the same); no intent written, nothing declared."""
        declared, refused = [], {}
        now = self.clock()
        recent = self._declared_at.setdefault(nodeset.key, {})
        # made a moment ago, not in the Slurm cache yet: not again; its intent stays until the cache shows it
        pending.update(recent)
        sending = [n for n in decision.declare if n not in recent]
        self.progressed[nodeset.key] = bool(sending)
        if sending:
            try:
                # before the intent: a version that cannot create nodes refuses every declare, and an intent
                # written and cleared in each pass woke the NodeSet again (~140 passes/s, 2 writes each)
                self.slurm.need_node_create()
            except SlurmVersionError as exc:
                await self._cannot_declare(nodeset, exc, event, logger)
                return
            intent = {"power": {"declaring": sorted({*decision.declare, *decision.stamp})}}
            if not await problems.done(
                "status of the members being declared", self.writes.status(nodeset, intent), logger
            ):
                return
            self.intent_written[nodeset.key] = True
        for name in sending:
            port = self._port(name)
            try:
                created = await self.writes.slurm_writer.create_node(name, power.node.node_conf(name, port))
            except SlurmVersionError as exc:  # the version changed since the check
                await self._cannot_declare(nodeset, exc, event, logger)
                return
            except (SlurmError, KubeError) as exc:  # e.g. MaxNodeCount reached: the next member may fit
                refused[name] = str(exc)
                problems.append(f"declare of {name}: {exc}")
                logger.warning("Slurm refused to declare a member", slurm_node=name, error=str(exc))
                continue
            recent[name] = now
            if created:
                self.stats.declared += 1
                declared.append(name)
                if not await problems.done(
                    f"comment of {name}", self.writes.slurm_writer.set_comment(name, mine), logger
                ):
                    pending.add(name)
        if sending or decision.fresh or self.slurm.node_create:  # stale data: still unknown, kept
            self.unsupported.pop(nodeset.key, None)
        await self._refused(nodeset, refused, event)
        if declared:
            logger.info("declared members to Slurm as powered-down CLOUD nodes", count=len(declared))
            await event(
                "Normal", "Declared",
                f"declared {len(declared)} powered-down member(s) to Slurm: {', '.join(declared[:10])}"
                + (" ..." if len(declared) > 10 else ""),
            )  # fmt: skip

    async def _cannot_declare(
        self, nodeset: KubeNodeSet, exc: SlurmVersionError, event: Event, logger: Any
    ) -> None:
        """The REST version cannot create nodes: the PowerSaving condition says so, a Warning Event once."""
        self.unsupported[nodeset.key] = str(exc)
        self.progressed[nodeset.key] = False  # nothing sent
        if nodeset.uid not in self._told:
            self._told.add(nodeset.uid)
            logger.warning("Slurm cannot declare power-managed members", error=str(exc))
            await event(
                "Warning", "PowerSavingUnsupported",
                f"{exc}; name the members in slurm.conf (see the PowerSaving condition)",
            )  # fmt: skip

    async def _collisions(
        self, nodeset: KubeNodeSet, decision: PowerDecision, event: Event, logger: Any
    ) -> None:
        """Records under member names that are not this NodeSet's: a Warning Event whenever the set changes
        (the Valid condition says it too)."""
        names = tuple(decision.foreign)
        if self._collision_told.get(nodeset.key, ()) == names:
            return
        self._collision_told[nodeset.key] = names
        if names:
            logger.warning(
                "Slurm nodes under member names are not this NodeSet's: left alone", slurm_nodes=names
            )
            await event("Warning", "NameCollision", name_collision_message(names))

    async def _refused(self, nodeset: KubeNodeSet, refused: dict[str, str], event: Event) -> None:
        """The DeclareFailed condition's members, and a Warning Event whenever what is refused changes."""
        self.declare_failed[nodeset.key] = refused
        if not refused:
            self._declare_told.pop(nodeset.key, None)
            return
        message = declare_failed_message(refused)
        if self._declare_told.get(nodeset.key) != message:
            self._declare_told[nodeset.key] = message
            await event("Warning", "DeclareFailed", message)

    async def _conf_above(
        self,
        nodeset: KubeNodeSet,
        decision: PowerDecision,
        event: Event,
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

    async def _power_down_pod(self, pod: KubePod, deleted: set[str], event: Event, logger: Any) -> None:
        current = await self._read_again(pod.name)  # the cache may be a second old
        if current is None:
            return
        if not powered_down(current) or current.busy:
            return  # powered up again meanwhile, or still finishing a job
        if pod.uid in deleted:
            return  # a graceful delete answers again until the cache shows the pod terminating
        if not await self._delete_marked(pod, current, deleted, "power-down"):
            return
        self.stats.power_downs += 1
        logger.info("Slurm powered the member down: pod deleted", pod=pod.name)
        await event("Normal", "PoweredDown", f"Slurm powered {pod.name} down: deleted its pod")

    async def _read_again(self, name: str) -> SlurmNode | None:
        """The Slurm node read now, before a power action (the cache may be a second old); None: Slurm has
        no such node (nothing to act on)."""
        try:
            return await self.slurm.get_node(name)
        except SlurmNotFound:
            return None

    async def _delete_marked(self, pod: KubePod, current: SlurmNode, deleted: set[str], what: str) -> bool:
        """Deletes the pod of a power action (True once deleted), first marked with the Slurm state, the mark
        that keeps the sync engine from draining the node as the pod terminates."""
        if Keys.POWER_DOWN not in pod.annotations:
            await self.context.writer.set_annotations(
                pod_path(pod.namespace, pod.name), {Keys.POWER_DOWN: current.state_text}, what=what
            )
        if not await self.writes.delete_pod(pod):
            return False
        deleted.add(pod.uid)
        return True

    async def _replace_pod(self, pod: KubePod, deleted: set[str], event: Event, logger: Any) -> None:
        """Deletes the pod of a member Slurm powers up again whose slurmd registered it before (read again
        first): the next pass creates the pod that registers it. Marked as a power-down's, so the sync
        engine does not drain the node as the pod terminates (the job waiting for it would wait on)."""
        current = await self._read_again(pod.name)
        if current is None:
            return
        if not powering_up(current) or not registered_before(current, pod) or pod.uid in deleted:
            return
        if not await self._delete_marked(pod, current, deleted, "power-up"):
            return
        logger.info("Slurm powers the member up again: its old pod replaced", pod=pod.name)
        await event(
            "Normal", "PodReplaced",
            f"Slurm powers {pod.name} up again and its pod's slurmd registered it before: replaced",
        )  # fmt: skip

    async def _undeclare(
        self, name: str, stamps: tuple[str, str], by_name: dict[str, KubePod], event: Event,
        logger: Any,
    ) -> None:  # fmt: skip
        """`stamps`: ours by the declared or the removal stamp, as decided (power.py `_above_ceiling`)."""
        if name in by_name:
            return
        current = await self._read_again(name)
        if current is None:
            return
        if (
            current.comment not in stamps
            or current.busy
            or powering_up(current)
            or not made_over_rest(current)
        ):
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
    """The Node as pod_failures reads it (its Ready condition), with its labels (its zone)."""
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
    return {"metadata": {"name": node.name, "labels": node.labels}, "status": {"conditions": conditions}}
