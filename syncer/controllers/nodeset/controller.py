"""The NodeSet controller: watches NodeSets, their pods, the Nodes and the Slurm cache, and carries
out `plan()` one NodeSet at a time. Removals go through the sync controller (which drains the Slurm node
with the scale-in reason); pods and Slurm records are deleted only after a fresh read from Slurm
confirms the node is drained with nothing running or completing. A controller of the runtime:
`reconcile(key) -> Result`, retried with the runtime's backoff when it raises. Ownership is by
identity (owner UID, the removal stamp on Slurm records; see plan.py), never by name prefix."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from syncer.control.context import ControllerContext
from syncer.control.registration import Registration, when_enabled
from syncer.control.scope import Scope
from syncer.controllers.nodeset import manifests
from syncer.controllers.nodeset.members import slurm_names
from syncer.controllers.nodeset.options import OPTIONS, NodeSetOptions, options_from
from syncer.controllers.nodeset.plan import (
    SCALE_IN,
    Plan,
    owns,
    plan,
    removable,
    removal_stamp,
    removed_by_us,
    slurm_name,
)
from syncer.controllers.nodeset.pod_failures import ended_text
from syncer.controllers.nodeset.power import starts_powering_up
from syncer.controllers.nodeset.power_actions import PassIncomplete, PowerActions, Problems
from syncer.controllers.nodeset.spec import NodeSetSpec, SpecError, parse
from syncer.controllers.nodeset.status import compute_status, invalid_status, merge_patched
from syncer.controllers.nodeset.writes import CREATED, DRY_RUN, NodeSetWrites
from syncer.kube.errors import KubeError
from syncer.kube.informer import Informer
from syncer.kube.writer import pod_path
from syncer.model import cluster
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubeNodeSet, KubePod
from syncer.model.times import rfc3339
from syncer.runtime.controller import DONE, Controller, Result
from syncer.runtime.queue import Lane, WorkQueue
from syncer.runtime.watch import Watch, Watches
from syncer.slurm.cache import NodeChange
from syncer.slurm.errors import SlurmApiError, SlurmError, SlurmNotFound

log = structlog.get_logger("syncer.controllers.nodeset")


CREATE_EXPECTATION_S = 30.0  # a pod we created and the informer has not shown yet is not POSTed again
CREATES_AT_ONCE = 16  # powered-up members' pod POSTs in flight at once (the writer's QPS limit still holds)


@dataclass
class NodeSetStats:
    reconciles: int = 0  # passes begun
    pods_created: int = 0  # member pods created
    pods_deleted: int = 0  # member pods deleted once removed from Slurm's work
    ended_pods: int = 0  # member pods deleted because they ended (Failed, Succeeded)
    slurm_nodes_deleted: int = 0  # Slurm records deleted (nodeOnScaleIn: Delete)
    removals_started: int = 0  # members marked for removal (their drain asked for)
    node_events: int = 0  # Kubernetes Node changes seen
    node_requeues: int = 0  # ... that re-queued a DaemonSet-mode NodeSet
    timed_out: dict[str, int] = field(default_factory=dict)  # NodeSet key -> nodes past drainTimeout
    desired: dict[str, int] = field(default_factory=dict)  # NodeSet key -> desired members
    errors: int = 0
    # NodeSet key -> passes completed, and when the last one began (its decisions were made from then on)
    passes: dict[str, int] = field(default_factory=dict)
    pass_began: dict[str, float] = field(default_factory=dict)


def _nodeset_key(old: KubeNodeSet | None, new: KubeNodeSet | None) -> list[str]:
    nodeset = new or old
    return [nodeset.key] if nodeset is not None else []


def _selection_may_change(nodeset: KubeNodeSet, old: KubeNode | None, new: KubeNode | None) -> bool:
    """Whether a Node change can change which Nodes the NodeSet's nodeSelector selects."""
    if old is None or new is None:
        return True
    selector = nodeset.spec.get("nodeSelector") or {}
    if not isinstance(selector, dict):
        return True  # invalid: the reconcile reports it; no reason to be clever here
    return any(old.labels.get(key) != new.labels.get(key) for key in selector)


