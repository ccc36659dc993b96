"""What the syncer knows of Kubernetes: all Nodes, the pods labelled with a Slurm node name, and
indexes from Slurm node names to both. Changes are reported as the Slurm node names to re-check."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from syncer.kube.client import KubeClient
from syncer.kube.informer import Informer
from syncer.model.keys import Keys
from syncer.model.kube import KubeNode, KubePod
from syncer.tasks import cancel_and_wait

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
        watch_timeout_s: float = 300.0,
        inactivity_timeout_s: float = 90.0,
    ) -> None:
        pods_path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        self.pods: Informer[KubePod] = Informer(
            client, pods_path, "Pod", _pod_key, label_selector=Keys.NODE_NAME_LABEL,
            watch_timeout_s=watch_timeout_s, inactivity_timeout_s=inactivity_timeout_s,
        )  # fmt: skip
        self.nodes: Informer[KubeNode] = Informer(
            client, "/api/v1/nodes", "Node", _node_key,
            watch_timeout_s=watch_timeout_s, inactivity_timeout_s=inactivity_timeout_s,
        )  # fmt: skip
        self.bind_by_node_name = bind_by_node_name
        self.pods_by_slurm_node: dict[str, set[str]] = {}
        self.pods_by_kube_node: dict[str, set[str]] = {}
        self.nodes_by_slurm_node: dict[str, set[str]] = {}
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
    def synced(self) -> bool:
        return self.pods.synced.is_set() and self.nodes.synced.is_set()

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

    def slurm_names(self) -> set[str]:
        """Every Slurm node name some pod or Node claims."""
        names = set(self.pods_by_slurm_node) | set(self.nodes_by_slurm_node)
        if self.bind_by_node_name:
            names |= set(self.nodes.items)
        return names

    # -- index upkeep -----------------------------------------------------------------------------
    def _notify(self, keys: set[str]) -> None:
        keys.discard("")
        if keys:
            for handler in self._handlers:
                handler(keys)

    @staticmethod
    def _move(index: dict[str, set[str]], old_key: str, new_key: str, member: str, present: bool) -> None:
        if old_key and old_key in index:
            index[old_key].discard(member)
            if not index[old_key]:
                del index[old_key]
        if present and new_key:
            index.setdefault(new_key, set()).add(member)

    def _on_pod(self, old: KubePod | None, new: KubePod | None) -> None:
        pod = new or old
        assert pod is not None
        old_slurm = old.labels.get(Keys.NODE_NAME_LABEL, "") if old else ""
        new_slurm = new.labels.get(Keys.NODE_NAME_LABEL, "") if new else ""
        self._move(self.pods_by_slurm_node, old_slurm, new_slurm, pod.key, new is not None)
        self._move(
            self.pods_by_kube_node,
            old.node_name if old else "",
            new.node_name if new else "",
            pod.key,
            new is not None,
        )
        self._notify({old_slurm, new_slurm})

    def _on_node(self, old: KubeNode | None, new: KubeNode | None) -> None:
        node = new or old
        assert node is not None
        old_slurm = old.labels.get(Keys.NODE_NAME_LABEL, "") if old else ""
        new_slurm = new.labels.get(Keys.NODE_NAME_LABEL, "") if new else ""
        self._move(self.nodes_by_slurm_node, old_slurm, new_slurm, node.name, new is not None)
        keys = {old_slurm, new_slurm}
        for pod_key in self.pods_by_kube_node.get(node.name, ()):
            pod = self.pods.items.get(pod_key)
            if pod is not None:
                keys.add(pod.labels.get(Keys.NODE_NAME_LABEL, ""))
        if self.bind_by_node_name:
            keys.add(node.name)
        self._notify(keys)
