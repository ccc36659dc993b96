"""The Kubernetes API client of the syncer: one aiohttp session, raw JSON, a client-side rate limit.

Credentials come from syncer.kube.credentials (kubeconfig, exec plugins, in-cluster token files); requests
go through this thin client so hot paths decode raw bytes straight into compact structs and every call
shares one connection pool.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import structlog

from syncer.kube import credentials
from syncer.kube.errors import KubeConnectionError, KubeError, config_error
from syncer.kube.kubeconfig import resolve
from syncer.kube.ratelimit import TokenBucket
from syncer.runtime.backoff import Backoff
from syncer.runtime.proxy import proxy_for
from syncer.runtime.retry import retrying

log = structlog.get_logger("syncer.kube")
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
RETRY_STATUSES = frozenset({0, 429, 500, 502, 503, 504})  # 0: no answer (connection lost, timed out)
_RETRY = Backoff(0.2, 10.0)  # the runtime's one policy


def _server_wait(exc: BaseException) -> float | None:
    """How long the failure itself says to wait: none after a 401 (fresh credentials), Retry-After (at
    most 10 s) on a 429 or 503, else the backoff's."""
    if isinstance(exc, KubeError):
        if exc.status == 401:
            return 0.0
        if exc.retry_after_s is not None:
            return min(exc.retry_after_s, 10.0)
    return None


