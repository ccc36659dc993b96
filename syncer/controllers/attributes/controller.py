"""The attribute controller: carries what a Kubernetes Node says about its machine to the Slurm nodes bound to
it: labels as Slurm features (`features.py` beside it) and topology labels as the node's topology
(`topology.py`). Keyed by Slurm node name like the sync engine and fed by the same caches, so a relabel, a
restart, a re-list or a dynamic node registering all end in one level-triggered reconcile.

Writes go through the context's Slurm writer (the write gate) and its group commit (syncer/control/bulk.py),
beside the reconcile (the runner retries a failed one as a failed reconcile): a rack relabelled at once
is one `POST /nodes/` per distinct update. Features and topology are separate updates,
so a topology Slurm refuses (a unit topology.yaml does not declare) does not hold features back."""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import structlog

from syncer.control.binding import resolve
from syncer.control.context import ControllerContext
from syncer.control.registration import Registration, when_enabled
from syncer.controllers.attributes import features, topology
from syncer.controllers.attributes.options import OPTIONS, AttributeOptions, options_from
from syncer.kube.errors import KubeError
from syncer.kube.events import ObjectRef
from syncer.model.slurm import SlurmNode
from syncer.runtime.controller import DONE, Controller, Result
from syncer.runtime.errors import RetryAfter
from syncer.runtime.queue import Lane, WorkQueue
from syncer.runtime.watch import Watch, Watches
from syncer.slurm.cache import NodeChange
from syncer.slurm.errors import SlurmApiError, SlurmError
from syncer.slurm.updates import NodeUpdate

log = structlog.get_logger("syncer.controllers.attributes")
# a node we wrote is read fresh before another write for this long (the cache may lag behind our write)
FRESH_READ_S = 60.0
KUEUE_VERSIONS = ("v1beta1", "v1alpha1")  # where Kueue serves Topology: v1alpha1 since 0.9, newest first
# a first write of a batch waits this long for identical ones (a relabelled rack arrives as a stream of
# watch events, not at once); well inside the second a label change may take to show in Slurm
LINGER_S = 0.1
EVENT_FEATURE_REFUSED = "SlurmFeatureRefused"
EVENT_TOPOLOGY_REFUSED = "SlurmTopologyRefused"


@dataclass
class AttributeStats:
    reconciles: int = 0
    writes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (features|topology, result)
    refused_labels: int = 0  # label values Slurm cannot take (one Event each)
    topology_unsupported: bool = False  # topology configured, the Slurm REST API has no topology_str


