"""`check`'s lines on the release's cluster identity: its name and where it came from, how many
SlurmPartitions and NodeSets are its own, and the objects of the rule's warnings (syncer/model/cluster.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from syncer.model import cluster


def scoped(kind: str, items: Iterable[Mapping[str, Any]]) -> list[cluster.Scoped]:
    found = []
    for item in items:
        meta = item.get("metadata") or {}
        name = (
            f"{meta['namespace']}/{meta.get('name', '')}" if meta.get("namespace") else meta.get("name", "")
        )
        found.append(cluster.Scoped(kind, str(name), meta.get("labels") or {}, meta.get("finalizers") or []))
    return found


def ours(items: Iterable[dict[str, Any]], name: str, adopts: bool) -> list[dict[str, Any]]:
    """The objects this release acts on: its own, and (adopting) the unlabelled ones it would take."""
    wanted = (name, None) if adopts else (name,)
    return [i for i in items if cluster.owner((i.get("metadata") or {}).get("labels") or {}) in wanted]


def scope_lines(
    name: str, source: str, adopts: bool, objects: list[cluster.Scoped]
) -> list[tuple[bool, str, str, bool]]:
    """(ok, what, fix, warn) lines: the identity first, then one warning per problem."""
    own = sum(cluster.belongs(o.labels, name) for o in objects)
    others = sorted({o for o in (cluster.owner(o.labels) for o in objects) if o and o != name})
    beside = f"; other releases' objects seen (left alone): {', '.join(others)}" if others else ""
    lines = [
        (
            True,
            f"cluster identity {name} ({source}): acts on SlurmPartitions, NodeSets and pods labelled "
            f"{cluster.LABEL}={name} ({own} of its own){beside}; unlabelled ones "
            + ("are taken (--adopt-unlabelled)" if adopts else "are left alone (--no-adopt-unlabelled)"),
            "",
            False,
        )
    ]
    fix = f"kubectl label <kind> <name> {cluster.LABEL}=<cluster name> (docs/operations.md, two releases)"
    lines += [(True, problem, fix, True) for problem in cluster.problems(objects, name, adopts)]
    return lines
