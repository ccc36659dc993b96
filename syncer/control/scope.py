"""This release's objects of one kind (SlurmPartitions, NodeSets): the informer of those labelled with its
cluster identity, and, where it adopts, the informer of those no release has labelled yet and the write
that takes one (syncer/model/cluster.py says the rule). Another release's objects are never listed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import structlog

from syncer.control.context import ControllerContext
from syncer.kube.errors import KubeError
from syncer.kube.informer import Handler, Informer, Keyed
from syncer.model import cluster

log = structlog.get_logger("syncer.control.scope")

T = TypeVar("T", bound=Keyed)


class Scope(Generic[T]):
    def __init__(
        self, context: ControllerContext, path: str, kind: str, key: Callable[[T], str], name: str
    ) -> None:
        self.context = context
        self.kind = kind
        self.name = name  # the informers' loop names: informer-<name>, informer-<name>-unlabelled
        self.cluster = context.cluster
        self.informer: Informer[T] = Informer(
            context.kube, path, kind, key, label_selector=cluster.selector(context.cluster)
        )
        self.unlabelled: Informer[T] | None = (
            Informer(context.kube, path, kind, key, label_selector=cluster.UNLABELLED)
            if context.adopt_unlabelled
            else None
        )
        self.adopted = 0

    def subscribe(self, handler: Handler) -> None:
        """Changes of this release's objects and, adopting, of unlabelled ones (to take them)."""
        self.informer.subscribe(handler)
        if self.unlabelled is not None:
            self.unlabelled.subscribe(handler)

    def loops(self) -> dict[str, Callable[[], Awaitable[None]]]:
        loops: dict[str, Callable[[], Awaitable[None]]] = {f"informer-{self.name}": self.informer.run}
        if self.unlabelled is not None:
            loops[f"informer-{self.name}-unlabelled"] = self.unlabelled.run
        return loops

    async def synced(self) -> None:
        await self.informer.synced.wait()
        if self.unlabelled is not None:
            await self.unlabelled.synced.wait()

    def waiting(self) -> dict[str, T]:
        """Unlabelled objects this release would take, by key (none when it does not adopt)."""
        return dict(self.unlabelled.items) if self.unlabelled is not None else {}

    async def adopt(self, path: str, what: str) -> bool:
        """Label the object at `path` with this release's identity, from a fresh read and over its
        resourceVersion, only while it carries no cluster label: of two releases both adopting, one wins
        and the other finds the label there. True when this release took it (a 404: gone, False)."""

        def build(obj: dict[str, Any]) -> dict[str, Any] | None:
            return cluster.adoption((obj.get("metadata") or {}).get("labels") or {}, self.cluster)

        try:
            written = await self.context.writer.patch_from_current(path, build, what=f"{what} adoption")
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        if written is None:
            return False
        self.adopted += 1
        log.info(
            f"{self.kind} without a cluster label taken by this release",
            object=what, label=f"{cluster.LABEL}={self.cluster}",
        )  # fmt: skip
        return True