class AttributeController(Controller):
    name = "attributes"

    def __init__(self, context: ControllerContext, options: AttributeOptions) -> None:
        self.context = context  # clients, caches, writers: shared by every controller
        self.options = options
        self.tree = options.topology  # its tree labels replaced by a Kueue Topology's levels, if named
        self.stats = AttributeStats()
        self._written_at: dict[str, float] = {}  # Slurm node -> monotonic time of our last write to it
        self._writing: set[tuple[str, str]] = set()  # (node, kind) whose write is on its way
        self._again: set[tuple[str, str]] = set()  # (node, kind) decided again while its write was away
        self._told: dict[tuple[str, str], str] = {}  # (Node, what) -> the message an Event already said

    def watches(self) -> Watches:
        cache = self.context.slurm_cache
        return (
            Watch(self.context.kube_cache.subscribe, lambda names: names, lane=Lane.URGENT),
            Watch(cache.subscribe, _present, lane=Lane.URGENT),
            # a new slurmctld forgot the features and topology written over REST: every bound node again
            Watch(
                cache.subscribe_reloads, lambda: set(self.context.kube_cache.slurm_names()), lane=Lane.URGENT
            ),
            # another REST API version (Slurm upgraded): topology may be writable now, or no longer
            Watch(self.context.slurm.subscribe_versions, self._version_changed),
        )

    @property
    def queue(self) -> WorkQueue:
        return self.runner.queue

    async def prepare(self) -> None:
        await self.context.kube_cache.wait_synced()
        await self.context.slurm_cache.wait_synced()
        self._check_topology_support()

    async def keys(self) -> set[str]:
        """Every bound node; first the Kueue Topology read again and our old write times forgotten."""
        now = time.monotonic()
        self._written_at = {k: t for k, t in self._written_at.items() if now - t < FRESH_READ_S}
        await self._read_kueue_topology()
        return set(self.context.kube_cache.slurm_names())

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
                    await self.context.kube.get(
                        f"/apis/kueue.x-k8s.io/{version}/topologies/{spec.kueue_topology}"
                    )
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
            for name in set(self.context.kube_cache.slurm_names()):
                self.queue.add(name)

    def _check_topology_support(self) -> None:
        version = self.context.slurm.version
        unsupported = self.options.topology.enabled and version is not None and not version.topology
        if unsupported and version is not None and not self.stats.topology_unsupported:
            log.warning(
                "node topology from labels needs Slurm 25.05+ (REST v0.0.43+): not written",
                api_version=version.name, release=self.context.slurm.release or None,
            )  # fmt: skip
        self.stats.topology_unsupported = unsupported

    def _version_changed(self) -> set[str]:
        """Topology writable or not is decided again; where it is configured, every bound node again."""
        self._check_topology_support()
        return set(self.context.kube_cache.slurm_names()) if self.options.topology.enabled else set()

    # -- one key ----------------------------------------------------------------------------------
    async def reconcile(self, name: str) -> Result:
        self.stats.reconciles += 1
        if not self.context.kube_cache.synced or not self.context.slurm_cache.synced:
            return Result(requeue_after=1.0)
        slurm_node = self.context.slurm_cache.nodes.get(name)
        binding = resolve(name, self.context.kube_cache)
        kube_node = binding.node
        if slurm_node is None or not binding.bound or kube_node is None:
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
                updates = self._updates(await self.context.slurm.get_node(name), owned, place)
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
        self._writing.add(key)
        self.runner.beside(name, self._write(name, kube_node, kind, update), name=f"{kind}-{name}")

    async def _write(self, name: str, kube_node: str, kind: str, update: NodeUpdate) -> None:
        """One update; a failure is the runner's to retry (backoff with jitter, as a failed reconcile),
        a refusal is looked at again at the resync (the Node's labels must change first)."""
        try:
            written = await self.context.slurm_writer.update(name, update, linger_s=LINGER_S)
        except SlurmApiError as exc:
            result = "refused" if kind == "topology" else "error"  # topology: a unit topology.yaml lacks
            self.stats.writes[kind, result] += 1
            if kind == "topology":
                message = f"Slurm refused topology {update.topology!r} for node {name}: {exc}"
                await self._tell(kube_node, "topology", EVENT_TOPOLOGY_REFUSED, message)
            refused = f"slurm refused the {kind} update from labels: {exc}"
            raise RetryAfter(self.context.resync_s, refused) from exc
        except Exception:
            self.stats.writes[kind, "error"] += 1
            raise
        finally:
            self._writing.discard((name, kind))
        if not written:
            self.stats.writes[kind, "dry_run"] += 1
            return
        self.stats.writes[kind, "ok"] += 1
        self._written_at[name] = time.monotonic()
        log.info("slurm node updated from labels", slurm_node=name, kind=kind, update=update.body())
        if (name, kind) in self._again:  # a change came while this was on its way: look at it now
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
        await self.context.events.record(ObjectRef.node(node), "Warning", reason, message)


def _present(changes: list[NodeChange]) -> list[str]:
    """Slurm nodes listed or changed (a removed one has nothing to write to)."""
    return [change.name for change in changes if change.kind != "removed"]


REGISTRATION = Registration(
    "attributes", when_enabled(AttributeController), AttributeOptions(), OPTIONS, options_from
)
