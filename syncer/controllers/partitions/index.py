"""Which Kubernetes Nodes each SlurmPartition's selector matches, kept as Nodes change (no I/O).

Matching every Node against every CR's selector on every reconcile was 42 % of a reconcile's time at 10,000
Nodes (benchmarks/RESULTS.md), and every Node label or slurmd pod change started one. Here a Node's change is
matched against the CRs' selectors once, and says which CRs it moves; a CR's new selector is matched against
every Node once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from syncer.controllers.partitions.spec import empty_selector, selector_matches
from syncer.model.kube import KubeNode


class SelectorIndex:
    def __init__(self) -> None:
        self._selectors: dict[str, Mapping[str, Any]] = {}  # CR -> its (non-empty) selector
        self._matched: dict[str, set[str]] = {}  # CR -> the Nodes its selector matches

    def update(
        self, selectors: Mapping[str, Mapping[str, Any] | None], nodes: Callable[[], Iterable[KubeNode]]
    ) -> None:
        """The CRs' selectors as they are now (None: no selector): a new or changed one is matched against
        every Node (`nodes()`), one gone is forgotten."""
        for cr in [cr for cr in self._selectors if not _usable(selectors.get(cr))]:
            del self._selectors[cr], self._matched[cr]
        for cr, selector in selectors.items():
            if selector is None or not _usable(selector) or self._selectors.get(cr) == selector:
                continue
            self._selectors[cr] = selector
            self._matched[cr] = {n.name for n in nodes() if selector_matches(selector, n.labels)}

    def node_changed(self, old: KubeNode | None, new: KubeNode | None) -> set[str]:
        """A Node added, relabelled or deleted: the CRs whose matched Nodes it changes."""
        node = new if new is not None else old
        if node is None:
            return set()
        name = node.name
        moved = set()
        for cr, selector in self._selectors.items():
            matched = self._matched[cr]
            now = new is not None and selector_matches(selector, new.labels)
            if now != (name in matched):
                (matched.add if now else matched.discard)(name)
                moved.add(cr)
        return moved

    def matched(self, cr: str) -> frozenset[str]:
        return frozenset(self._matched.get(cr, ()))

    def selects(self, node: str) -> bool:
        """Some CR's selector matches this Node (a change of its slurmd pods may change a partition)."""
        return any(node in matched for matched in self._matched.values())


def _usable(selector: Mapping[str, Any] | None) -> bool:
    return selector is not None and not empty_selector(selector)
