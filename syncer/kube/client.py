"""The Kubernetes API client of the syncer: one aiohttp session, raw JSON, a client-side rate limit.

kubernetes_asyncio is used only to read kubeconfig/in-cluster credentials (exec plugins, token
refresh, TLS files); requests go through this thin client so hot paths decode raw bytes straight
into compact structs and every call shares one connection pool.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import structlog

from syncer.kube.errors import KubeConnectionError, KubeError
from syncer.kube.kubeconfig import resolve
from syncer.kube.ratelimit import TokenBucket

log = structlog.get_logger("syncer.kube")
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class KubeClient:
    def __init__(
        self,
        server: str,
        *,
        headers: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | bool | None = None,
        qps: float = 50.0,
        burst: int = 100,
        timeout_s: float = 30.0,
        configuration: Any = None,
    ) -> None:
        self.server = server.rstrip("/")
        self._headers = dict(headers or {})
        self._ssl = ssl_context
        self.limiter = TokenBucket(qps, burst)
        self.timeout_s = timeout_s
        self._configuration = configuration  # kubernetes_asyncio Configuration, for token refresh
        self._session: aiohttp.ClientSession | None = None
        self.requests_total = 0
        self.errors_total = 0
        self.credentials = "given directly"  # where from_config found the credentials, in words

    @classmethod
    async def from_config(
        cls, kubeconfig: str | None = None, *, qps: float = 50.0, burst: int = 100
    ) -> KubeClient:
        """From `kubeconfig`, else $KUBECONFIG (merged), else ~/.kube/config, else in-cluster credentials
        (client-go's order); `source` then says which was used."""
        from kubernetes_asyncio import client as k8s_client
        from kubernetes_asyncio import config as k8s_config

        source = resolve(kubeconfig)
        configuration = k8s_client.Configuration()
        try:
            if source.in_cluster:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                # a colon-joined list is merged the way kubectl merges $KUBECONFIG
                await k8s_config.load_kube_config(
                    config_file=os.pathsep.join(source.files), client_configuration=configuration
                )
        except (k8s_config.ConfigException, OSError) as exc:
            raise KubeError(
                0, "ConfigError", f"cannot load Kubernetes credentials from {source.origin}: {exc}"
            ) from None
        host = str(configuration.host or "")
        if not host:
            raise KubeError(0, "ConfigError", "the Kubernetes credentials name no API server")
        headers: dict[str, str] = {}
        if configuration.username and configuration.password:
            basic = base64.b64encode(f"{configuration.username}:{configuration.password}".encode()).decode()
            headers["Authorization"] = f"Basic {basic}"
        context: ssl.SSLContext | bool | None = None
        if host.startswith("https"):
            if not configuration.verify_ssl:
                context = False
            else:
                context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
                if configuration.cert_file:
                    context.load_cert_chain(configuration.cert_file, configuration.key_file)
        client = cls(
            host,
            headers=headers,
            ssl_context=context,
            qps=qps,
            burst=burst,
            configuration=configuration,
        )
        client.credentials = source.origin
        return client

    async def _auth_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        cfg = self._configuration
        if cfg is not None and "BearerToken" in cfg.api_key:
            # refreshes rotating tokens (exec plugins, projected service-account tokens) when due
            token = await cfg.get_api_key_with_prefix("BearerToken")
            if token:
                headers["Authorization"] = token
        return headers

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=64, ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(connector=connector, json_serialize=json.dumps)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> bytes:
        """One request; retried on 429 (honouring Retry-After) and 5xx a few times, else KubeError."""
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(4):
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
                ) as response:
                    raw = await response.read()
                    if response.status < 400:
                        return raw
                    error = _error_from(response.status, raw, response.headers.get("Retry-After"))
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = KubeConnectionError(f"{method} {path}: {exc.__class__.__name__}: {exc}")
            self.errors_total += 1
            retryable = error.status in (0, 429, 500, 502, 503, 504) and (
                method == "GET" or error.status == 429
            )
            if not retryable or attempt == 3:
                raise error
            delay = error.retry_after_s if error.retry_after_s is not None else 0.2 * 2**attempt
            log.debug("kube request retried", method=method, path=path, status=error.status, delay_s=delay)
            await asyncio.sleep(min(delay, 10.0))
        raise AssertionError("unreachable")

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
        self, path: str, params: Mapping[str, str], inactivity_timeout_s: float
    ) -> AsyncIterator[bytes]:
        """Raw event lines of one watch stream; ends when the server closes it or it goes silent."""
        await self.limiter.acquire()
        self.requests_total += 1
        headers = await self._auth_headers()
        headers["Accept"] = "application/json"
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.timeout_s, sock_read=inactivity_timeout_s
        )
        try:
            async with self.session.get(
                self.server + path, params=params, headers=headers, timeout=timeout
            ) as response:
                if response.status >= 400:
                    raise _error_from(
                        response.status, await response.read(), response.headers.get("Retry-After")
                    )
                async for line in response.content:
                    if line.strip():
                        yield line
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