class NodeSetController(Controller):
    name = "nodeset"  # the controller label of its reconcile metrics and logs
    workers = 2

    def __init__(self, context: ControllerContext, options: NodeSetOptions) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.scale_in = context.scale_in
        self.writes = NodeSetWrites(context)
        self.power = PowerActions(
            context,
            self.writes,
            context.owner_prefix,
            port_base=options.power_port_base,
            port_of=options.power_ports,
            node_loss_limit=options.node_loss_limit,
        )
        self.requeue_s = options.requeue_s
        self.clock = context.clock
        self.owner_prefix = context.owner_prefix
        # this release's NodeSets (labelled with its cluster identity) and, adopting, the unlabelled ones
        self.scope: Scope[KubeNodeSet] = Scope(
            context, manifests.nodesets_path(context.kube_cache.namespace), "NodeSet", lambda n: n.key,
            "nodesets",
        )  # fmt: skip
        self.informer: Informer[KubeNodeSet] = self.scope.informer
        self.stats = NodeSetStats()
        self._pods: dict[str, set[str]] = {}  # NodeSet key -> pod keys
        self._pdbs: set[str] = set()  # NodeSet uids whose PodDisruptionBudget exists
        self._reported: set[tuple[str, str]] = set()  # (kind, object) Warning events sent once
        # pod key -> when we created it, until the pod informer shows it: a reconcile requeued before then
        # would POST it again for a 409 (client-go's "expectations"); bounded in case an event is lost
        self._created: dict[str, float] = {}
        context.nodesets.provide(self.members)  # a SlurmPartition's `nodes.nodeSets`

    # -- what names a NodeSet ---------------------------------------------------------------------
    def watches(self) -> Watches:
        return (
            Watch(self.scope.subscribe, _nodeset_key),
            Watch(self.context.kube_cache.pods.subscribe, self._pod_keys),
            Watch(self.context.kube_cache.nodes.subscribe, self._node_keys),
            Watch(self.context.slurm_cache.subscribe, self._slurm_keys),
            # a member Slurm starts powering up: its NodeSet ahead of other NodeSets' keys (a resync)
            Watch(self.context.slurm_cache.subscribe, self._power_up_keys, lane=Lane.URGENT),
            # another REST API version (Slurm upgraded to 25.11+): members can be declared (POST /new/node/);
            # the only wake-up of a NodeSet left with only those to do (not requeued while it waits)
            Watch(self.context.slurm.subscribe_versions, self._every_nodeset),
            # Slurm data fresh again: what a pass on stale data withheld (declares, undeclares, deletes of
            # records) while its plan was otherwise idle (DONE) has no node change to bring it back
            Watch(self.context.slurm_cache.subscribe_fresh, self._every_nodeset),
        )

    @property
    def queue(self) -> WorkQueue:
        return self.runner.queue

    def _every_nodeset(self) -> list[str]:
        return list(self.informer.items)

    def _pod_keys(self, old: KubePod | None, new: KubePod | None) -> list[str]:
        """The NodeSet a pod names by its label; the index of each NodeSet's pods kept on the way."""
        keys = []
        for pod, present in ((old, False), (new, True)):
            if pod is None or Keys.NODESET_LABEL not in pod.labels:
                continue
            key = f"{pod.namespace}/{pod.labels[Keys.NODESET_LABEL]}"
            members = self._pods.setdefault(key, set())
            if present:
                members.add(pod.key)
                self._created.pop(pod.key, None)  # seen: the cache speaks for it from now on
            else:
                members.discard(pod.key)
            keys.append(key)
        return keys

    def _node_keys(self, old: KubeNode | None, new: KubeNode | None) -> list[str]:
        """A DaemonSet-mode NodeSet is planned from each Node's name and labels only (see plan's
        `_members`): a Node added or deleted, or a change of a label its nodeSelector names, re-queues
        it; status (conditions, heartbeats), cordons, taints and annotations do not."""
        self.stats.node_events += 1
        self.power.zones.update(old, new)  # which zones are disrupted (every Node, every change)
        if old is not None and new is not None and old.labels == new.labels:
            return []  # most Node updates at scale: kubelet heartbeats and condition changes
        keys = [
            nodeset.key
            for nodeset in self.informer.items.values()
            if nodeset.spec.get("mode") == "DaemonSet" and _selection_may_change(nodeset, old, new)
        ]
        self.stats.node_requeues += len(keys)
        return keys

    def _slurm_keys(self, changes: list[NodeChange]) -> list[str]:
        if not self.informer.items:
            return []
        names = {change.name for change in changes}
        # a trigger only (a prefix may wake a NodeSet needlessly): ownership is decided in plan()
        return [
            nodeset.key
            for nodeset in self.informer.items.values()
            if any(name.startswith(nodeset.name + "-") for name in names)
        ]

    def _power_up_keys(self, changes: list[NodeChange]) -> list[str]:
        """The power-managed NodeSets whose member (`<name>-<ordinal>`, exactly) a change shows starting to
        power up."""
        starting = {starts_powering_up(c.name, c.before, c.after) for c in changes} - {None}
        if not starting:
            return []
        return [
            nodeset.key
            for nodeset in self.informer.items.values()
            if nodeset.name in starting and "power" in nodeset.spec
        ]

    async def keys(self) -> list[str]:
        return list(self.informer.items) + [
            key for key in self.scope.waiting() if key not in self.informer.items
        ]

    # -- lifecycle --------------------------------------------------------------------------------
    def loops(self) -> dict[str, Callable[[], Awaitable[None]]]:
        return self.scope.loops()

    async def prepare(self) -> None:
        await self.scope.synced()
        await self.context.kube_cache.wait_synced()

    # -- one NodeSet ------------------------------------------------------------------------------
    def pods_of(self, nodeset: KubeNodeSet) -> list[KubePod]:
        items = self.context.kube_cache.pods.items
        pods = [items[k] for k in sorted(self._pods.get(nodeset.key, ())) if k in items]
        # only pods this NodeSet owns, by UID: a stray pod that copies the label is not ours to delete
        return [p for p in pods if owns(nodeset, p)]

    def members(self, namespace: str, name: str) -> list[str] | None:
        """The Slurm nodes of a NodeSet (a SlurmPartition's `nodes.nodeSets`), sorted: its pods' and, when
        power-managed, every member declared to Slurm (members.py); None: no such NodeSet."""
        nodeset = self.informer.items.get(f"{namespace}/{name}")
        if nodeset is None:
            return None
        pods, name_of = self.pods_of(nodeset), self.context.kube_cache.slurm_name_of
        return slurm_names(nodeset, pods, self.context.slurm_cache.nodes, name_of)

    async def reconcile(self, key: str) -> Result:
        """One NodeSet. A Kubernetes or Slurm error is counted and raised: the runner retries the key with
        its one backoff policy (and drops the remaining writes when leadership is lost)."""
        self.stats.reconciles += 1
        nodeset = self.informer.items.get(key)
        waiting = self.scope.waiting().get(key)
        if nodeset is None and waiting is not None and not waiting.deleting:
            # no release's yet: this one takes it, and plans it once its informer shows it as its own
            namespace, name = key.split("/", 1)
            if await self.scope.adopt(manifests.nodeset_path(namespace, name), f"NodeSet {key}"):
                mine = self.context.cluster
                message = f"taken by release {mine}: labelled {cluster.LABEL}={mine}"
                await self._event(waiting, "Normal", "Adopted", message)
            return DONE
        if nodeset is None or nodeset.deleting:
            self._forget(key)
            return DONE
        logger = log.bind(nodeset=key)
        began = self.clock()
        try:
            result = await self._reconcile(nodeset, logger)
        except (KubeError, SlurmError, PassIncomplete):
            self.stats.errors += 1
            raise
        self.stats.passes[key] = self.stats.passes.get(key, 0) + 1
        self.stats.pass_began[key] = began
        return result

    def _forget(self, key: str) -> None:
        for slurm_node, _ in self.scale_in.owned_by(key):
            self.scale_in.set(slurm_node, None)
        self.stats.timed_out.pop(key, None)
        self.stats.desired.pop(key, None)
        self.stats.passes.pop(key, None)
        self.stats.pass_began.pop(key, None)
        self.power.forget(key)

    async def _reconcile(self, nodeset: KubeNodeSet, logger: Any) -> Result:
        now = self.clock()
        try:
            spec = parse(nodeset.name, nodeset.spec)
        except SpecError as exc:
            if self._once("invalid", f"{nodeset.key}@{nodeset.generation}"):
                logger.warning("nodeset spec invalid: nothing done until it is fixed", error=str(exc))
                await self._event(nodeset, "Warning", "InvalidSpec", str(exc))
            await self._write_status(nodeset, invalid_status(nodeset, str(exc), rfc3339(now) or ""))
            return DONE
        pods = self.pods_of(nodeset)
        nodes = list(self.context.kube_cache.nodes.items.values()) if spec.mode == "DaemonSet" else []
        fresh = self.context.slurm_cache.synced and not self.context.slurm_cache.stale
        in_flight = self.power.in_flight(nodeset.key, self.context.slurm_cache.nodes)
        result = plan(
            nodeset, spec, pods, self.context.slurm_cache.nodes,
            nodes=nodes, slurm_fresh=fresh, now=now, owner_prefix=self.owner_prefix, in_flight=in_flight,
        )  # fmt: skip
        if fresh and SCALE_IN in result.mark_removal.values() and spec.mode == "Replicas":
            # which members go depends on who is busy: choose on a list read now, not a poll ago
            await self.context.slurm_cache.refresh()
            result = plan(
                nodeset, spec, pods, self.context.slurm_cache.nodes,
                nodes=nodes, slurm_fresh=True, now=now, owner_prefix=self.owner_prefix, in_flight=in_flight,
            )  # fmt: skip
        self.stats.desired[nodeset.key] = result.desired
        self.stats.timed_out[nodeset.key] = len(result.timed_out)
        by_name = {p.name: p for p in pods}
        problems = Problems()
        # Slurm waits on these (a job CONFIGURING on each): their pods first, side by side, before any other
        # write of the pass; the plan chose them from Slurm saying POWERING_UP, as for any create
        powered_up = result.power.powered_up if result.power is not None else set()
        first = [m for m in result.create if m.name in powered_up]
        await self._create_pods(nodeset, spec, first, problems, logger, powered_up=True)
        await self._ensure_pdb(nodeset)
        await self._busy_labels(nodeset, by_name, result)
        await self._cluster_labels(by_name)
        await self._unmark(nodeset, by_name, result, logger)
        await self._mark(nodeset, by_name, result, now, logger)
        await self._stamp(nodeset, result, logger)
        self._scale_in_marks(nodeset, by_name, result)
        if spec.power is not None and result.power is not None:

            async def event(type_: str, reason: str, message: str) -> None:
                await self._event(nodeset, type_, reason, message)

            problems += await self.power.apply(
                nodeset, spec.power, result.power, by_name, self.context.slurm_cache.nodes, event, logger
            )
        # one member's failed write stops no other member's: each is listed, the pass raises at its end
        for name in result.delete_pods:
            pod = by_name[name]
            step = (
                self._delete_ended_pod(nodeset, pod, result.ended[name], logger)
                if name in result.ended
                else self._delete_pod(nodeset, pod, logger)
            )
            await problems.guard(f"delete of pod {name}", step, logger)
        for name in result.delete_slurm_nodes:
            await problems.guard(f"delete of {name}", self._delete_slurm_node(nodeset, name, logger), logger)
        rest = [m for m in result.create if m.name not in powered_up]
        await self._create_pods(nodeset, spec, rest, problems, logger)
        timeout_check = await self._report_timeouts(nodeset, spec, by_name, result, logger)
        status = compute_status(
            nodeset, spec, result, pods, self.context.slurm_cache.nodes,
            slurm_fresh=fresh, slurm_error=self.context.slurm_cache.cause, now=rfc3339(now) or "",
            power_unsupported=self.power.unsupported.get(nodeset.key, ""),
            declare_failed=self.power.declare_failed.get(nodeset.key, {}),
            declaring=self.power.declaring.get(nodeset.key, []),
        )  # fmt: skip
        # this pass wrote an intent (power.declaring) the informer's copy may not show yet: its end is written
        await self._write_status(nodeset, status, force=self.power.intent_written.pop(nodeset.key, False))
        if problems:
            raise PassIncomplete(problems)  # the runner logs it and retries with its backoff
        # caches usually trigger sooner; a pending drain timeout is checked on time without a change
        # records left by the per-pass bound: at once, unless this pass sent none (they wait for the cache)
        more = result.power is not None and result.power.more and self.power.progressed.get(nodeset.key, True)
        # members this REST version cannot declare wait for another version (the subscribe_versions Watch),
        # not for requeue_s: nothing else lets them be declared
        idle = result.idle_but_declares if nodeset.key in self.power.unsupported else result.idle
        delays = [d for d in (None if idle else self.requeue_s, timeout_check) if d is not None]
        delays += [0.0] if more else []
        return Result(requeue_after=min(delays)) if delays else DONE

    def _once(self, kind: str, what: str) -> bool:
        if (kind, what) in self._reported:
            return False
        self._reported.add((kind, what))
        return True

    async def _event(self, nodeset: KubeNodeSet, type_: str, reason: str, message: str) -> None:
        await self.writes.event(nodeset, type_, reason, message)

    async def _write_status(
        self, nodeset: KubeNodeSet, status: dict[str, Any], *, force: bool = False
    ) -> None:
        # compared as stored after the merge patch: a key the patch does not name stays, so a status that
        # differs only by such a key would be written again every pass
        if force or merge_patched(nodeset.status, status) != nodeset.status:
            await self.writes.status(nodeset, status)

    async def _ensure_pdb(self, nodeset: KubeNodeSet) -> None:
        if nodeset.uid not in self._pdbs and await self.writes.busy_pdb(nodeset):
            self._pdbs.add(nodeset.uid)

    async def _busy_labels(self, nodeset: KubeNodeSet, by_name: dict[str, KubePod], result: Plan) -> None:
        for name, busy in sorted(result.busy_labels.items()):
            pod = by_name[name]
            if (pod.labels.get(Keys.BUSY_LABEL) == "true") == busy or pod.terminating:
                continue
            await self.writes.pod_metadata(
                pod, "labels", {Keys.BUSY_LABEL: "true" if busy else None}, "busy label"
            )

    async def _cluster_labels(self, by_name: dict[str, KubePod]) -> None:
        """Its pods made before the cluster label existed get it (once each), so that no other release keeps
        them in its caches from then on (syncer/model/cluster.py)."""
        for name in sorted(by_name):
            pod = by_name[name]
            if cluster.LABEL in pod.labels or pod.terminating:
                continue
            await self.writes.pod_metadata(
                pod, "labels", {cluster.LABEL: self.context.cluster}, "cluster label"
            )

    async def _mark(
        self, nodeset: KubeNodeSet, by_name: dict[str, KubePod], result: Plan, now: float, logger: Any
    ) -> None:
        for name, why in sorted(result.mark_removal.items()):
            pod = by_name[name]
            wanted: dict[str, str | None] = {Keys.REMOVAL: why, Keys.REMOVAL_SINCE: f"{now:.0f}"}
            if not await self.writes.pod_metadata(pod, "annotations", wanted, "removal"):
                continue  # a dry run (the writer logged it), marked already (our last pass), or gone
            self.stats.removals_started += 1
            verb = "scale-in" if why == "scale-in" else "rolling update"
            logger.info(f"{verb}: draining Slurm node before removing its pod", pod=name)
            await self._event(
                nodeset, "Normal", "ScalingIn" if why == "scale-in" else "Updating",
                f"{verb}: draining Slurm node {slurm_name(pod)}; its pod goes once no job runs there",
            )  # fmt: skip

    async def _unmark(
        self, nodeset: KubeNodeSet, by_name: dict[str, KubePod], result: Plan, logger: Any
    ) -> None:
        for name in result.unmark:
            pod = by_name[name]
            wanted: dict[str, str | None] = {Keys.REMOVAL: None, Keys.REMOVAL_SINCE: None}
            if await self.writes.pod_metadata(pod, "annotations", wanted, "removal cancelled") is None:
                continue  # gone: nothing stays
            self.scale_in.set(slurm_name(pod), None)
            logger.info("scale-in cancelled: the node stays", pod=name)
            await self._event(nodeset, "Normal", "ScaleInCancelled", f"{name} stays: replicas went up again")

    def _scale_in_marks(self, nodeset: KubeNodeSet, by_name: dict[str, KubePod], result: Plan) -> None:
        """The sync controller drains exactly the Slurm nodes this NodeSet is removing (rebuilt every time,
        so a restart picks the removals up again from the pods' annotations)."""
        present = {slurm_name(p) for p in by_name.values()}
        ref = nodeset.ref
        for name in self.scale_in.of(ref):
            if name in present and name not in result.scale_in_marks:
                self.scale_in.set(name, None)
        for name in result.scale_in_marks:
            if self.scale_in.get(name) != ref:
                self.scale_in.set(name, ref)

    async def _stamp(self, nodeset: KubeNodeSet, result: Plan, logger: Any) -> None:
        """Records on each Slurm node being removed that this NodeSet (by identity) removes it: only
        such a record is deleted after its pod, whatever its name or drain reason say."""
        stamp = removal_stamp(nodeset)
        for name, comment in [(n, stamp) for n in result.stamp] + [(n, "") for n in result.unstamp]:
            await self.writes.slurm_writer.set_comment(name, comment)
        for name in result.unstampable:
            if self._once("unstampable", name):
                logger.warning(
                    "slurm node has someone else's comment: its record is kept after its pod goes",
                    slurm_node=name,
                )

    async def _delete_pod(self, nodeset: KubeNodeSet, pod: KubePod, logger: Any) -> None:
        name = slurm_name(pod)
        try:
            current = await self.context.slurm.get_node(name)  # the cache may be a second old
        except SlurmNotFound:
            current = None
        if current is not None and not removable(current):
            logger.info("pod removal waits: Slurm node not drained any more", pod=pod.name)
            return
        if not await self.writes.delete_pod(pod):
            return
        self.stats.pods_deleted += 1
        logger.info("pod deleted: its Slurm node is drained and idle", pod=pod.name)
        await self._event(
            nodeset, "Normal", "DeletedPod", f"deleted pod {pod.name}: Slurm node {name} drained"
        )

    async def _delete_ended_pod(self, nodeset: KubeNodeSet, pod: KubePod, stays: bool, logger: Any) -> None:
        """A pod that ended (Failed: evicted; Succeeded: slurmd exited) runs nothing, whatever Slurm shows:
        deleted without a drain; `stays`: its member gets a new pod once it is gone. Read first for the
        kubelet's reason, and so a pod already deleted (the cache lags) is not reported twice."""
        try:
            raw = await self.context.kube.get(pod_path(pod.namespace, pod.name))
        except KubeError as exc:
            if exc.status == 404:
                return
            raise
        meta, status = raw.get("metadata") or {}, raw.get("status") or {}
        why = ended_text(status)
        if meta.get("uid") != pod.uid or meta.get("deletionTimestamp") or why is None:
            return  # replaced, deleted already, or (never) running again
        if not await self.writes.delete_pod(pod):
            return
        self.stats.ended_pods += 1
        logger.warning("pod ended: deleted", pod=pod.name, why=why, replaced=stays)
        then = "a new pod takes its place" if stays else "its member is not kept"
        await self._event(nodeset, "Warning", "PodEnded", f"pod {pod.name} ended ({why}): deleted, {then}")

    async def _delete_slurm_node(self, nodeset: KubeNodeSet, name: str, logger: Any) -> None:
        try:
            current = await self.context.slurm.get_node(name)
        except SlurmNotFound:
            self.scale_in.set(name, None)
            return
        if current.busy or not removed_by_us(current, nodeset, self.owner_prefix):
            logger.info("slurm node kept: busy or no longer drained by us", slurm_node=name)
            return
        try:
            if not await self.writes.slurm_writer.delete_node(name):
                return
        except SlurmApiError as exc:  # a slurm.conf node (500, error 2028): the rest of the pass goes on
            logger.warning("Slurm refused to delete the node", slurm_node=name, error=str(exc))
            if self._once("delete-refused", name):
                await self._event(
                    nodeset, "Warning", "DeleteSlurmNodeFailed",
                    f"Slurm refused to delete node {name} ({exc}); if slurm.conf names it, remove its "
                    f"NodeName={name} line and run scontrol reconfigure",
                )  # fmt: skip
            return
        self.scale_in.set(name, None)
        self.stats.slurm_nodes_deleted += 1
        logger.info("slurm node deleted after its pod", slurm_node=name)
        await self._event(
            nodeset, "Normal", "DeletedSlurmNode", f"deleted Slurm node {name}: its pod is gone"
        )

    async def _create_pods(
        self, nodeset: KubeNodeSet, spec: NodeSetSpec, members: list[Any], problems: Problems, logger: Any,
        *, powered_up: bool = False,
    ) -> None:  # fmt: skip
        """The members' pods, then their Events. `powered_up` (told by the plan's view: the cache may have
        moved on meanwhile): Slurm waits on each, so they are POSTed side by side (a batch costs one round
        trip, not one per pod) and no Event goes in front of one. One refused create stops no other."""
        limit = asyncio.Semaphore(CREATES_AT_ONCE if powered_up else 1)

        async def create(member: Any) -> bool | None:
            async with limit:
                step = self._create_pod(nodeset, spec, member, logger)
                return await problems.guard(f"create of pod {member.name}", step, logger)

        outcomes = await asyncio.gather(*(create(m) for m in members), return_exceptions=True)
        for outcome in outcomes:  # each ran to its end; one that ended the pass (NotLeader) is raised now
            if isinstance(outcome, BaseException):
                raise outcome
        for member, done in zip(members, outcomes, strict=True):
            if not done:
                continue
            await self._event(nodeset, "Normal", "CreatedPod", f"created pod {member.name}")
            if powered_up:
                self.power.powering_up(member.name)
                await self._event(
                    nodeset, "Normal", "PoweringUp", f"Slurm powers {member.name} up: created its pod"
                )

    async def _create_pod(self, nodeset: KubeNodeSet, spec: NodeSetSpec, member: Any, logger: Any) -> bool:
        """True when this call created the pod (its Events are the caller's)."""
        key = f"{nodeset.namespace}/{member.name}"
        since = self._created.get(key)
        if since is not None and self.clock() - since < CREATE_EXPECTATION_S:
            return False  # created a moment ago; the informer has not shown it yet
        try:
            outcome = await self.writes.create_pod(nodeset, spec, member)
            if outcome != DRY_RUN:
                self._created[key] = self.clock()
            if outcome != CREATED:
                return False  # exists already (the cache has not seen it yet), or a dry run
        except KubeError as exc:
            if exc.status in (400, 422):
                if self._once("bad-template", f"{nodeset.key}@{nodeset.generation}"):
                    await self._event(
                        nodeset, "Warning", "FailedCreate", f"pod {member.name} rejected: {exc.message}"
                    )
                logger.warning("pod rejected by the API server: fix spec.template", error=exc.message)
                return False
            raise
        self.stats.pods_created += 1
        logger.info("pod created", pod=member.name)
        return True

    async def _report_timeouts(
        self, nodeset: KubeNodeSet, spec: NodeSetSpec, by_name: dict[str, KubePod], result: Plan, logger: Any
    ) -> float | None:
        for name in result.timed_out:
            pod = by_name[name]
            if not self._once("timeout", pod.uid or pod.key):
                continue
            message = (
                f"Slurm node {slurm_name(pod)} still runs jobs {spec.drain_timeout_s:.0f} s after its drain "
                "began; it is not forced: let the jobs finish or cancel them (scancel -w)"
            )
            logger.warning("drain timeout", pod=name)
            await self._event(nodeset, "Warning", "DrainTimeout", message)
        # the next check of a pending drain timeout, so it is reported on time without any change
        pending = [
            float(by_name[n].annotations.get(Keys.REMOVAL_SINCE, "0") or 0) + spec.drain_timeout_s
            for n in result.draining
            if n in by_name and n not in result.timed_out
        ]
        return max(0.5, min(pending) - self.clock() + 0.5) if pending else None


REGISTRATION = Registration(
    "nodeset", when_enabled(NodeSetController), NodeSetOptions(), OPTIONS, options_from
)
