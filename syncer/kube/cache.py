"""What the syncer knows of Kubernetes: all Nodes, the pods labelled with a Slurm node name, and
indexes from Slurm node names to both. Changes are reported as the Slurm node names to re-check.

The indexes are kept up to date as the informers report each change (never rebuilt from the stores):
at 10,000 nodes rebuilding the claimed names on every lookup took 9 % of the syncer's CPU."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from collections.abc import Set as AbstractSet

from syncer.kube.client import KubeClient
from syncer.kube.informer import Informer
from syncer.model.cluster import pod_seen
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubePod
from syncer.model.naming import SlurmNameRule
from syncer.runtime.tasks import cancel_and_wait

KeysHandler = Callable[[set[str]], None]


def _pod_key(pod: KubePod) -> str:
    return pod.key


def _node_key(node: KubeNode) -> str:
    return node.name


class KubeCache:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str = "",
        bind_by_node_name: bool = False,
        names: SlurmNameRule | None = None,
        pod_selector: str = "",
        cluster: str = "",
        watch_timeout_s: float = 300.0,
        inactivity_timeout_s: float = 90.0,
    ) -> None:
        pods_path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        self.namespace = namespace  # the slurmd pods' ("": all namespaces)
        self.names = names or SlurmNameRule()
        # the server narrows by the pod selector, or by the one name label; several labels cannot be
        # ORed in a selector, so those pods are filtered here (narrow them with --pod-selector); nor can
        # "this release's or unlabelled": another release's pods (cluster.LABEL) are left out here too
        self.cluster = cluster
        self.pods: Informer[KubePod] = Informer(
            client, pods_path, "Pod", _pod_key,
            label_selector=pod_selector or self.names.server_selector,
            keep=lambda pod: bool(self.names.of(pod)) and (not cluster or pod_seen(pod.labels, cluster)),
            watch_timeout_s=watch_timeout_s, inactivity_timeout_s=inactivity_timeout_s,
        )  # fmt: skip
        self.nodes: Informer[KubeNode] = Informer(
            client, "/api/v1/nodes", "Node", _node_key,
            watch_timeout_s=watch_timeout_s, inactivity_timeout_s=inactivity_timeout_s,
        )  # fmt: skip
        self._bind_by_node_name = bind_by_node_name
        self.pods_by_slurm_node: dict[str, set[str]] = {}
        self.pods_by_kube_node: dict[str, set[str]] = {}
        self.nodes_by_slurm_node: dict[str, set[str]] = {}
        # Slurm node name -> how many claim it: labelled pods, labelled Nodes and, when binding by
        # Node name, the Node of that name. A name is present exactly while its count is above 0.
        self._claims: dict[str, int] = {}
        self._handlers: list[KeysHandler] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.pods.subscribe(self._on_pod)
        self.nodes.subscribe(self._on_node)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self.pods.run(), name="informer-pods"),
            asyncio.create_task(self.nodes.run(), name="informer-nodes"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []

    @property
    def bind_by_node_name(self) -> bool:
        """Fixed at construction: the claim index counts Node names only when this is set."""
        return self._bind_by_node_name

    @property
    def synced(self) -> bool:
        return self.pods.synced.is_set() and self.nodes.synced.is_set()

    @property
    def current(self) -> bool:
        """Both informers watching: no change to a pod or Node can be missing from the cache but the ones
        on their way (see Informer.current)."""
        return self.pods.current and self.nodes.current

    async def wait_synced(self) -> None:
        await self.pods.synced.wait()
        await self.nodes.synced.wait()

    def subscribe(self, handler: KeysHandler) -> None:
        self._handlers.append(handler)

    # -- lookups ----------------------------------------------------------------------------------
    def pods_for(self, slurm_node: str) -> list[KubePod]:
        return [
            self.pods.items[k]
            for k in sorted(self.pods_by_slurm_node.get(slurm_node, ()))
            if k in self.pods.items
        ]

    def nodes_for(self, slurm_node: str) -> list[KubeNode]:
        names = set(self.nodes_by_slurm_node.get(slurm_node, ()))
        if self.bind_by_node_name and slurm_node in self.nodes.items:
            names.add(slurm_node)
        return [self.nodes.items[n] for n in sorted(names) if n in self.nodes.items]

    def node(self, name: str) -> KubeNode | None:
        return self.nodes.items.get(name)

    def slurm_name_of(self, pod: KubePod) -> str:
        """The Slurm node a pod runs, by the configured labels (first present wins)."""
        return self.names.of(pod)

    def slurm_names(self) -> AbstractSet[str]:
        """Every Slurm node name some pod or Node claims (with `bind_by_node_name`, every Node's name).

        A live read-only view of an index kept as changes arrive: `len` and `in` cost O(1) and
        nothing is copied. It changes as the informers deliver events, so do not hold it across an
        `await` while iterating; take `set(...)` of it for a snapshot."""
        return self._claims.keys()

    # -- index upkeep -----------------------------------------------------------------------------
    def _notify(self, keys: set[str]) -> None:
        keys.discard("")
        if keys:
            for handler in self._handlers:
                handler(keys)

    @staticmethod
    def _move(
        index: dict[str, set[str]], old_key: str, new_key: str, member: str, present: bool
    ) -> tuple[bool, bool]:
        """Moves `member` from `old_key` to `new_key` (if `present`); says whether it left `old_key`
        and whether it joined `new_key` (False for each where it was not, or was already, a member)."""
        left = joined = False
        if present and old_key == new_key:  # most updates (status, heartbeats): the key stays
            if new_key:
                members = index.setdefault(new_key, set())
                joined = member not in members
                members.add(member)
            return left, joined
        if old_key and old_key in index:
            members = index[old_key]
            left = member in members
            members.discard(member)
            if not members:
                del index[old_key]
        if present and new_key:
            members = index.setdefault(new_key, set())
            joined = member not in members
            members.add(member)
        return left, joined

    def _claim(self, name: str, delta: int) -> None:
        count = self._claims.get(name, 0) + delta
        if count > 0:
            self._claims[name] = count
        else:
            self._claims.pop(name, None)

    def _move_claim(
        self, index: dict[str, set[str]], old_key: str, new_key: str, member: str, present: bool
    ) -> None:
        """`_move` in an index of claims (Slurm node name -> claimants), counted in `_claims`."""
        left, joined = self._move(index, old_key, new_key, member, present)
        if left:
            self._claim(old_key, -1)
        if joined:
            self._claim(new_key, 1)

    def _on_pod(self, old: KubePod | None, new: KubePod | None) -> None:
        pod = new or old
        assert pod is not None
        old_slurm = self.names.of(old) if old else ""
        new_slurm = self.names.of(new) if new else ""
        self._move_claim(self.pods_by_slurm_node, old_slurm, new_slurm, pod.key, new is not None)
        old_kube = old.node_name if old else ""
        left, _joined = self._move(
            self.pods_by_kube_node, old_kube, new.node_name if new else "", pod.key, new is not None
        )
        keys = {old_slurm, new_slurm}
        if left or (old_slurm != new_slurm and old_kube):
            # the slurmd pods left on that Node share its conditions: they must look again
            for pod_key in self.pods_by_kube_node.get(old_kube, ()):
                sibling = self.pods.items.get(pod_key)
                if sibling is not None:
                    keys.add(self.names.of(sibling))
        self._notify(keys)

    def _on_node(self, old: KubeNode | None, new: KubeNode | None) -> None:
        node = new or old
        assert node is not None
        old_slurm = old.labels.get(Keys.NODE_NAME_LABEL, "") if old else ""
        new_slurm = new.labels.get(Keys.NODE_NAME_LABEL, "") if new else ""
        self._move_claim(self.nodes_by_slurm_node, old_slurm, new_slurm, node.name, new is not None)
        if self.bind_by_node_name and (old is None) != (new is None):  # a Node's name never changes
            self._claim(node.name, 1 if new is not None else -1)
        keys = {old_slurm, new_slurm}
        for pod_key in self.pods_by_kube_node.get(node.name, ()):
            pod = self.pods.items.get(pod_key)
            if pod is not None:
                keys.add(self.names.of(pod))
        if self.bind_by_node_name:
            keys.add(node.name)
        self._notify(keys)
