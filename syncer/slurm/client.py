"""The async slurmrestd client: the only code in slurm-syncer that talks to Slurm.

    client = SlurmClient("http://slurmrestd:6820", TokenFile(Path("/var/run/slurm/token")))
    await client.start()              # negotiates the API version
    listing = await client.list_nodes(update_time=last)   # None: nothing changed since `last`
    await client.update_node("n1", state=["DRAIN"], reason="k8s: node cordoned")
    await client.close()

A unix socket works with `SlurmClient("unix:///run/slurmrestd.sock", NoToken())`.
Reads are retried with exponential backoff and jitter, never past `deadline_s`; writes are not (a
retried write can land after the decision it carried is stale: the syncer decides again instead).

The API version is chosen again whenever slurmrestd may have been replaced (syncer/slurm/version_follow.py:
after it could not be reached, a path it no longer serves, another Slurm release answering, slurmctld
started anew), before the next request; `subscribe_versions(callback())` tells of a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import aiohttp
import msgspec
import structlog

from syncer.model.jobs import JobSubmission, SlurmJob
from syncer.model.slurm import SlurmNode
from syncer.runtime.backoff import Backoff
from syncer.runtime.proxy import proxy_for
from syncer.runtime.retry import retrying
from syncer.slurm.auth import TokenSource
from syncer.slurm.double_answer import recover
from syncer.slurm.errors import (
    SlurmApiError,
    SlurmAuthError,
    SlurmConnectionError,
    SlurmDecodeError,
    SlurmError,
    SlurmMessage,
    SlurmNotFound,
    SlurmPathNotServed,
    SlurmTimeout,
    SlurmUnsupported,
    SlurmVersionError,
)
from syncer.slurm.hostlist import expand
from syncer.slurm.jobs import (
    JOB_GONE_CODES,
    STATE_CHUNK,
    CancelResponse,
    JobDetailsResponse,
    JobListing,
    JobStatesResponse,
    Kind,
    Placeholder,
    SubmitResponse,
    allocate_body,
    decode_job,
    jobs_in_turns,
    submit_body,
    update_body,
)
from syncer.slurm.models import (
    ConfResponse,
    DiagResponse,
    Envelope,
    Job,
    JobsResponse,
    NodeListResponse,
    NodesResponse,
    Partition,
    PartitionsResponse,
    PingEntry,
    PingResponse,
    RawNode,
    Reservation,
    ReservationsResponse,
    SlurmctldConf,
    unwrap,
)
from syncer.slurm.partitions import PartitionSettings, PartitionState, PartitionWrite, body
from syncer.slurm.partitions import PartitionsResponse as PartitionDetails
from syncer.slurm.updates import NodeUpdate
from syncer.slurm.version_follow import VersionFollow, unserved
from syncer.slurm.versions import PREFERENCE, VERSIONS, ApiVersion, choose

log = structlog.get_logger("syncer.slurm")
T = TypeVar("T", bound=Envelope)
AUTH_STATUSES = (401, 403, 511)  # 24.11 answers a bad token with 511
RETRY_STATUSES = (502, 503, 504)
# what the syncer sends when it acts on nodes one by one or in bulk (the fresh GET before a drain included)
NODE_CALLS = frozenset({"node", "node_update", "nodes_update", "node_delete", "node_create"})


@dataclass(frozen=True)
class NodeListing:
    nodes: tuple[SlurmNode, ...]
    last_update: int
    body_bytes: int
    seconds: float
    started: float = 0.0  # time.monotonic() when the answering request was sent: it shows every write before


class Answer(NamedTuple, Generic[T]):
    status: int
    decoded: T | None  # None for 304
    body_bytes: int
    seconds: float  # the attempt that answered
    started: float = 0.0  # time.monotonic() when that attempt was sent


@dataclass(frozen=True)
class BulkOutcome:
    """Where each node of a refused bulk update stands, read back from Slurm after the refusal."""

    applied: frozenset[str]
    not_applied: frozenset[str]
    unknown: frozenset[str]


@dataclass
class RequestStats:
    """Per endpoint and status: request counts, seconds and bytes (read by the metrics exporter)."""

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=dict)
    body_bytes: Counter[str] = field(default_factory=Counter)


NODE_DECODER = msgspec.json.Decoder(RawNode)
# Nodes decoded between two turns of the event loop: a 10,000-node list decoded in one go held the loop for
# 0.17 s (msgspec plus to_node, 17 MB), which every reconcile and write waited out; in chunks of 500 the
# longest hold is ~6 ms plus 0.03 s to split the list, for about the same total CPU (docs/architecture.md).
DECODE_CHUNK = 500


def misshapen(exc: Exception, endpoint: str) -> SlurmDecodeError:
    """The error for an answer that is not what the endpoint sends (cut, altered, another server's)."""
    return SlurmDecodeError(
        f"response does not match the expected shape ({exc}); a proxy may have cut or altered it",
        endpoint=endpoint,
    )


def decode_nodes(raw: Sequence[msgspec.Raw]) -> list[SlurmNode]:
    """Nodes of a list, from their raw JSON; SlurmDecodeError if one is not a node."""
    try:
        return [NODE_DECODER.decode(item).to_node() for item in raw]
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise misshapen(exc, "nodes") from exc


async def nodes_in_turns(raw: Sequence[msgspec.Raw]) -> tuple[SlurmNode, ...]:
    """`decode_nodes`, a chunk at a time, letting the event loop run in between."""
    return await NodeDecoder().decode(raw)


class NodeDecoder:
    """Nodes of a full list from their raw JSON, a chunk at a time with the event loop running in between.

    A node whose raw JSON is byte for byte what a node had in the list before is that list's SlurmNode again:
    not decoded nor converted (the decode was 6.6 % of slurmrestd's time at 1,000 nodes, issue 47), and the
    cache's diff meets the same object. Most nodes of a list are unchanged: a job's start or end, a drain,
    a slurmd's ping change a few. Known nodes are kept by the 64-bit hash of their JSON (8 bytes each, not
    the 2.4 KB of JSON): two different nodes' JSON sharing a hash is a 2^-64 chance per node and list. Only
    the last list's are kept, whichever list of this client it was: the same JSON is the same node.
    """

    def __init__(self) -> None:
        self._last: dict[int, SlurmNode] = {}

    async def decode(self, raw: Sequence[msgspec.Raw]) -> tuple[SlurmNode, ...]:
        last: dict[int, SlurmNode] = self._last
        seen: dict[int, SlurmNode] = {}
        nodes: list[SlurmNode] = []
        for start in range(0, len(raw), DECODE_CHUNK):
            if start:
                await asyncio.sleep(0)  # yield to the loop: reconciles and writes go on during a big list
            try:
                for item in raw[start : start + DECODE_CHUNK]:
                    key = hash(bytes(item))
                    node = last.get(key)
                    if node is None:
                        node = NODE_DECODER.decode(item).to_node()
                    seen[key] = node
                    nodes.append(node)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                raise misshapen(exc, "nodes") from exc
        self._last = seen
        return tuple(nodes)


class BulkUpdateError(SlurmApiError):
    """A bulk update that Slurm refused part-way; `outcome` says which nodes it changed."""

    def __init__(self, message: str, *, outcome: BulkOutcome, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.outcome = outcome


class _Retryable(SlurmError):
    """A 502/503/504: worth another try of an idempotent call."""


_RELEASE = re.compile(rb'"release"\s*:\s*"(\d+\.\d+\.\d+)"')
_OPENAPI_RELEASE = re.compile(r"(\d+\.\d+\.\d+)")


def _openapi_release(info: Any) -> str:
    """Slurm's release from an OpenAPI document's `info` ("" when it names none)."""
    if not isinstance(info, dict):
        return ""
    named = (info.get("x-slurm") or {}).get("release") if isinstance(info.get("x-slurm"), dict) else None
    found = _OPENAPI_RELEASE.search(str(named or info.get("version") or ""))
    return found.group(1) if found else ""


def _release_of(payload: bytes) -> str:
    """Slurm's release from an answer's `meta.slurm.release`: `meta` opens or closes a body, so only
    its first and last few KiB are searched (a node list can be 25 MB)."""
    found = _RELEASE.search(payload[:4096]) or _RELEASE.search(payload, max(0, len(payload) - 4096))
    return found.group(1).decode() if found else ""


_RETRY = Backoff(0.1, 2.0)  # the runtime's one policy, short: a request has its own deadline
# a path not served: tried again after the version is chosen again (reads only)
_RETRYABLE = (SlurmConnectionError, SlurmTimeout, _Retryable, SlurmPathNotServed)


def _messages(items: list[Any]) -> tuple[SlurmMessage, ...]:
    return tuple(SlurmMessage(m.description, m.error_number, m.error, m.source) for m in items)


class SlurmClient:
    def __init__(
        self,
        url: str,
        token: TokenSource,
        *,
        api_version: str | None = None,
        timeout_s: float = 10.0,
        deadline_s: float = 30.0,
        attempts: int = 5,
    ) -> None:
        if api_version is not None and api_version not in VERSIONS:
            raise SlurmVersionError(
                f"unknown Slurm API version {api_version!r}; supported: {', '.join(VERSIONS)}"
            )
        self._unix_path: str | None = None
        if url.startswith("unix://"):
            self._unix_path = url[len("unix://") :]
            self._base = "http://slurmrestd"
        elif url.startswith(("http://", "https://")):
            self._base = url.rstrip("/")
        else:
            raise SlurmError(f"Slurm URL {url!r} must start with http://, https:// or unix://")
        self.url = url
        # HTTP(S)_PROXY / NO_PROXY as client-go reads them; never for a unix socket
        self.proxy = None if self._unix_path else proxy_for(self._base)
        self._token = token
        self._pinned = api_version
        self._timeout = timeout_s
        self._deadline = deadline_s
        self._attempts = attempts
        self._session: aiohttp.ClientSession | None = None
        self.version: ApiVersion | None = None
        self.release = ""  # Slurm's release as slurmrestd reports it in `meta` (e.g. "26.05.5")
        self.stats = RequestStats()
        self._node_decoder = NodeDecoder()
        self._node_calls = 0  # per-node reads and writes in flight (the syncer acting on nodes)
        self._node_calls_ended = -math.inf  # monotonic time the last one ended
        self._wrote: dict[str, float] = {}  # node name -> monotonic time our last write to it was sent
        self.follow = VersionFollow()
        self._negotiating = asyncio.Lock()
        self._version_subscribers: list[Callable[[], None]] = []
        self._not_chosen = ""  # why the last negotiation chose no version (said once)

    @property
    def token(self) -> TokenSource:
        """Where the requests' token comes from (its expiry is exported and checked)."""
        return self._token

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self) -> ApiVersion:
        """Open the session and pick the API version (the pinned one, else the newest both speak)."""
        if self._session is None:
            self._session = self._new_session()
        if self.version is None:
            async with self._negotiating:
                if self.version is None:
                    await self._renegotiate("start")
        assert self.version is not None
        return self.version

    def _new_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.UnixConnector(path=self._unix_path) if self._unix_path else aiohttp.TCPConnector()
        return aiohttp.ClientSession(connector=connector)

    async def _negotiate(self) -> tuple[ApiVersion, str]:
        """The version to use and the Slurm release the OpenAPI document names ("" if none)."""
        served, release = await self._served()
        chosen = choose(served, self._pinned)
        if chosen is None:
            wanted = self._pinned or ", ".join(VERSIONS)
            raise SlurmVersionError(
                f"slurmrestd at {self.url} serves {', '.join(sorted(served)) or 'no known version'}, "
                f"but slurm-syncer needs {wanted}; pin a served one with --slurm-api-version"
            )
        if not chosen.verified_live:
            log.warning("slurm_api_version_unverified", version=chosen.name)
        return chosen, release

    async def _renegotiate(self, why: str, *, check_first: bool = False) -> None:
        """One negotiation (under `_negotiating`); the version in use stays when it fails (raised).
        `check_first`: slurmrestd may only have been replaced, so the version in use is checked first and
        the OpenAPI document read only if that check fails (version_follow.py)."""
        self.follow.begin()
        try:
            if check_first and self.version is not None:
                kept = await self._version_stands(self.version)
                if kept is not None:
                    self.follow.end("chosen", kept)
                    self._not_chosen = ""
                    return
            chosen, release = await self._negotiate()
        except (SlurmConnectionError, SlurmTimeout):
            self.follow.end("unreachable")
            raise
        except SlurmError:
            self.follow.end("refused")
            raise
        except BaseException:  # cancelled: tried again soon
            self.follow.end("unreachable")
            raise
        self.follow.end("chosen", release)
        self._not_chosen = ""
        self.release = release or self.release
        old, self.version = self.version, chosen
        if old is None or chosen == old:
            return
        log.warning(
            "slurm_api_version_changed", old=old.name, new=chosen.name, why=why, release=release or None
        )
        for callback in self._version_subscribers:
            try:
                callback()
            except Exception:  # a subscriber's bug must not stop the client
                log.exception("slurm_api_version_subscriber_failed")

    async def _follow_version(self) -> None:
        """Chooses the version again before a request when an event owes it (version_follow.py) and the
        rate limit allows; one caller negotiates, the others wait for it. Where slurmrestd cannot be reached
        the request is not sent (that error is raised); where it answers without a usable version the
        version in use stays (logged)."""
        if not self.follow.due():
            return
        async with self._negotiating:
            if not self.follow.due():
                return  # another caller just did it
            why = self.follow.why
            try:
                await self._renegotiate(why, check_first=not self.follow.changed)
            except (SlurmConnectionError, SlurmTimeout):
                raise
            except SlurmError as exc:
                if str(exc) != self._not_chosen:  # said once, not at every try
                    log.warning(
                        "slurm_api_version_not_chosen", why=why, error=str(exc),
                        kept=self.version.name if self.version else None,
                        again_in_s=round(self.follow.wait_s(), 1),
                    )  # fmt: skip
                self._not_chosen = str(exc)

    def version_may_change(self, why: str) -> None:
        """slurmrestd may have been replaced (the node cache saw slurmctld start anew): choose the version
        again before the next request."""
        self.follow.owe(why, time.monotonic())

    def subscribe_versions(self, callback: Callable[[], None]) -> None:
        """`callback()` after the version in use changed (`client.version` is the new one): whoever decided
        on a capability flag (`external_jobs`, `partition_writes`, ...) decides again."""
        self._version_subscribers.append(callback)

    async def reconnect(self) -> None:
        """A new connection pool and a fresh version negotiation (slurmrestd may have been replaced).

        The version in use stays until a new negotiation succeeds, so other callers of this client
        keep working (or failing for the real reason) while slurmrestd is away. The new pool is in place
        before the old one closes: a call made meanwhile never meets a closed session (calls still on the old
        one see their connection cut, a SlurmConnectionError)."""
        old, self._session = self._session, self._new_session()
        if old is not None:
            await old.close()
        async with self._negotiating:
            await self._renegotiate("reconnect after silence")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> SlurmClient:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def _version_stands(self, version: ApiVersion) -> str | None:
        """Slurm's release if `version` is what a negotiation would choose again, else None: its ping
        answers 200 naming the release the version was chosen under (or any, where none was known) and, unless
        pinned, every version preferred to it is answered as not served. A few requests of under 1 KB
        each instead of the OpenAPI document (887 KB on 26.05.5; benchmarks/version_check.py)."""
        status, payload = await self._send("GET", f"{version.prefix}/ping/", endpoint="version_check")
        release = _release_of(payload) if status == 200 else ""
        if not release or (self.follow.release and release != self.follow.release):
            return None
        if not self._pinned:
            for name in PREFERENCE[: PREFERENCE.index(version.name)]:
                status, payload = await self._send("GET", f"/slurm/{name}/ping/", endpoint="version_check")
                if not unserved(status, payload):
                    return None  # served (or not told): the OpenAPI document says which
        return release

    async def served_versions(self) -> set[str]:
        return (await self._served())[0]

    async def _served(self) -> tuple[set[str], str]:
        """The versions served, and Slurm's release as the OpenAPI document names it (26.05:
        `info.x-slurm.release`; 24.11: `info.version`, "Slurm-24.11.5&openapi/slurmctld")."""
        status, body = await self._send("GET", "/openapi/v3", endpoint="openapi")
        if status == 200:
            try:
                document = msgspec.json.decode(body, type=dict[str, Any])
            except msgspec.DecodeError as exc:
                raise SlurmDecodeError(f"unreadable OpenAPI document: {exc}", endpoint="openapi") from exc
            paths = document.get("paths") or {}
            served = {p.split("/")[2] for p in paths if p.startswith("/slurm/v") and p.endswith("/ping/")}
            return served, _openapi_release(document.get("info"))
        served = set()
        for name in VERSIONS:  # older servers without /openapi/v3: probe each ping
            probe, _ = await self._send("GET", f"/slurm/{name}/ping/", endpoint="ping")
            if probe in (200, *AUTH_STATUSES):
                served.add(name)
        return served, ""

    # --- transport ------------------------------------------------------------------------
    async def _send(
        self, method: str, path: str, *, endpoint: str, params: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, bytes]:
        if self._session is None:
            raise SlurmError("client not started: call start() first", endpoint=endpoint)
        started = time.monotonic()
        headers = {"Accept": "application/json", **self._token.headers()}
        data = None
        if body is not None:
            data = msgspec.json.encode(body)
            headers["Content-Type"] = "application/json"
        try:
            async with self._session.request(
                method, self._base + path, params=params, data=data, headers=headers,
                timeout=aiohttp.ClientTimeout(total=self._timeout), proxy=self.proxy,
            ) as response:  # fmt: skip
                payload = await response.read()
                status = response.status
        except aiohttp.ClientResponseError as exc:
            # slurmrestd 25.11+ sends two answers on some errors; aiohttp refuses both.
            recovered = recover(exc.message)
            if recovered is None:
                self.stats.requests[(endpoint, "error")] += 1
                raise SlurmApiError(
                    f"slurmrestd at {self.url} sent an answer that is not valid HTTP "
                    f"({exc.message.splitlines()[0][:200]}); check what sits between slurm-syncer and "
                    "slurmrestd (a proxy?)",
                    endpoint=endpoint, status=exc.status,
                ) from exc  # fmt: skip
            status, payload = recovered
        except TimeoutError as exc:
            self.stats.requests[(endpoint, "timeout")] += 1
            raise SlurmTimeout(
                f"no answer from {self.url} within {self._timeout:.0f} s", endpoint=endpoint
            ) from exc
        except (aiohttp.ClientConnectionError, OSError) as exc:
            self.stats.requests[(endpoint, "error")] += 1
            self.follow.owe("slurmrestd could not be reached", started)  # replaced? chosen again once back
            raise SlurmConnectionError(
                f"cannot reach slurmrestd at {self.url}: {exc}", endpoint=endpoint
            ) from exc
        except aiohttp.ClientError as exc:  # anything else aiohttp refuses: still one of our errors
            self.stats.requests[(endpoint, "error")] += 1
            self.follow.owe("slurmrestd's answer was cut", started)
            raise SlurmConnectionError(
                f"broken answer from slurmrestd at {self.url}: {type(exc).__name__}: {exc}", endpoint=endpoint
            ) from exc
        self.stats.requests[(endpoint, str(status))] += 1
        self.stats.seconds[endpoint] = self.stats.seconds.get(endpoint, 0.0) + time.monotonic() - started
        self.stats.body_bytes[endpoint] += len(payload)
        if status in AUTH_STATUSES:
            self._token.invalidate()
        return status, payload

    @contextlib.contextmanager
    def _counted_if_on_nodes(self, endpoint: str) -> Iterator[None]:
        if endpoint not in NODE_CALLS:
            yield
            return
        self._node_calls += 1
        try:
            yield
        finally:
            self._node_calls -= 1
            self._node_calls_ended = time.monotonic()

    def wrote_since(self, name: str, since: float) -> bool:
        """This client sent a write to node `name` at or after `since` (time.monotonic())."""
        return self._wrote.get(name, -math.inf) >= since

    def acting_on_nodes(self, within_s: float) -> bool:
        """A per-node read or write is in flight or ended less than `within_s` ago."""
        return self._node_calls > 0 or time.monotonic() - self._node_calls_ended < within_s

    def _prefix(self) -> str:
        if self.version is None:
            raise SlurmError("client not started: call start() first")
        return self.version.prefix

    async def _call(
        self,
        method: str,
        path: str,
        shape: type[T],
        *,
        endpoint: str,
        params: dict[str, str] | None = None,
        body: Any = None,
        idempotent: bool = True,
        ok: tuple[int, ...] = (200,),
    ) -> Answer[T]:
        """One call with retries: status, decoded body (None for 304), body bytes.

        `seconds` is how long the attempt that answered took (earlier failed tries excluded); it belongs
        to the answer, not the client, as other calls run concurrently on the same client.
        """

        async def once() -> Answer[T]:
            await self._follow_version()
            started = time.monotonic()
            prefix = self._prefix()
            with self._counted_if_on_nodes(endpoint):
                status, payload = await self._send(
                    method, prefix + path, endpoint=endpoint, params=params, body=body
                )
            seconds = time.monotonic() - started
            if decoded_release := _release_of(payload):
                self.release = decoded_release
                self.follow.answered_by(decoded_release, started)
            if unserved(status, payload):
                self.follow.owe(f"{prefix}/ answered as not served", started, changed=True)
                raise SlurmPathNotServed(
                    f"slurmrestd at {self.url} does not serve {prefix}{path} (HTTP 404): its API versions "
                    "may have changed; the version is chosen again", endpoint=endpoint,
                )  # fmt: skip
            if status == 304 and 304 in ok:
                return Answer(status, None, 0, seconds, started)
            if status in RETRY_STATUSES:
                raise _Retryable(f"slurmrestd answered HTTP {status}", endpoint=endpoint)
            decoded = self._decode(payload, shape, endpoint, status)
            if status in AUTH_STATUSES:
                seen = self._token.problem()  # expired, another user's: say so rather than "may be"
                raise SlurmAuthError(
                    f"slurmrestd rejected the token (HTTP {status}): "
                    + (
                        seen
                        or "it may be expired or signed with another key, or its user may lack rights; "
                        "check --slurm-token-file / --slurm-jwt-key and that the user is SlurmUser, root or "
                        "a Slurm admin"
                    ),
                    endpoint=endpoint,
                )
            if status not in ok or (decoded is not None and decoded.errors and status != 200):
                raise SlurmApiError(
                    "slurmrestd reported an error", endpoint=endpoint, status=status,
                    errors=_messages(decoded.errors if decoded else []),
                    warnings=_messages(decoded.warnings if decoded else []),
                )  # fmt: skip
            return Answer(status, decoded, len(payload), seconds, started)

        if not idempotent:
            return await once()
        async for attempt in retrying(
            backoff=_RETRY, attempts=self._attempts, deadline_s=self._deadline,
            retry_if=lambda exc: isinstance(exc, _RETRYABLE),
        ):  # fmt: skip
            with attempt:
                return await once()
        raise AssertionError("unreachable: tenacity reraises")

    @staticmethod
    def _decode(payload: bytes, shape: type[T], endpoint: str, status: int) -> T | None:
        if not payload:
            if status == 200:
                raise SlurmDecodeError("empty body where JSON was expected", endpoint=endpoint)
            return None
        try:
            return msgspec.json.decode(payload, type=shape)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # invalid UTF-8 in a string is the latter
            if status != 200:
                return None  # an error page that is not JSON: the status says enough
            raise misshapen(exc, endpoint) from exc

    # --- endpoints ----------------------------------------------------------------------
    async def ping(self) -> bool:
        return bool((pings := await self.controllers()) and all(p.up for p in pings))

    async def controllers(self) -> list[PingEntry]:
        """slurmctld's controllers as slurmrestd pings them: host name, primary or backup, answering."""
        decoded = (await self._call("GET", "/ping/", PingResponse, endpoint="ping")).decoded
        return list(decoded.pings) if decoded else []

    async def slurmctld_conf(self) -> SlurmctldConf | None:
        """SlurmctldPort, the controllers and MetricsType from slurmctld's configuration (`GET /conf`);
        None where the API version has no /conf (before v0.0.45, Slurm 26.05)."""
        if self.version is None or not self.version.conf:
            return None
        decoded = (await self._call("GET", "/conf", ConfResponse, endpoint="conf")).decoded
        return decoded.slurm_conf if decoded else None

    async def list_nodes(self, update_time: int | None = None) -> NodeListing | None:
        """All nodes, or None when `update_time` is given and nothing changed since (HTTP 304).

        `seconds` is the time of the request that answered, so retries do not inflate the duty limit.
        """
        params = {"update_time": str(update_time)} if update_time is not None else None
        ok = (200, 304) if update_time is not None else (200,)
        answer = await self._call("GET", "/nodes/", NodeListResponse, endpoint="nodes", params=params, ok=ok)
        if answer.status == 304 or answer.decoded is None:
            return None
        nodes = await self._node_decoder.decode(answer.decoded.nodes)
        last_update = unwrap(answer.decoded.last_update)
        return NodeListing(nodes, last_update, answer.body_bytes, answer.seconds, answer.started)

    async def list_all_nodes(self) -> NodeListing:
        listing = await self.list_nodes()
        if listing is None:
            raise SlurmDecodeError("an unconditional node list came back empty-handed", endpoint="nodes")
        return listing

    async def get_node(self, name: str) -> SlurmNode:
        try:
            decoded = (await self._call("GET", f"/node/{name}", NodesResponse, endpoint="node")).decoded
        except SlurmApiError as exc:
            if exc.has_error("Failure to query node") or exc.has_error("Invalid node name"):
                raise SlurmNotFound(
                    f"node {name} does not exist", endpoint="node", status=exc.status
                ) from exc
            raise
        if decoded is None or not decoded.nodes:
            raise SlurmNotFound(f"node {name} does not exist", endpoint="node", status=404)
        return decoded.nodes[0].to_node()

    async def update_node(
        self,
        name: str,
        update: NodeUpdate | None = None,
        *,
        state: list[str] | None = None,
        reason: str | None = None,
        comment: str | None = None,
        features: list[str] | None = None,
    ) -> None:
        """Drain (`state=["DRAIN"], reason=...`), undrain (`state=["UNDRAIN"]`), comment, features; or any
        `NodeUpdate`."""
        update = update or NodeUpdate(
            tuple(state) if state is not None else None, reason, comment,
            tuple(features) if features is not None else None,
        )  # fmt: skip
        body = self._body(update)
        self._wrote[name] = time.monotonic()
        # Never retried here: a write retried for seconds may land after the cause it answered is gone
        # (a drain after the uncordon). The caller decides again from fresh state and resends if needed.
        try:
            await self._call(
                "POST", f"/node/{name}", Envelope, endpoint="node_update", body=body, idempotent=False
            )
        except SlurmApiError as exc:
            if exc.has_error("Invalid node name"):
                raise _not_found(f"node {name}", "node_update", exc) from exc
            raise

    def _body(self, update: NodeUpdate) -> dict[str, Any]:
        if update.topology is not None and not (self.version is not None and self.version.topology):
            name = self.version.name if self.version else "none"
            raise SlurmVersionError(f"REST API {name} takes no node topology: needs v0.0.43+ (Slurm 25.05+)")
        return update.body()

    async def update_nodes(
        self,
        names: Sequence[str],
        update: NodeUpdate | None = None,
        *,
        state: list[str] | None = None,
        reason: str | None = None,
    ) -> None:
        """One `POST /nodes/` for many nodes (`state=["DRAIN"]` with a reason, `["UNDRAIN"]`, or any
        `NodeUpdate`).

        Slurm sorts the names as a hostlist and stops at the first unknown one: those sorted before
        it are already changed, the rest are not. So a refusal is never reported as done: it raises
        BulkUpdateError with each node's standing as read back from Slurm.
        """
        if not names:
            raise ValueError("update_nodes needs at least one node name")
        update = update or NodeUpdate(tuple(state) if state is not None else None, reason)
        body = {"name": ",".join(names), **self._body(update)}
        sent = time.monotonic()
        self._wrote.update((name, sent) for name in names)
        try:
            await self._call(
                "POST", "/nodes/", Envelope, endpoint="nodes_update", body=body, idempotent=False
            )
        except SlurmApiError as exc:
            if not exc.has_error("Invalid node name"):
                raise
            outcome = await self._bulk_outcome(names, update)
            unknown = ", ".join(sorted(outcome.unknown)) or "a node"
            raise BulkUpdateError(
                f"bulk update of {len(names)} nodes refused: {unknown} "
                f"unknown to Slurm; {len(outcome.applied)} changed before it stopped, "
                f"{len(outcome.not_applied)} not changed",
                endpoint="nodes_update", status=exc.status, errors=exc.errors, outcome=outcome,
            ) from exc  # fmt: skip

    async def _bulk_outcome(self, names: Sequence[str], update: NodeUpdate) -> BulkOutcome:
        current = {node.name: node for node in (await self.list_all_nodes()).nodes}
        known = [n for n in names if n in current]
        return BulkOutcome(
            applied=frozenset(n for n in known if update.applied_to(current[n])),
            not_applied=frozenset(n for n in known if not update.applied_to(current[n])),
            unknown=frozenset(n for n in names if n not in current),
        )

    @property
    def node_create(self) -> bool:
        """This slurmrestd's API can create nodes (`POST /new/node/`, v0.0.44+)."""
        return self.version is not None and self.version.node_create

    def need_node_create(self) -> None:
        """SlurmVersionError unless this slurmrestd's API can create nodes (v0.0.44+); no request."""
        if not self.node_create:
            raise SlurmVersionError(
                f"REST API {self.version.name if self.version else '?'} cannot create nodes: "
                "power-managed NodeSets need Slurm 25.11+ (REST v0.0.44) or their members in slurm.conf",
                endpoint="node_create",
            )

    async def create_node(self, node_conf: str) -> bool:
        """Create a node from a slurm.conf `NodeName=...` line (e.g. a powered-down CLOUD node); False when
        a node of that name exists already. SlurmVersionError before v0.0.44 (24.11 has no such call)."""
        self.need_node_create()
        try:
            await self._call(
                "POST", "/new/node/", Envelope, endpoint="node_create", body={"node_conf": node_conf},
                idempotent=False,
            )  # fmt: skip
        except SlurmApiError as exc:
            if exc.has_error("Node already exists"):
                return False
            raise
        return True

    async def delete_node(self, name: str) -> None:
        try:
            await self._call("DELETE", f"/node/{name}", Envelope, endpoint="node_delete", idempotent=False)
        except SlurmApiError as exc:
            if exc.has_error("Invalid node name"):
                raise SlurmNotFound(
                    f"node {name} does not exist", endpoint="node_delete", status=exc.status
                ) from exc
            raise

    async def list_partitions(self) -> list[Partition]:
        decoded = (await self._call("GET", "/partitions/", PartitionsResponse, endpoint="partitions")).decoded
        return [
            Partition(p.name, p.nodes.configured, p.nodes.total, p.cpus.total)
            for p in (decoded.partitions if decoded else [])
        ]

    # --- partitions (issue 38) ------------------------------------------------------------------
    @property
    def partition_writes(self) -> bool:
        """This slurmrestd's API can create, update and delete partitions (v0.0.45, Slurm 26.05+)."""
        return self.version is not None and self.version.partition_writes

    async def partition_states(self) -> list[PartitionState]:
        """Every partition with the settings the syncer manages (any API version; the flags and the
        oversubscribe/exclusive strings read as None before v0.0.45, which does not show them)."""
        answer = await self._call("GET", "/partitions/", PartitionDetails, endpoint="partitions")
        return [raw.to_state() for raw in (answer.decoded.partitions if answer.decoded else [])]

    async def put_partition(
        self, name: str, settings: PartitionSettings, *, nodes: str | None = None
    ) -> None:
        """Create the partition `name`, or update it when it exists: one `POST /partitions/` carrying only
        `nodes` (a hostlist, or `+a,-b` changes) and the managed settings. InvalidPartition before any
        request for a value Slurm would store wrongly; SlurmVersionError before v0.0.45."""
        self._need_partition_writes("partition_update")
        entry = body(name, settings, nodes)
        # not retried: the reconcile decides again from a fresh list (as node writes)
        await self._call(
            "POST", "/partitions/", Envelope, endpoint="partition_update", body={"partitions": [entry]},
            idempotent=False,
        )  # fmt: skip

    async def put_partitions(self, writes: Sequence[PartitionWrite]) -> None:
        """Several creates or updates in one `POST /partitions/` (measured on 26.05.5: Slurm applies the
        entries one by one, in order, not atomically; each it refuses is an error naming its index, see
        `refused_entries`, and the others are applied all the same)."""
        self._need_partition_writes("partition_update")
        entries = [body(w.name, w.settings, w.nodes) for w in writes]
        await self._call(
            "POST", "/partitions/", Envelope, endpoint="partition_update", body={"partitions": entries},
            idempotent=False,
        )  # fmt: skip

    async def delete_partition(self, name: str) -> bool:
        """False when Slurm has no such partition. A partition with running or pending jobs is refused by
        Slurm: SlurmApiError with error 2075 "Partition is in use" (`partition_in_use` tells)."""
        self._need_partition_writes("partition_delete")
        return await self._delete_named(f"/partition/{name}", "partition_delete", "Invalid partition name")

    def _need_partition_writes(self, endpoint: str) -> None:
        if not self.partition_writes:
            raise SlurmVersionError(
                f"REST API {self.version.name if self.version else '?'} cannot write partitions: "
                "partitions declared in Kubernetes need Slurm 26.05+ (REST v0.0.45)",
                endpoint=endpoint,
            )

    async def list_jobs(self) -> list[Job]:
        decoded = (await self._call("GET", "/jobs/", JobsResponse, endpoint="jobs")).decoded
        jobs = []
        for raw in decoded.jobs if decoded else []:
            states = [raw.job_state] if isinstance(raw.job_state, str) else raw.job_state
            jobs.append(
                Job(
                    raw.job_id, raw.name, frozenset(states), raw.partition, raw.nodes, raw.user_name,
                    unwrap(raw.end_time),
                )
            )  # fmt: skip
        return jobs

    # --- jobs for pods (issue 44) ------------------------------------------------------------
    @property
    def external_jobs(self) -> bool:
        """This slurmrestd's API takes external jobs (`EXTERNAL_JOB`, v0.0.43+, Slurm 25.05+)."""
        return self.version is not None and self.version.external_jobs

    async def submit_job(self, submission: JobSubmission, *, placeholder: Placeholder = "never") -> int:
        """Submits one job and returns its id: an external job where the API takes them, else a placeholder
        batch job if `placeholder` allows it ("fallback"; "always" submits one anyway), else SlurmUnsupported
        before any request.

        Never retried (a submit is not idempotent: a retried one can make a second job). When the answer is
        lost (timeout, connection cut) the job may exist: the caller finds it by its marker
        (`list_job_details`, `JobCache.resync`) before it submits again."""
        kind: Kind = "placeholder" if placeholder == "always" else "external"
        if kind == "external" and not self.external_jobs:
            if placeholder == "never":
                raise SlurmUnsupported(
                    f"REST API {self.version.name if self.version else '?'} has no external jobs: a pod's "
                    "job needs Slurm 25.05+ (REST v0.0.43+), or placeholder batch jobs allowed",
                    endpoint="job_submit",
                )
            kind = "placeholder"
        return await self._new_job("/job/submit", "job_submit", submit_body(submission, kind), "a submit")

    async def allocate_job(self, submission: JobSubmission) -> int:
        """Allocates an external job now (`POST /job/allocate`, `immediate`): its id, the job RUNNING (or
        CONFIGURING) when this returns; REST v0.0.43+ only (SlurmUnsupported before any request otherwise).
        Slurm allocates within the request only when the job could start now and no pending job of higher
        priority may use the same nodes (`job_allocate()`'s `_top_priority`); else it refuses at once with
        a SlurmApiError (HTTP 422 and Slurm's error: 2016 nodes busy, 2013 not first in line, ...; the
        scheduler's `allocation_refused`), leaving a FAILED job record (reason BadConstraints, no nodes) that
        names the job's marker. No id is given for it.

        Never retried, like a submit: a lost answer (timeout, connection cut) may have made a RUNNING job,
        which the caller finds by its marker before it allocates or submits again."""
        if not self.external_jobs:
            raise SlurmUnsupported(
                f"REST API {self.version.name if self.version else '?'} has no external jobs to allocate",
                endpoint="job_allocate",
            )
        body = allocate_body(submission)
        return await self._new_job("/job/allocate", "job_allocate", body, "an allocation")

    async def _new_job(self, path: str, endpoint: str, body: dict[str, Any], what: str) -> int:
        """POSTs a job (never retried: see submit_job) and gives the id Slurm answered with."""
        answer = await self._call(
            "POST", path, SubmitResponse, endpoint=endpoint, body=body, idempotent=False
        )
        job_id = answer.decoded.job_id if answer.decoded is not None else 0
        if not job_id:
            raise SlurmDecodeError(f"{what} answered without a job id", endpoint=endpoint)
        return job_id

    async def get_job(self, job_id: int) -> SlurmJob:
        """One job, read now (what the scheduler reads before a bind or a delete); SlurmNotFound once Slurm
        has forgotten it (MinJobAge after it ended) or never had it."""
        try:
            answer = await self._call("GET", f"/job/{job_id}", JobDetailsResponse, endpoint="job")
        except SlurmApiError as exc:
            if exc.status == 404 or exc.has_error("Invalid job id"):
                raise SlurmNotFound(
                    f"job {job_id} does not exist", endpoint="job", status=exc.status
                ) from exc
            raise
        raw = answer.decoded.jobs if answer.decoded is not None else []
        if not raw:
            raise SlurmNotFound(f"job {job_id} does not exist", endpoint="job", status=404)
        return decode_job(raw[0])

    async def list_job_details(
        self, update_time: int | None = None, *, keep: Callable[[str], bool] | None = None
    ) -> JobListing | None:
        """Every job (or only those whose marker `keep` accepts: only they are decoded whole), or None when
        `update_time` is given and no job changed since (26.05: HTTP 200, no job, `last_update` 0; a 304 is
        taken alike). No release returns only the jobs that changed: "changed" is every job."""
        if update_time is not None and not (self.version is not None and self.version.conditional_nodes):
            update_time = None  # v0.0.40/41 refuse it for jobs as for nodes (error 9202, measured on 24.11.5)
        params = {"update_time": str(update_time)} if update_time is not None else None
        answer = await self._call(
            "GET", "/jobs/", JobDetailsResponse, endpoint="jobs_detail", params=params, ok=(200, 304)
        )
        decoded = answer.decoded
        if answer.status == 304 or decoded is None:
            return None
        last_update = unwrap(decoded.last_update)
        if update_time is not None and not decoded.jobs and not last_update:
            return None
        jobs = await jobs_in_turns(decoded.jobs, keep)
        return JobListing(
            jobs, len(decoded.jobs), last_update, answer.body_bytes, answer.seconds, answer.started
        )

    async def job_states(self, job_ids: Iterable[int]) -> dict[int, frozenset[str]]:
        """The state of each job named (`GET /jobs/state/`, ~60 bytes a job); a job Slurm no longer has is
        absent from the answer. Ids go as repeated `job_id=` parameters, a chunk at a time (26.05.5 answers
        a comma-separated list with HTTP 500)."""
        wanted = sorted(set(job_ids))
        states: dict[int, frozenset[str]] = {}
        for start in range(0, len(wanted), STATE_CHUNK):
            query = "&".join(f"job_id={job_id}" for job_id in wanted[start : start + STATE_CHUNK])
            answer = await self._call(
                "GET", f"/jobs/state/?{query}", JobStatesResponse, endpoint="job_states"
            )
            for raw in answer.decoded.jobs if answer.decoded is not None else []:
                listed = [raw.state] if isinstance(raw.state, str) else raw.state
                states[int(raw.job_id)] = frozenset(s.upper() for s in listed)
        return states

    async def cancel_job(self, job_id: int, *, signal: str | None = None) -> bool:
        """`DELETE /job/{id}`: ends the job; with `signal` (e.g. "SIGTERM") only signals it, and an external
        job, with nothing to signal, keeps running (SIGKILL ends it). False when Slurm no longer has the job
        or it had already ended. Not retried."""
        return await self._delete_job(job_id, {"signal": signal} if signal else None)

    async def end_job(self, job: SlurmJob, *, signal_for_s: float = 5.0) -> bool:
        """Ends a pod's job once its pods are gone, freeing its CPUs at once: a placeholder that runs gets
        SIGUSR1 in its batch script (which exits: COMPLETED in 0.1 s, where a cancel keeps the CPUs for
        KillWait); any other job is cancelled. Slurm shows a batch job RUNNING before its script runs, and a
        signal sent then is lost (measured): the signal is sent again every 0.5 s, and a placeholder still
        running after `signal_for_s` is cancelled. False when Slurm no longer has the job or it had ended."""
        if not job.running or job.external:
            return await self.cancel_job(job.job_id)
        deadline = time.monotonic() + signal_for_s
        signalled = False
        while time.monotonic() < deadline:
            if not await self._delete_job(job.job_id, {"signal": "SIGUSR1", "flags": "BATCH_JOB"}):
                return signalled  # it ended (its script exited) or Slurm no longer has it
            signalled = True
            for _ in range(5):
                await asyncio.sleep(0.1)  # the script's exit, polled: Slurm tells no one
                try:
                    if not (await self.get_job(job.job_id)).running:
                        return True
                except SlurmNotFound:
                    return True
        await self.cancel_job(job.job_id)
        return True

    async def _delete_job(self, job_id: int, params: dict[str, str] | None) -> bool:
        try:
            answer = await self._call(
                "DELETE",
                f"/job/{job_id}",
                CancelResponse,
                endpoint="job_cancel",
                params=params,
                idempotent=False,
            )
        except SlurmApiError as exc:
            if exc.status == 404 or any(e.error_number in JOB_GONE_CODES for e in exc.errors):
                return False
            raise
        # HTTP 200 whatever happened: each job's outcome is in `status`
        failed = [s.error for s in answer.decoded.status if s.error.code] if answer.decoded else []
        if any(error.code in JOB_GONE_CODES for error in failed):
            return False
        if failed:
            raise SlurmApiError(
                "slurmrestd refused the cancel", endpoint="job_cancel", status=answer.status,
                errors=tuple(SlurmMessage(e.string, e.code) for e in failed),
            )  # fmt: skip
        return True

    async def update_job(
        self,
        job_id: int,
        *,
        hold: bool | None = None,
        priority: int | None = None,
        nice: int | None = None,
        time_limit_min: int | None = None,
    ) -> None:
        """`POST /job/{id}`: hold or release a pending job, set its priority (an administrator's; 0 holds it),
        nice or time limit. Not retried; SlurmNotFound when Slurm no longer has it."""
        body = update_body(hold=hold, priority=priority, nice=nice, time_limit_min=time_limit_min)
        try:
            await self._call(
                "POST", f"/job/{job_id}", Envelope, endpoint="job_update", body=body, idempotent=False
            )
        except SlurmApiError as exc:
            if exc.status == 404 or exc.has_error("Invalid job id"):
                raise _not_found(f"job {job_id}", "job_update", exc) from exc
            raise

    # --- reservations (maintenance windows) ------------------------------------------------
    @property
    def reservation_writes(self) -> bool:
        """This slurmrestd's API can create and update reservations (v0.0.43+, Slurm 25.05+)."""
        return self.version is not None and self.version.reservation_writes

    async def list_reservations(self) -> list[Reservation]:
        answer = await self._call("GET", "/reservations/", ReservationsResponse, endpoint="reservations")
        found = []
        for raw in answer.decoded.reservations if answer.decoded else []:
            listed = raw.node_list if isinstance(raw.node_list, list) else expand(raw.node_list)
            found.append(
                Reservation(
                    raw.name, tuple(sorted(listed)), unwrap(raw.start_time), unwrap(raw.end_time),
                    frozenset(f.upper() for f in raw.flags),
                )
            )  # fmt: skip
        return found

    async def put_reservation(
        self,
        name: str,
        *,
        nodes: Sequence[str],
        end: int,
        start: int | None,
        flags: Sequence[str],
        users: Sequence[str],
        comment: str,
    ) -> None:
        """Create the reservation `name`, or update it when it exists (one `POST /reservation`, whatever
        the number of nodes). `start=None` leaves the start alone: Slurm refuses to move the start of a
        reservation that has begun ("Reservation already started")."""
        if not self.reservation_writes:
            raise SlurmVersionError(
                f"REST API {self.version.name if self.version else '?'} cannot create reservations: "
                "maintenance windows need Slurm 25.05+ (REST v0.0.43+)",
                endpoint="reservation_update",
            )
        body: dict[str, Any] = {
            "name": name,
            "node_list": list(nodes),
            "end_time": {"set": True, "number": end},
            "flags": list(flags),
            "users": list(users),
            "comment": comment,
        }
        if start is not None:
            body["start_time"] = {"set": True, "number": start}
        # not retried: the reconcile decides again from a fresh list (as node writes)
        await self._call(
            "POST", "/reservation", Envelope, endpoint="reservation_update", body=body, idempotent=False
        )

    async def delete_reservation(self, name: str) -> bool:
        """False when Slurm has no such reservation (already gone: it ended, or someone removed it)."""
        return await self._delete_named(
            f"/reservation/{name}", "reservation_delete", "Requested reservation is invalid"
        )

    async def _delete_named(self, path: str, endpoint: str, gone: str) -> bool:
        """One DELETE, not retried; False when Slurm answers that the object does not exist (`gone`)."""
        try:
            await self._call("DELETE", path, Envelope, endpoint=endpoint, idempotent=False)
        except SlurmApiError as exc:
            if exc.has_error(gone):
                return False
            raise
        return True

    async def diag(self) -> dict[str, object]:
        return (await self.diag_sized())[0]

    async def diag_sized(self) -> tuple[dict[str, object], int]:
        """slurmctld's statistics and the size of the answer in bytes (what reading them cost)."""
        answer = await self._call("GET", "/diag/", DiagResponse, endpoint="diag")
        return (dict(answer.decoded.statistics) if answer.decoded else {}), answer.body_bytes


def _not_found(what: str, endpoint: str, exc: SlurmApiError) -> SlurmNotFound:
    """A write's answer that `what` is not in Slurm, with Slurm's own errors."""
    return SlurmNotFound(f"{what} does not exist", endpoint=endpoint, status=exc.status, errors=exc.errors)
