"""The partitions Slinky's slurm-operator declares in slurm.conf, read live from its own objects: the
SlurmPartition controller never writes them, adopt or not (docs/partitions.md, docs/interop.md).

Which objects declare which partitions: slinky_conf.py (pure).

Each kind is watched only where its CRD is served (syncer/kube/optional_informer.py). Where it is not: one
INFO line, no watch, and a silent look again every `PROBE_S` (Slinky installed later)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from syncer.controllers.partitions.slinky_conf import controller_partitions, nodeset_partition
from syncer.kube.client import KubeClient
from syncer.kube.informer import Informer
from syncer.kube.optional_informer import OptionalInformer
from syncer.model.kube import KubeCustomObject

GROUP, VERSION = "slinky.slurm.net", "v1beta1"
PROBE_S = 300.0  # an absent CRD is looked for again this often (one GET, no log line)


def _key(obj: KubeCustomObject) -> str:
    meta = obj.body.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{obj.name}"


@dataclass(frozen=True)
class _Kind:
    kind: str  # the decoder's name (syncer/kube/decode.py)
    plural: str
    what: str  # "NodeSet", "Controller": for messages
    partitions: Callable[[Mapping[str, Any]], list[str]]


KINDS = (
    _Kind("SlinkyNodeSet", "nodesets", "NodeSet",
          lambda obj: [name] if (name := nodeset_partition(obj)) else []),
    _Kind("SlinkyController", "controllers", "Controller", controller_partitions),
)  # fmt: skip


class _Source:
    """One Slinky kind, watched where served."""

    def __init__(self, kube: KubeClient, kind: _Kind) -> None:
        self.kind = kind
        informer: Informer[KubeCustomObject] = Informer(
            kube, f"/apis/{GROUP}/{VERSION}/{kind.plural}", kind.kind, _key
        )
        self.watch = OptionalInformer(
            informer, what=f"Slinky {kind.what}s", absent_means="no partition of theirs to protect",
            probe_s=PROBE_S,
        )  # fmt: skip

    @property
    def absent(self) -> bool:
        return self.watch.absent

    def partitions(self) -> dict[str, str]:
        """partition -> "NodeSet ns/name" (the object declaring it)."""
        found: dict[str, str] = {}
        for key, obj in sorted(self.watch.informer.items.items()):
            for name in self.kind.partitions(obj.body):
                found.setdefault(name, f"{self.kind.what} {key}")
        return found


class SlinkyPartitions:
    """Slinky's partitions (`names`), from a live watch of its NodeSets and Controllers."""

    def __init__(self, kube: KubeClient) -> None:
        self.sources = [_Source(kube, kind) for kind in KINDS]

    def subscribe(self, handler: Callable[[KubeCustomObject | None, KubeCustomObject | None], None]) -> None:
        """`handler(old, new)` on every change of a watched Slinky object."""
        for source in self.sources:
            source.watch.informer.subscribe(handler)

    def names(self) -> dict[str, str]:
        """partition -> the Slinky object declaring it."""
        found: dict[str, str] = {}
        for source in self.sources:
            for name, where in source.partitions().items():
                found.setdefault(name, where)
        return found

    async def decided(self) -> None:
        """Until every kind is known absent or listed once (before it, no partition is planned)."""
        for source in self.sources:
            await source.watch.decided.wait()

    def loops(self) -> dict[str, Callable[[], Any]]:
        return {f"informer-slinky-{s.kind.plural}": s.watch.run for s in self.sources}