class KubeClient:
    def __init__(
        self,
        server: credentials.Credentials | str,
        *,
        qps: float = 50.0,
        burst: int = 100,
        timeout_s: float = 30.0,
    ) -> None:
        """A client of the server these credentials name, or of a plain URL (no credentials at all)."""
        found = (
            server if isinstance(server, credentials.Credentials) else credentials.Credentials(server, None)
        )
        self.server = found.server.rstrip("/")
        self._headers = dict(found.headers)
        self._ssl = found.ssl_context
        # the kubeconfig's proxy-url, else HTTPS_PROXY / NO_PROXY as client-go reads them
        self.proxy = found.proxy_url or proxy_for(self.server)
        self._client_tls = found.client_tls
        self._retired: aiohttp.ClientSession | None = None  # the session of the certificate before
        self._token = found.token
        self._server_name = found.tls_server_name
        self.limiter = TokenBucket(qps, burst)
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self.requests_total = 0
        # (method, status) of requests answered with an error; status 0: no answer (lost, timed out)
        self.errors: Counter[tuple[str, int]] = Counter()
        self.credentials = "given directly"  # where from_config found the credentials, in words

    @property
    def errors_by_status(self) -> Counter[int]:
        """Requests answered with an error (or none), by status whatever the method."""
        by_status: Counter[int] = Counter()
        for (_, status), count in self.errors.items():
            by_status[status] += count
        return by_status

    @property
    def errors_total(self) -> int:
        """Requests answered with an error (or none), whatever the status."""
        return sum(self.errors.values())

    @classmethod
    async def from_config(
        cls, kubeconfig: str | None = None, *, qps: float = 50.0, burst: int = 100
    ) -> KubeClient:
        """From `kubeconfig`, else $KUBECONFIG (merged), else ~/.kube/config, else in-cluster credentials
        (client-go's order); `credentials` then says which was used."""
        source = resolve(kubeconfig)
        try:
            found = await credentials.load(source)
        except KubeError as exc:
            what = f"cannot load Kubernetes credentials from {source.origin}"
            raise config_error(f"{what}: {exc.message}") from None
        client = cls(found, qps=qps, burst=burst)
        client.credentials = source.origin
        return client

    async def _auth_headers(self) -> dict[str, str]:
        """The headers of the next request; first, a client certificate rotated by its exec plugin is taken
        up (a new connection pool: open connections keep the certificate they were made with)."""
        if self._client_tls is not None:
            context = await self._client_tls.context()
            if context is not None and context is not self._ssl:
                self._ssl = context
                if self._session is not None:
                    if self._retired is not None:
                        await self._retired.close()  # two rotations ago: its streams have ended by now
                    self._retired, self._session = self._session, None
        headers = dict(self._headers)
        if self._token is not None:
            token = await self._token.token()  # token files and exec plugins refresh here when due
            if token:
                headers["Authorization"] = f"Bearer {token}"
        return headers

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=64, ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(connector=connector, json_serialize=json.dumps)
        return self._session

    async def close(self) -> None:
        for session in (self._session, self._retired):
            if session is not None:
                await session.close()
        self._session = self._retired = None

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> bytes:
        """One request; retried (the runtime's one retry loop) on 429, honouring Retry-After, and on 5xx
        or a lost connection for reads; once at once on a 401 with a refreshable token; else KubeError."""
        data = None if body is None else json.dumps(body).encode()
        refreshed: list[KubeError] = []  # the 401 after which the token was read or run again (once)

        def retry_if(exc: BaseException) -> bool:
            if not isinstance(exc, KubeError):
                return False
            if exc.status == 401:
                return any(exc is seen for seen in refreshed)
            return exc.status in RETRY_STATUSES and (method == "GET" or exc.status == 429)

        def logged(exc: BaseException, delay_s: float) -> None:
            status = exc.status if isinstance(exc, KubeError) else None
            log.debug("kube request retried", method=method, path=path, status=status, delay_s=delay_s)

        async for attempt in retrying(
            backoff=_RETRY, attempts=4, retry_if=retry_if, wait_hint=_server_wait, before_sleep=logged
        ):
            with attempt:
                try:
                    return await self._once(method, path, params, data, content_type)
                except KubeError as exc:
                    self.errors[method, exc.status] += 1
                    if exc.status == 401 and self._token is not None and not refreshed:
                        self._token.forget()  # rotated or expired: read the file or run the plugin again
                        refreshed.append(exc)
                    raise
        raise AssertionError("unreachable: tenacity reraises")

    async def _once(
        self, method: str, path: str, params: Mapping[str, str] | None, data: bytes | None, content_type: str
    ) -> bytes:
        await self.limiter.acquire()
        self.requests_total += 1
        headers = await self._auth_headers()
        headers["Accept"] = "application/json"
        if data is not None:
            headers["Content-Type"] = content_type
        try:
            async with self.session.request(
                method,
                self.server + path,
                params=params,
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                server_hostname=self._server_name,
                proxy=self.proxy,
            ) as response:
                raw = await response.read()
                if response.status < 400:
                    return raw
                raise _error_from(response.status, raw, response.headers.get("Retry-After"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeConnectionError(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        raw = await self.request_bytes(method, path, **kwargs)
        decoded = json.loads(raw) if raw else {}
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: Any) -> dict[str, Any]:
        return await self.request("PUT", path, body=body)

    async def delete(self, path: str, body: Any = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body=body)

    async def watch_lines(
        self,
        path: str,
        params: Mapping[str, str],
        inactivity_timeout_s: float,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[bytes]:
        """Raw event lines of one watch stream; ends when the server closes it or it goes silent. `on_open`
        is called once the server has accepted the watch, before its first line (the events missed since the
        resourceVersion asked for come first)."""
        await self.limiter.acquire()
        self.requests_total += 1
        headers = await self._auth_headers()
        headers["Accept"] = "application/json"
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.timeout_s, sock_read=inactivity_timeout_s
        )
        try:
            async with self.session.get(
                self.server + path,
                params=params,
                headers=headers,
                timeout=timeout,
                server_hostname=self._server_name,
                proxy=self.proxy,
            ) as response:
                if response.status == 401 and self._token is not None:
                    self._token.forget()  # the informer's next attempt reads or runs it again
                if response.status >= 400:
                    raise _error_from(
                        response.status, await response.read(), response.headers.get("Retry-After")
                    )
                if on_open is not None:
                    on_open()
                try:
                    async for line in response.content:
                        if line.strip():
                            yield line
                except aiohttp.SocketTimeoutError:
                    # a quiet resource with no bookmark to send: end the stream; the caller watches again
                    log.debug("watch silent, ended", path=path, silent_s=inactivity_timeout_s)
                    return
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeConnectionError(f"watch {path}: {exc.__class__.__name__}: {exc}") from None


def _error_from(status: int, raw: bytes, retry_after: str | None) -> KubeError:
    reason, message = "", raw[:300].decode(errors="replace")
    try:
        body = json.loads(raw)
        if isinstance(body, dict):
            reason, message = str(body.get("reason", "")), str(body.get("message", message))
    except ValueError:
        pass
    retry_s: float | None = None
    if retry_after:
        try:
            retry_s = float(retry_after)
        except ValueError:
            retry_s = None
    return KubeError(status, reason or "Unknown", message, retry_s)
