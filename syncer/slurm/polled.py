"""What a cache that polls slurmrestd offers its readers, the NodeCache's and the JobCache's alike: how old
its data is, a wait for its first answer, its changes (`Change`: a node's or a job's) to subscribe to, its
turning fresh again (`subscribe_fresh`); and the guard around each poll that keeps polling whatever a poll
raises."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import structlog

from syncer.slurm.errors import SlurmError

log = structlog.get_logger("syncer.slurm.polled")

Key = TypeVar("Key")
Item = TypeVar("Item")


@dataclass(frozen=True)
class Change(Generic[Key, Item]):
    """One item's change between two answers: added, removed, or changed (`fields`: those that differ)."""

    key: Key
    kind: Literal["added", "removed", "changed"]
    before: Item | None
    after: Item | None
    fields: tuple[str, ...] = ()


Changed = TypeVar("Changed")


class Polled(Generic[Changed]):
    def __init__(
        self, *, poll_interval_s: float, stale_after_s: float | None, clock: Callable[[], float]
    ) -> None:
        self.poll_interval_s = poll_interval_s
        # stale: no good answer for this long (5 polls, at least 10 s, unless given)
        self.stale_after_s = stale_after_s if stale_after_s is not None else max(10.0, 5 * poll_interval_s)
        self._clock = clock
        self.synced = False  # a first answer has been applied
        self._last_success = 0.0  # clock() of the last good answer (`last_success`)
        self._fresh_owed = True  # stale (no answer yet, or a gap past the bound) and not yet told fresh
        self._fresh_subscribers: list[Callable[[], None]] = []
        self.last_error = ""
        self._polling_since: float | None = None  # set while a poll waits for slurmrestd
        self._first_answer = asyncio.Event()
        self._subscribers: list[Callable[[list[Changed]], None]] = []

    @property
    def last_success(self) -> float:
        return self._last_success

    @last_success.setter
    def last_success(self, at: float) -> None:
        # a good answer after a gap past the bound ends a stale period (every reader that saw `stale` saw
        # it in such a gap): the fresh subscribers are owed a call
        if at - self._last_success > self.stale_after_s:
            self._fresh_owed = True
        self._last_success = at

    @property
    def age_s(self) -> float:
        return self._clock() - self.last_success if self.synced else math.inf

    @property
    def stale(self) -> bool:
        return not self.synced or self.age_s > self.stale_after_s

    async def wait_synced(self) -> None:
        """Until the first answer has been applied."""
        await self._first_answer.wait()

    def subscribe(self, callback: Callable[[list[Changed]], None]) -> None:
        """`callback(changes)` after each answer applied that changed something."""
        self._subscribers.append(callback)

    def subscribe_fresh(self, callback: Callable[[], None]) -> None:
        """`callback()` once each time the data turns fresh after being stale: at the first answer, and at
        the first after a gap longer than `stale_after_s`, once the poll that brought it has ended. Not at
        every answer, and not for a change (`subscribe` tells those): for whoever withheld a decision while
        the data was stale and has nothing else to bring it back when no item changed meanwhile."""
        self._fresh_subscribers.append(callback)

    def _tell_fresh(self) -> None:
        if not self._fresh_owed or self.stale:
            return
        self._fresh_owed = False
        for callback in self._fresh_subscribers:
            try:
                callback()
            except Exception:  # a subscriber's bug must not stop the cache
                log.exception("slurm_cache_fresh_subscriber_failed")

    async def _guarded(self, poll: Callable[[], Awaitable[None]]) -> bool:
        """Run one poll; whatever it raises goes to `_failed` (counted, logged, kept as `last_error`) and
        polling goes on. True when it answered."""
        self._polling_since = self._clock()
        try:
            await poll()
            self.last_error = ""
            return True
        except SlurmError as exc:
            self._failed(str(exc))
        except Exception as exc:  # a bug or an unmapped library error must not end polling silently
            self._failed(f"unexpected {type(exc).__name__}: {exc}", exc_info=True)
        finally:
            self._polling_since = None
            self._tell_fresh()  # a failed poll may have had a good answer first (a probe, then a list)
        return False

    def _failed(self, error: str, exc_info: bool = False) -> None:
        raise NotImplementedError
