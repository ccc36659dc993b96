"""What a controller watches, declared (controller-runtime's builder `For/Owns/Watches` with a handler that
maps an event to keys, kopf's handler decorators): a source's `subscribe`, how one event of it maps to the
keys to look at, and the lane they wait in. The runner reads a controller's `watches()` once and does the
subscribing; a controller never wires a callback to its queue by hand.

    def watches(self) -> Watches:
        return (
            Watch(cache.subscribe, lambda names: names, lane=Lane.FIRST),       # a Kubernetes change first
            Watch(informer.subscribe, lambda old, new: [(new or old).key]),
            Watch(nodes.subscribe, every(KEY), after_s=0.5),                  # a rack relabelled: one look
        )

A mapper is called on the event's thread of control (the cache's notification) and must be quick; it may
keep the controller's own bookkeeping of what it saw (an index of pods by NodeSet, when a change was first
seen), never write. An empty answer names no key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec

from syncer.runtime.queue import Lane

P = ParamSpec("P")


@dataclass(frozen=True)
class Watch(Generic[P]):
    source: Callable[[Callable[P, None]], object]  # the source's subscribe(callback)
    keys: Callable[P, Iterable[str]]  # one event -> the keys to look at
    lane: Lane = Lane.NORMAL  # FIRST: a Kubernetes change the sync engine serves ahead of everything
    after_s: float = 0.0  # > 0: looked at this long after the event (events arriving together: one reconcile)


Watches = Iterable[Watch[Any]]


def every(*keys: str) -> Callable[..., tuple[str, ...]]:
    """A mapper naming the same keys for any event (a controller with one key for the whole cluster)."""

    def mapper(*_event: object, **_fields: object) -> tuple[str, ...]:
        return keys

    return mapper
