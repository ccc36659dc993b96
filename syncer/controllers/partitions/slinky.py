"""The partitions Slinky's slurm-operator declares in slurm.conf, read live from its own objects: the
SlurmPartition controller never writes them, adopt or not (docs/partitions.md, docs/interop.md).

Which objects declare which partitions, and what each line sets: slinky_conf.py (pure). What slurmctld keeps
unlike those lines (KeepPartInfo): slinky_drift.py (pure); the partitions a line dropped are remembered here
from the watch (`removed`), while this process runs.

Each kind is watched only where its CRD is served (syncer/kube/optional_informer.py). Where it is not: one
INFO line, no watch, and a silent look again every `PROBE_S` (Slinky installed later)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from syncer.controllers.partitions.slinky_conf import (
    controller_lines,
    controller_partitions,
    nodeset_lines,
    nodeset_partition,
)
from syncer.kube.client import KubeClient
from syncer.kube.events import ObjectRef
from syncer.kube.informer import Informer
from syncer.kube.optional_informer import OptionalInformer
from syncer.model.kube import KubeCustomObject

GROUP, VERSION = "slinky.slurm.net", "v1beta1"
_Obj = KubeCustomObject | None
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
    lines: Callable[[Mapping[str, Any]], dict[str, dict[str, str]]]  # partition -> its line's settings


KINDS = (
    _Kind("SlinkyNodeSet", "nodesets", "NodeSet",
          lambda obj: [name] if (name := nodeset_partition(obj)) else [], nodeset_lines),
    _Kind("SlinkyController", "controllers", "Controller", controller_partitions, controller_lines),
)  # fmt: skip


def _ref(kind: _Kind, obj: KubeCustomObject) -> ObjectRef:
    meta = obj.body.get("metadata") or {}
    return ObjectRef(kind.what, obj.name, str(meta.get("namespace", "")), str(meta.get("uid", "")),
                     f"{GROUP}/{VERSION}")  # fmt: skip


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
        self.refs: dict[str, ObjectRef] = {}  # "NodeSet ns/name" -> the object, for its Events

    def where(self, obj: KubeCustomObject) -> str:
        self.refs[where := f"{self.kind.what} {_key(obj)}"] = _ref(self.kind, obj)
        return where

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

    def lines(self) -> dict[str, tuple[str, dict[str, str]]]:
        """partition -> (the object declaring it, its line's settings)."""
        found: dict[str, tuple[str, dict[str, str]]] = {}
        for _, obj in sorted(self.watch.informer.items.items()):
            for name, settings in self.kind.lines(obj.body).items():
                found.setdefault(name, (self.where(obj), settings))
        return found

    def dropped(self, old: KubeCustomObject | None, new: KubeCustomObject | None) -> dict[str, str]:
        """The partitions an object's change took off its lines (its deletion: all of them)."""
        if old is None:
            return {}
        before = set(self.kind.partitions(old.body))
        after = set(self.kind.partitions(new.body)) if new is not None else set()
        return dict.fromkeys(sorted(before - after), self.where(old))


class SlinkyPartitions:
    """Slinky's partitions (`names`), from a live watch of its NodeSets and Controllers."""

    def __init__(self, kube: KubeClient) -> None:
        self.sources = [_Source(kube, kind) for kind in KINDS]
        # partition -> the object whose change dropped its line: slurmctld keeps it (KeepPartInfo) until it is
        # deleted; forgotten once slurmctld no longer has it or a line declares it again (`forget`)
        self.removed: dict[str, str] = {}

    def subscribe(self, handler: Callable[[_Obj, _Obj], None]) -> None:
        """`handler(old, new)` on every change of a watched Slinky object, once the partitions it dropped are
        noted (`removed`)."""
        for source in self.sources:
            source.watch.informer.subscribe(self._noting(source, handler))

    def _noting(self, source: _Source, handler: Callable[[_Obj, _Obj], None]) -> Callable[[_Obj, _Obj], None]:
        def noted(old: _Obj, new: _Obj) -> None:
            self.removed.update(source.dropped(old, new))
            handler(old, new)

        return noted

    def names(self) -> dict[str, str]:
        """partition -> the Slinky object declaring it."""
        found: dict[str, str] = {}
        for source in self.sources:
            for name, where in source.partitions().items():
                found.setdefault(name, where)
        return found

    def lines(self) -> dict[str, tuple[str, dict[str, str]]]:
        """partition -> (the object declaring it, its line's settings): the first object as in `names`."""
        found: dict[str, tuple[str, dict[str, str]]] = {}
        for source in self.sources:
            for name, declared in source.lines().items():
                found.setdefault(name, declared)
        return found

    def ref(self, where: str) -> ObjectRef | None:
        """The object `where` names ("NodeSet ns/name"), for an Event; None if never seen."""
        return next((s.refs[where] for s in self.sources if where in s.refs), None)

    def forget(self, present: Collection[str]) -> None:
        """A dropped partition slurmctld no longer has, or a line declares again, is not removed any more."""
        declared = self.names()
        self.removed = {p: where for p, where in self.removed.items() if p in present and p not in declared}

    async def decided(self) -> None:
        """Until every kind is known absent or listed once (before it, no partition is planned)."""
        for source in self.sources:
            await source.watch.decided.wait()

    def loops(self) -> dict[str, Callable[[], Any]]:
        return {f"informer-slinky-{s.kind.plural}": s.watch.run for s in self.sources}
