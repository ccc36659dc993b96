"""List, then watch from the list's resourceVersion, forever: the informer pattern of client-go.

Bookmarks keep the resume point fresh; a 410 (history compacted) or any other ERROR event means re-list;
a silent stream is abandoned after `inactivity_timeout_s`; errors back off with jitter, longer with each
failure in a row (a watch that delivered anything and stayed open as long as the next wait would be starts a
new run: a flapping server is not hammered, a recovered one is back in the first wait). From the end of a
watch until the next one opens the store may be missing changes (`current` is False): a decision that a
missed change would make wrong (a drain after an uncordon made meanwhile) waits for it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import msgspec
import structlog

from syncer.kube.client import KubeClient
from syncer.kube.decode import Codec
from syncer.kube.errors import KubeError
from syncer.runtime.backoff import Backoff

log = structlog.get_logger("syncer.kube")


class WatchEventError(KubeError):
    """The server ended a watch with an ERROR event. Resuming from the same version would meet the same
    error (a 500 "PrevKv=nil" from etcd right after compaction, for one), so the informer re-lists, as
    client-go's reflector does."""


class Keyed(Protocol):
    @property
    def resource_version(self) -> str: ...


T = TypeVar("T", bound=Keyed)
Handler = Callable[[Any, Any], None]  # (old or None, new or None)


@dataclass
class InformerStats:
    lists: int = 0  # full lists applied: the first, and each after a failure or 410 Gone
    relists_after_gone: int = 0  # ... of them because the watch's resourceVersion had expired (410)
    watch_restarts: int = 0  # watches that ended by themselves (the server's timeout) and were reopened
    errors: int = 0  # lists or watches that failed
    events: int = 0  # ADDED, MODIFIED and DELETED events applied
    bookmarks: int = 0  # BOOKMARK events (a newer resourceVersion, no object)
    last_event_monotonic: float = 0.0  # when the watch last said anything


