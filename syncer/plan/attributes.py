"""The attribute controller: carries what a Kubernetes Node says about its machine to the Slurm nodes bound
to it: labels as Slurm features (syncer/plan/features.py) and topology labels as the node's topology
(syncer/plan/topology.py). Keyed by Slurm node name like the sync engine and fed by the same caches, so a
relabel, a restart, a re-list or a dynamic node registering all end in one level-triggered reconcile.

Writes go through the write gate and the group commit (syncer/slurm/bulk.py): a rack
relabelled at once is one `POST /nodes/` per distinct update. Features and topology are separate updates,
so a topology Slurm refuses (a unit topology.yaml does not declare) does not hold features back."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import structlog

from syncer.kube.binding import resolve
from syncer.kube.cache import KubeCache
from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeError
from syncer.kube.events import EventRecorder, ObjectRef
from syncer.kube.gate import WriteGate
from syncer.model.slurm import SlurmNode
from syncer.plan import features, topology
from syncer.plan.features import FeatureLabel
from syncer.plan.topology import TopologySpec
from syncer.runtime.backoff import Backoff
from syncer.runtime.controller import DONE, ControllerRunner, ReconcileMetrics, Result
from syncer.runtime.queue import Lane
from syncer.runtime.tasks import cancel_and_wait
from syncer.slurm.bulk import BulkWriter
from syncer.slurm.cache import NodeCache, NodeChange
from syncer.slurm.client import SlurmClient
from syncer.slurm.errors import SlurmApiError, SlurmError
from syncer.slurm.updates import NodeUpdate

log = structlog.get_logger("syncer.plan")
# a node we wrote is read fresh before another write for this long (the cache may lag behind our write)
FRESH_READ_S = 60.0
KUEUE_VERSIONS = ("v1beta1", "v1alpha1")  # where Kueue serves Topology: v1alpha1 since 0.9, newest first
# a first write of a batch waits this long for identical ones (a relabelled rack arrives as a stream of
# watch events, not at once); well inside the second a label change may take to show in Slurm
LINGER_S = 0.1
ERROR_RETRY_S = 2.0  # a write that failed (Slurm away, leadership lost) is decided again after this
EVENT_FEATURE_REFUSED = "SlurmFeatureRefused"
EVENT_TOPOLOGY_REFUSED = "SlurmTopologyRefused"


@dataclass(frozen=True)
class AttributeOptions:
    feature_labels: tuple[FeatureLabel, ...] = ()
    feature_prefix: str = features.DEFAULT_PREFIX
    topology: TopologySpec = field(default_factory=TopologySpec)

    def __post_init__(self) -> None:
        # an empty prefix would make every admin's feature look like ours
        if not self.feature_prefix or not features.FEATURE.fullmatch(self.feature_prefix):
            raise ValueError(f"feature prefix {self.feature_prefix!r}: letters, digits, '.', '_', '-', ':'")

    @property
    def enabled(self) -> bool:
        return bool(self.feature_labels) or self.topology.enabled


@dataclass
class AttributeStats:
    reconciles: int = 0
    writes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (features|topology, result)
    refused_labels: int = 0  # label values Slurm cannot take (one Event each)
    topology_unsupported: bool = False  # topology configured, the Slurm REST API has no topology_str


class AttributeController:
    name = "attributes"

    def __init__(
        self,
        *,
        slurm: SlurmClient,
        kube: KubeClient,
        slurm_cache: NodeCache,
        kube_cache: KubeCache,
        events: EventRecorder,
        gate: WriteGate,
        bulk: BulkWriter,
        options: AttributeOptions,
        workers: int,
        resync_s: float,
        reconcile_metrics: ReconcileMetrics | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.slurm = slurm
        self.slurm_cache = slurm_cache
        self.kube_cache = kube_cache
        self.events = events
        self.gate = gate
        self.bulk = bulk
        self.options = options
        self.tree = options.topology  # its tree labels replaced by a Kueue Topology's levels, if named
        self.kube = kube
        self.resync_s = resync_s
        self.stats = AttributeStats()
        self.runner = ControllerRunner(self, workers=workers, metrics=reconcile_metrics, backoff=backoff)
        self.queue = self.runner.queue
        self._written_at: dict[str, float] = {}  # Slurm node -> monotonic time of our last write to it
        self._writing: dict[tuple[str, str], asyncio.Task[None]] = {}  # (node, kind) -> its write
        self._again: set[tuple[str, str]] = set()  # (node, kind) decided again while its write was away
        self._told: dict[tuple[str, str], str] = {}  # (Node, what) -> the message an Event already said
        slurm_cache.subscribe(self._on_slurm_changes)
        slurm_cache.subscribe_reloads(self.enqueue_all)  # a new slurmctld forgot features and topology
        kube_cache.subscribe(self._on_kube_keys)

    def _on_slurm_changes(self, changes: list[NodeChange]) -> None:
        for change in changes:
            if change.kind != "removed":
                self.queue.add(change.name, lane=Lane.URGENT)

    def _on_kube_keys(self, keys: set[str]) -> None:
        for key in keys:
            self.queue.add(key, lane=Lane.URGENT)

    def enqueue_all(self) -> None:
        for name in set(self.kube_cache.slurm_names()):
            self.queue.add(name)

    async def run(self) -> None:
        await self.kube_cache.wait_synced()
        await self.slurm_cache.wait_synced()
        self._check_topology_support()
        await self._read_kueue_topology()
        self.enqueue_all()
        try:
            async with asyncio.TaskGroup() as loops:
                loops.create_task(self.queue.run(), name="attributes-queue")
                loops.create_task(self._resync(), name="attributes-resync")
        finally:
            await self.stop()

    async def stop(self) -> None:
        self.queue.stop()
        await cancel_and_wait(list(self._writing.values()))

    async def _resync(self) -> None:
        """Every key now and then (level-triggered safety net), and at once when leadership is gained."""
        next_at, was_leading = time.monotonic() + self.resync_s, self.gate.leading
        while True:
            await asyncio.sleep(1.0)
            now, leading = time.monotonic(), self.gate.leading
            if now >= next_at or (leading and not was_leading):
                self._written_at = {k: t for k, t in self._written_at.items() if now - t < FRESH_READ_S}
                await self._read_kueue_topology()
                self.enqueue_all()
                next_at = now + self.resync_s
            was_leading = leading

    async def _read_kueue_topology(self) -> None:
        """With `--topology-kueue NAME`, the tree labels are that Kueue Topology's levels (read at start and
        every resync; a change looks at every node again). Unreadable: the flags' labels stay in use."""
        spec = self.options.topology
        if not spec.kueue_topology:
            return
        found: tuple[str, ...] | None = None
        errors = []
        for version in KUEUE_VERSIONS:
            try:
                found = topology.kueue_levels(
                    await self.kube.get(f"/apis/kueue.x-k8s.io/{version}/topologies/{spec.kueue_topology}")
                )
                break
            except KubeError as exc:
                errors.append(f"{version}: {exc}")
        if found is None or not found:
            log.warning(
                "kueue topology not read: the configured tree labels stay in use",
                topology=spec.kueue_topology, errors=errors or ["no levels above the node"],
            )  # fmt: skip
            return
        if found != self.tree.tree_labels:
            log.info("tree labels from the kueue topology", topology=spec.kueue_topology, labels=list(found))
            self.tree = replace(spec, tree_labels=found)
            self.enqueue_all()

    def _check_topology_support(self) -> None:
        version = self.slurm.version
        if self.options.topology.enabled and version is not None and not version.topology:
            self.stats.topology_unsupported = True
            log.warning(
                "node topology from labels needs Slurm 25.05+ (REST v0.0.43+): not written",
                api_version=version.name, release=self.slurm.release or None,
            )  # fmt: skip

    # -- one key ----------------------------------------------------------------------------------
    async def reconcile(self, name: str) -> Result:
        self.stats.reconciles += 1
        if not self.kube_cache.synced or not self.slurm_cache.synced:
            return Result(requeue_after=1.0)
        slurm_node = self.slurm_cache.nodes.get(name)
        binding = resolve(name, self.kube_cache)
        kube_node = binding.node
        if slurm_node is None or not binding.bound or kube_node is None or not self.gate.leading:
            return DONE
        labels = kube_node.labels
        owned: tuple[str, ...] | None = None
        if self.options.feature_labels:
            want = features.wanted(labels, self.options.feature_labels, self.options.feature_prefix)
            for refused in want.refused:
                await self._tell(kube_node.name, refused.label, EVENT_FEATURE_REFUSED, refused.message)
            owned = want.owned
        place: str | None = None
        if self.options.topology.enabled and not self.stats.topology_unsupported:
            wanted_place = topology.wanted(labels, self.tree)
            for label, value in wanted_place.refused:
                message = f"label {label}={value!r} names no Slurm topology unit: letters, digits, . _ - only"
                await self._tell(kube_node.name, label, EVENT_TOPOLOGY_REFUSED, message)
            place = wanted_place.topology
        updates = self._updates(slurm_node, owned, place)
        if updates and time.monotonic() - self._written_at.get(name, -math.inf) < FRESH_READ_S:
            # our own write may not be in the cache yet (with --slurm-metrics-url a feature change moves no
            # node count, so it is listed only at the floor): decide on the node as Slurm has it now
            with contextlib.suppress(SlurmError):
                updates = self._updates(await self.slurm.get_node(name), owned, place)
        for kind, update in updates:
            self._send(name, kube_node.name, kind, update)
        return DONE

    def _updates(
        self, node: SlurmNode, owned: tuple[str, ...] | None, place: str | None
    ) -> list[tuple[str, NodeUpdate]]:
        updates: list[tuple[str, NodeUpdate]] = []
        if owned is not None and (update := self._features_update(node, owned)) is not None:
            updates.append(("features", update))
        if (new := topology.merged(node.topology, place, self.tree)) is not None:
            updates.append(("topology", NodeUpdate(topology=new)))
        return updates

    def _features_update(self, node: SlurmNode, owned: tuple[str, ...]) -> NodeUpdate | None:
        prefix = self.options.feature_prefix
        available = features.with_owned(node.features, owned, prefix)
        active = features.with_owned(node.active_features, owned, prefix)
        if available is None and active is None:
            return None
        return NodeUpdate(
            features=available if available is not None else node.features,
            features_act=active if active is not None else node.active_features,
        )

    def _send(self, name: str, kube_node: str, kind: str, update: NodeUpdate) -> None:
        """Starts the write unless one of this kind is on its way for the node (its end looks again). The
        write runs beside the worker, so a rack relabelled at once waits in the group commit together: a
        few bulk requests, not one per worker's node."""
        key = (name, kind)
        if key in self._writing:
            self._again.add(key)
            return
        if not self.gate.check():
            log.info("dry-run: would update slurm node", slurm_node=name, kind=kind, update=update.body())
            self.stats.writes[kind, "dry-run"] += 1
            return
        self._writing[key] = asyncio.create_task(
            self._write(name, kube_node, kind, update), name=f"{kind}-{name}"
        )

    async def _write(self, name: str, kube_node: str, kind: str, update: NodeUpdate) -> None:
        again_s = 0.0
        try:
            await self.bulk.update(name, update, linger_s=LINGER_S)
            self.stats.writes[kind, "ok"] += 1
            self._written_at[name] = time.monotonic()
            log.info("slurm node updated from labels", slurm_node=name, kind=kind, update=update.body())
        except SlurmApiError as exc:
            result = "refused" if kind == "topology" else "error"  # topology: a unit topology.yaml lacks
            self.stats.writes[kind, result] += 1
            log.warning("slurm refused a node update from labels", slurm_node=name, kind=kind, error=str(exc))
            if kind == "topology":
                message = f"Slurm refused topology {update.topology!r} for node {name}: {exc}"
                await self._tell(kube_node, "topology", EVENT_TOPOLOGY_REFUSED, message)
            again_s = self.resync_s
        except Exception as exc:  # NotLeader, Slurm unreachable: decided again from fresh state
            self.stats.writes[kind, "error"] += 1
            log.warning("node update from labels failed", slurm_node=name, kind=kind, error=str(exc))
            again_s = ERROR_RETRY_S
        finally:
            del self._writing[name, kind]
        if again_s:
            self.queue.add_after(name, again_s)
        elif (name, kind) in self._again:  # a change came while this was on its way: look at it now
            self._again.discard((name, kind))
            self.queue.add(name)

    @property
    def writing(self) -> int:
        """Node updates on their way to Slurm."""
        return len(self._writing)

    async def _tell(self, node: str, what: str, reason: str, message: str) -> None:
        """One Warning Event on the Node per distinct problem (not one per reconcile)."""
        if self._told.get((node, what)) == message:
            return
        self._told[node, what] = message
        self.stats.refused_labels += reason == EVENT_FEATURE_REFUSED
        log.warning("node attribute not carried to slurm", node=node, reason=reason, detail=message)
        await self.events.record(ObjectRef.node(node), "Warning", reason, message)
