"""Keep the cyclic garbage collector's full passes short: what survives one is frozen until the next thaw.

A full (generation 2) pass of CPython's collector walks every tracked object and holds the event loop the
whole time. At 10,000 nodes the caches hold enough of them that a full pass took 78-243 ms on this 2-core
machine at load ~2 and 240-440 ms at load 4-7 (benchmarks/RESULTS.md, issue 47), one or more a minute while
lists and Kubernetes events come in: a cordon or a drain's mirror write caught behind one waits for all of it.
Frozen as below: 9 ms (median of the full passes over the same rounds), one full-length pass per thaw.
The caches' objects (pods, Nodes, Slurm nodes) form no cycles and are freed by reference counting when
replaced, frozen or not; a full pass only needs to look at what became long-lived since the last one.

So, after each full pass, its survivors are moved to the permanent generation (`gc.freeze()`): the next
full pass walks only what was promoted since. Every `thaw_every_s` the permanent generation is put back
(`gc.unfreeze()`), so that the next full pass walks everything once and collects any cycle that became
garbage while frozen (a finished task's exception and traceback, say): such garbage lives at most that long.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

THAW_EVERY_S = 600.0  # one full-length pass per ten minutes; cyclic garbage kept at most that long
OLDEST = len(gc.get_threshold()) - 1  # the generation a full pass collects (2 in CPython 3.11)


@dataclass
class FreezeAfterFullPasses:
    thaw_every_s: float = THAW_EVERY_S
    clock: Callable[[], float] = time.monotonic
    freezes: int = 0  # full passes whose survivors were frozen
    thaws: int = 0  # times the permanent generation was put back for a full-length pass
    _thawed_at: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._thawed_at = self.clock()

    def install(self) -> None:
        if self._after_pass not in gc.callbacks:
            gc.callbacks.append(self._after_pass)

    def uninstall(self) -> None:
        """Stops freezing and puts every frozen object back under the collector."""
        if self._after_pass in gc.callbacks:
            gc.callbacks.remove(self._after_pass)
        gc.unfreeze()

    def _after_pass(self, phase: str, info: dict[str, Any]) -> None:
        # "stop" of a full pass: its garbage is freed, what is left is reachable
        if phase != "stop" or info.get("generation") != OLDEST:
            return
        now = self.clock()
        if now - self._thawed_at >= self.thaw_every_s:
            self._thawed_at = now
            self.thaws += 1
            gc.unfreeze()  # the next full pass walks everything and collects what became garbage frozen
            return
        gc.freeze()
        self.freezes += 1