class Informer(Generic[T]):
    def __init__(
        self,
        client: KubeClient,
        path: str,
        kind: str,
        key: Callable[[T], str],
        *,
        label_selector: str = "",
        field_selector: str = "",
        keep: Callable[[T], bool] | None = None,
        page_size: int = 500,
        watch_timeout_s: float = 300.0,
        inactivity_timeout_s: float = 90.0,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.client = client
        self.path = path
        self.kind = kind
        self.key = key
        self.codec = Codec(kind)
        self.label_selector = label_selector
        self.field_selector = field_selector
        # objects a label selector cannot exclude (e.g. "any of these labels"): never stored, and an
        # update that makes a stored one fail it is seen as its deletion
        self.keep = keep
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s
        self.inactivity_timeout_s = inactivity_timeout_s
        self.max_backoff_s = max_backoff_s
        self.backoff = Backoff(0.2, max_backoff_s)  # the runtime's one policy
        self.items: dict[str, T] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.handlers: list[Handler] = []
        self.stats = InformerStats()
        self._progress = False
        # time.monotonic() the last watch ended, until the next one opens (None: watching, or not started)
        self.missing_since: float | None = None

    @property
    def current(self) -> bool:
        """No gap between watches: every change the server made is in the store or on its way in an open
        watch (False from a watch's end, a dropped one or a 410 included, until the next one opens)."""
        return self.missing_since is None

    def _gap(self) -> None:
        if self.missing_since is None:
            self.missing_since = time.monotonic()

    def _opened(self) -> None:
        self.missing_since = None

    def subscribe(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def _emit(self, old: T | None, new: T | None) -> None:
        for handler in self.handlers:
            try:
                handler(old, new)
            except Exception:
                log.exception("informer handler failed", kind=self.kind)

    def _params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        return params

    async def list_once(self) -> None:
        """A full (paged) list; replaces the store and emits the differences to the previous one."""
        fresh: dict[str, T] = {}
        token = ""
        while True:
            params = self._params()
            params["limit"] = str(self.page_size)
            if token:
                params["continue"] = token
            raw = await self.client.request_bytes("GET", self.path, params=params)
            objects, rv, token = self.codec.decode_list(raw)
            for obj in objects:
                if self.keep is None or self.keep(obj):
                    fresh[self.key(obj)] = obj
            if not token:
                break
        self.stats.lists += 1
        old_items, self.items = self.items, fresh
        self.resource_version = rv
        for key, obj in fresh.items():
            previous = old_items.get(key)
            if previous is None or previous.resource_version != obj.resource_version:
                self._emit(previous, obj)
        for key, previous in old_items.items():
            if key not in fresh:
                self._emit(previous, None)
        self.synced.set()

    async def watch_once(self) -> None:
        """One watch stream from `resource_version`; returns when it ends normally."""
        params = self._params()
        params.update(
            watch="1",
            resourceVersion=self.resource_version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(int(self.watch_timeout_s * random.uniform(1.0, 2.0))),  # spread reconnects
        )
        lines = self.client.watch_lines(self.path, params, self.inactivity_timeout_s, on_open=self._opened)
        async for line in lines:
            self.stats.last_event_monotonic = time.monotonic()
            self._progress = True
            try:
                kind, obj = self.codec.decode_event(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning(
                    "undecodable watch event skipped", kind=self.kind, error=str(exc), line=line[:200]
                )
                continue
            if kind == "BOOKMARK":
                self.stats.bookmarks += 1
                if obj is not None and obj.resourceVersion:
                    self.resource_version = obj.resourceVersion
                continue
            if kind == "ERROR":
                raise WatchEventError(obj.code or 500, obj.reason or "Unknown", obj.message)
            self.stats.events += 1
            key = self.key(obj)
            previous = self.items.get(key)
            if kind == "DELETED" or (self.keep is not None and not self.keep(obj)):
                if self.items.pop(key, None) is not None:
                    self._emit(previous, None)
            else:
                self.items[key] = obj
                self._emit(previous, obj)
            self.resource_version = obj.resource_version

    def _worked(self, opened: float, failures: int) -> bool:
        """The watch that just failed delivered something and stayed open at least as long as the wait its
        failure would add to the run (client-go keeps its backoff for 2 min instead: this recovers at once
        from a burst of drops, yet a server dropping every watch after its first event is met ever later)."""
        return self._progress and time.monotonic() - opened >= self.backoff.ceiling(failures + 1)

    async def run(self) -> None:
        failures = 0  # in a row; a watch that ends normally, or worked a while before it failed, resets it
        need_list = True
        opened = time.monotonic()
        while True:
            self._progress = False
            try:
                if need_list:
                    await self.list_once()
                    need_list = False
                opened = time.monotonic()
                await self.watch_once()
                self._gap()
                self.stats.watch_restarts += 1
                failures = 0
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                self._gap()
                self.stats.errors += 1
                if self._worked(opened, failures):  # then dropped: the first failure of a new run
                    failures = 0
                if exc.gone:
                    self.stats.relists_after_gone += 1
                    log.info("watch history expired, re-listing", kind=self.kind, rv=self.resource_version)
                    need_list = True
                    continue
                need_list = need_list or isinstance(exc, WatchEventError)
                failures += 1
                delay = exc.retry_after_s if exc.retry_after_s is not None else self.backoff.delay(failures)
                log.warning(
                    "kubernetes watch failed, retrying",
                    kind=self.kind,
                    error=str(exc),
                    delay_s=round(delay, 2),
                )
                await asyncio.sleep(delay)
            except Exception as exc:  # a bug or an odd body must not stop the informer for good
                self._gap()
                self.stats.errors += 1
                failures = 1 if self._worked(opened, failures) else failures + 1  # as above
                log.exception("informer error, re-listing", kind=self.kind, error=str(exc))
                need_list = True
                await asyncio.sleep(self.backoff.delay(failures))
