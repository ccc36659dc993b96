"""HTTP face of the emulator: the Kubernetes REST paths, watch streams, discovery and Table output."""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import msgspec
from aiohttp import web

from syncer.testing.kubeapi import protobuf, rbac, ssa
from syncer.testing.kubeapi.api import Api, Selection
from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.faults import Faults
from syncer.testing.kubeapi.resources import Resource
from syncer.testing.kubeapi.schema import strict_fields
from syncer.testing.kubeapi.store import Change
from syncer.testing.kubeapi.tables import table

KUBE_VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-slurm-syncer-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
APPLY_PATCH = "application/apply-patch+yaml"
PRE_TIMEOUT_BOOKMARK_S = 2.0  # kube-apiserver bookmarks a watch this long before its timeoutSeconds

USER = web.RequestKey("kube_user", str)  # the request's RBAC-judged user, set by authentication
_encoder = msgspec.json.Encoder()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class _Watcher:
    """One watch's stream and where it stands: the newest version it has seen (`position`) and the newest
    it was sent (`last_sent`: a bookmark says only a newer one)."""

    response: web.StreamResponse
    resource: Resource
    namespace: str | None
    selection: Selection
    as_table: bool
    position: int
    last_sent: int


def response_or_empty(response: Any) -> web.StreamResponse:
    return response if isinstance(response, web.StreamResponse) else web.Response(status=499)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encoder.encode(body), status=status, content_type="application/json")


def _error(exc: ApiError) -> web.Response:
    response = _json(exc.status(), exc.code)
    response.headers.update(exc.headers)
    return response


def _check_initial_events(request: web.Request) -> None:
    """sendInitialEvents needs resourceVersionMatch=NotOlderThan and bookmarks, as kube-apiserver says."""
    if request.query.get("resourceVersionMatch") != "NotOlderThan":
        field, why = (
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        )
    elif not _flag(request, "allowWatchBookmarks"):
        field, why = "allowWatchBookmarks", "sendInitialEvents requires setting allowWatchBookmarks to true"
    else:
        return
    message = f"Forbidden: {why}"
    raise ApiError(
        422,
        "Invalid",
        f'ListOptions.meta.k8s.io "" is invalid: {field}: {message}',
        {
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": [{"reason": "FieldValueForbidden", "message": message, "field": field}],
        },
    )


def _wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


class KubeApiServer:
    """Routes every request path by hand: Kubernetes paths are too regular and too irregular for a router."""

    def __init__(
        self,
        api: Api,
        faults: Faults,
        bookmark_interval_s: float = 60.0,
        min_request_timeout_s: float = 1800.0,  # kube-apiserver's --min-request-timeout
    ):
        self.api = api
        self.faults = faults
        self.bookmark_interval_s = bookmark_interval_s
        self.min_request_timeout_s = min_request_timeout_s
        self.watch_tasks: set[asyncio.Task[Any]] = set()
        # (monotonic time, method, path+query) for tests and benchmarks that count calls
        self.requests: list[tuple[float, str, str]] = []
        self.authorizer: rbac.Authorizer | None = None  # RBAC for the identities it names
        self.record_requests = False
        self.address = ""

    def app(
        self,
        middlewares: tuple[Any, ...] = (),
        control_routes: Callable[[web.Application], None] | None = None,
    ) -> web.Application:
        app = web.Application(
            middlewares=[*middlewares, self._faults_middleware], client_max_size=8 * 1024 * 1024
        )
        if control_routes is not None:
            control_routes(app)  # before the catch-all, which would swallow them
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    @web.middleware
    async def _faults_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/_emulator"):
            return await handler(request)
        await self.faults.wait_running()
        self.faults.requests_total += 1
        if self.record_requests:
            self.requests.append((time.monotonic(), request.method, request.path_qs))
        if self.faults.latency_s:
            await asyncio.sleep(self.faults.latency_s)
        if self.faults.fail_remaining > 0:
            self.faults.fail_remaining -= 1
            self.faults.requests_failed += 1
            status = self.faults.fail_status
            reason = "TooManyRequests" if status == 429 else "InternalError"
            error = ApiError(status, reason, f"injected fault: {status}")
            if status == 429:
                error.headers["Retry-After"] = str(self.faults.retry_after_s)
                error.details = {"retryAfterSeconds": self.faults.retry_after_s}
            return _error(error)
        if self.faults.conflicts and self.faults.conflicting(request.method, request.path):
            kind, _, name = request.path.rstrip("/").removesuffix("/status").rpartition("/")
            return _error(ApiError.conflict(kind.rpartition("/")[2], name))
        late_s = self.faults.answer_delay(request.method, request.path)
        lost = self.faults.lost_status(request.method, request.path)
        response = await handler(request)
        if late_s:
            await asyncio.sleep(late_s)  # the injected fault itself: done already, answered late
        if lost:  # done already, and the answer lost on the way back
            await self.faults.wait_answers_released()
            self.faults.requests_failed += 1
            return _error(
                ApiError(lost, "GatewayTimeout", f"injected fault: {lost} after the request was done")
            )
        return response

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        strict_fields.set(request.query.get("fieldValidation") == "Strict")
        if request.method == "PATCH" and request.content_type == APPLY_PATCH:
            ssa.field_manager.set(request.query.get("fieldManager", ""))  # required for apply: no default
        else:
            ssa.field_manager.set(
                ssa.manager_of(request.query.get("fieldManager"), request.headers.get("User-Agent", ""))
            )
        ssa.force_apply.set(request.query.get("force") == "true")
        try:
            return await self._dispatch(request)
        except ApiError as exc:
            return _error(exc)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [unquote(p) for p in request.path.strip("/").split("/") if p]
        if not parts:
            return _json({"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz", "/readyz"]})
        head = parts[0]
        if head in ("healthz", "readyz", "livez"):
            return web.Response(text="ok")
        if head == "version":
            return _json(KUBE_VERSION)
        if head == "openapi" and len(parts) >= 2 and parts[1] == "v3":
            return _json(self._openapi_v3("/".join(parts[2:])))
        if head in ("openapi", "swagger.json"):
            raise ApiError(404, "NotFound", "the emulator serves no OpenAPI v2 document")
        if head == "api":
            if len(parts) == 1:
                return _json(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}
                        ],
                    }
                )
            return await self._resource_request(request, "", parts[1], parts[2:])
        if head == "apis":
            if len(parts) == 1:
                return _json(
                    {
                        "kind": "APIGroupList",
                        "apiVersion": "v1",
                        "groups": [self._group(g) for g in self.api.registry.groups()],
                    }
                )
            if len(parts) == 2:
                if parts[1] not in self.api.registry.groups():
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return _json({"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1])})
            return await self._resource_request(request, parts[1], parts[2], parts[3:])
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _openapi_v3(self, group_version_path: str) -> dict[str, Any]:
        """Just enough OpenAPI v3 for kubectl to see that the server validates fields itself
        (`fieldValidation`), so `kubectl apply` does not need the full schema documents."""
        registry = self.api.registry
        gvs = sorted({(r.group, r.version) for r in registry.by_key.values()})
        if not group_version_path:
            listing: dict[str, Any] = {}
            for group, version in gvs:
                key = f"apis/{group}/{version}" if group else f"api/{version}"
                listing[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={self.api.store.rv}"}
            return {"paths": listing}
        head, _, rest = group_version_path.partition("/")
        group, _, version = rest.rpartition("/") if head == "apis" else ("", "", rest)
        resources = registry.in_version(group, version)
        if not resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
        param: dict[str, Any] = {
            "name": "fieldValidation",
            "in": "query",
            "schema": {"type": "string", "uniqueItems": True},
        }
        paths: dict[str, Any] = {}
        for resource in resources:
            scope = "/namespaces/{namespace}" if resource.namespaced else ""
            gvk = {"group": group, "version": version, "kind": resource.kind}
            operation: dict[str, Any] = {
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param],
                "responses": {},
            }
            paths[f"{prefix}{scope}/{resource.plural}/{{name}}"] = {"patch": operation, "put": operation}
            paths[f"{prefix}{scope}/{resource.plural}"] = {"post": operation}
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
            "paths": paths,
        }

    def _group(self, group: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self.api.registry.versions(group)]
        return {"name": group, "versions": versions, "preferredVersion": versions[-1]}

    async def _resource_request(
        self, request: web.Request, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        if not rest:
            resources = self.api.registry.in_version(group, version)
            if not resources:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            group_version = f"{group}/{version}" if group else version
            listed = [entry for r in resources for entry in r.discovery()]
            return _json(
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": listed,
                }
            )
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and group == ""
            and self._is_namespaced_plural(group, version, rest[2])
        ) or (rest[0] == "namespaces" and len(rest) >= 3 and group != ""):
            namespace, rest = rest[1], rest[2:]
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        user = request.get(USER)
        if self.authorizer is not None and user:  # kube-apiserver authorizes before it routes
            asked = rbac.request_of(
                request.method, request.query, group, rest[0], namespace or "", name, subresource
            )
            self.authorizer.check(user, asked)
            if (group, rest[0]) in rbac.SELF_REVIEWS and request.method == "POST":
                return _json(self.authorizer.review(user, await self._body(request)), 201)
        resource = self.api.resource(group, version, rest[0])
        if resource.namespaced and namespace is None and len(rest) > 1:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not resource.namespaced and namespace is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not name:
            return await self._collection(request, resource, namespace)
        return await self._object(request, resource, namespace or "", name, subresource)

    def _is_namespaced_plural(self, group: str, version: str, plural: str) -> bool:
        found = self.api.registry.get(group, version, plural)
        return found is not None and found.namespaced

    async def _body(self, request: web.Request) -> Any:
        if request.content_type == "application/cbor":
            # client-go falls back to JSON after a 415, as it does with API servers without CBOR
            raise ApiError.unsupported_media_type()
        raw = await request.read()
        if request.content_type == "application/vnd.kubernetes.protobuf":
            try:
                return protobuf.decode(raw)  # kubectl drain's Eviction, kubectl create namespace, ...
            except protobuf.ProtobufError as exc:
                raise ApiError(415, "UnsupportedMediaType", f"{request.content_type}: {exc}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            try:
                import yaml

                return yaml.safe_load(raw)
            except Exception:
                raise ApiError.bad_request("the request body is neither JSON nor YAML") from None

    async def _collection(
        self, request: web.Request, resource: Resource, namespace: str | None
    ) -> web.StreamResponse:
        query = request.query
        dry_run = query.get("dryRun") == "All"
        if request.method == "GET":
            selection = self.api.selection(
                resource, query.get("labelSelector", ""), query.get("fieldSelector", "")
            )
            if _flag(request, "watch"):
                return await self._watch(request, resource, namespace, selection)
            listed = self.api.list_objects(
                resource,
                namespace,
                selection,
                limit=int(query.get("limit", "0") or 0),
                continue_token=query.get("continue", ""),
                resource_version=query.get("resourceVersion", ""),
                resource_version_match=query.get("resourceVersionMatch", ""),
            )
            if _wants_table(request):
                return _json(
                    table(resource, listed.items, listed.resource_version, query.get("includeObject", ""))
                )
            meta: dict[str, Any] = {"resourceVersion": listed.resource_version}
            if listed.continue_token:
                meta["continue"] = listed.continue_token
                meta["remainingItemCount"] = listed.remaining
            return _json(
                {
                    "kind": f"{resource.kind}List",
                    "apiVersion": resource.api_version,
                    "metadata": meta,
                    "items": listed.items,
                }
            )
        if resource.key == ("", "bindings"):  # create only: the Binding names its pod
            if request.method != "POST":
                raise ApiError.method_not_allowed()
            return _json(self.api.bind(namespace or "", None, await self._body(request), dry_run), 201)
        if request.method == "POST":
            body = await self._body(request)
            if resource.key == ("authorization.k8s.io", "selfsubjectaccessreviews"):
                return _json(self.api.access_review(body), 201)
            created = self.api.create(resource, namespace or "", body, dry_run)
            return _json(created, 201)
        if request.method == "DELETE":
            selection = self.api.selection(
                resource, query.get("labelSelector", ""), query.get("fieldSelector", "")
            )
            deleted = self.api.delete_collection(resource, namespace, selection)
            return _json(
                {
                    "kind": f"{resource.kind}List",
                    "apiVersion": resource.api_version,
                    "metadata": {},
                    "items": deleted,
                }
            )
        raise ApiError.method_not_allowed()

    async def _object(
        self, request: web.Request, resource: Resource, namespace: str, name: str, subresource: str
    ) -> web.StreamResponse:
        dry_run = request.query.get("dryRun") == "All"
        method = request.method
        if subresource not in ("", "status", "scale", "eviction", "binding"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if subresource == "status" and not resource.status_subresource:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if subresource == "binding":
            if method != "POST" or resource.key != ("", "pods"):
                raise ApiError.method_not_allowed()
            return _json(self.api.bind(namespace, name, await self._body(request), dry_run), 201)
        if subresource == "eviction":
            if method != "POST" or resource.key != ("", "pods"):
                raise ApiError.method_not_allowed()
            return _json(self.api.evict(namespace, name, await self._body(request)), 201)
        if subresource == "scale":
            if method == "GET":
                return _json(self.api.get_scale(resource, namespace, name))
            if method == "PUT":
                return _json(self.api.set_scale(resource, namespace, name, await self._body(request)))
            if method == "PATCH":
                return _json(
                    self.api.patch_scale(
                        resource, namespace, name, await request.read(), request.content_type
                    )
                )
            raise ApiError.method_not_allowed()
        if method == "GET":
            obj = self.api.get(resource, namespace, name)
            if _wants_table(request):
                return _json(
                    table(
                        resource,
                        [obj],
                        obj["metadata"]["resourceVersion"],
                        request.query.get("includeObject", ""),
                    )
                )
            return _json(obj)
        if method == "PUT":
            return _json(
                self.api.update(resource, namespace, name, await self._body(request), subresource, dry_run)
            )
        if method == "PATCH" and request.content_type == APPLY_PATCH:
            applied, created = self.api.apply(
                resource, namespace, name, await self._body(request), subresource, dry_run
            )
            return _json(applied, 201 if created else 200)
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "")
            return _json(
                self.api.patch(
                    resource, namespace, name, await request.read(), content_type, subresource, dry_run
                )
            )
        if method == "DELETE":
            body = await self._body(request)
            options = dict(body) if isinstance(body, dict) else {}
            if "gracePeriodSeconds" in request.query:
                options["gracePeriodSeconds"] = int(request.query["gracePeriodSeconds"])
            if "propagationPolicy" in request.query:
                options["propagationPolicy"] = request.query["propagationPolicy"]
            return _json(self.api.delete(resource, namespace, name, options, dry_run))
        raise ApiError.method_not_allowed()

    async def _watch(
        self, request: web.Request, resource: Resource, namespace: str | None, selection: Selection
    ) -> web.StreamResponse:
        query = request.query
        send_initial = _flag(request, "sendInitialEvents")
        if send_initial:
            _check_initial_events(request)
        store = self.api.store
        queue = store.subscribe()  # before reading state, so nothing falls between the two
        response: web.StreamResponse | None = None
        try:
            timeout_s = self._watch_timeout(query.get("timeoutSeconds"))
            start_rv = query.get("resourceVersion", "")
            initial: list[dict[str, Any]] = []
            replay: list[Change] = []
            position = store.rv
            if send_initial or start_rv in ("", "0"):
                initial = [
                    o
                    for o in store.objects_of(resource.key, namespace if resource.namespaced else None)
                    if selection.matches(o)
                ]
            else:
                try:
                    replay = store.changes_after(int(start_rv))
                except ValueError:
                    raise ApiError.bad_request(f"invalid resource version: {start_rv}") from None
                except ApiError as gone:
                    response = await self._open_stream(request)
                    await self._send(response, {"type": "ERROR", "object": gone.status()})
                    return response
            response = await self._open_stream(request)
            # kube-apiserver bookmarks only a version newer than the last one this watch was sent
            last_sent = position if start_rv in ("", "0") or send_initial else int(start_rv)
            watcher = _Watcher(
                response, resource, namespace, selection, _wants_table(request), position, last_sent
            )
            for obj in initial:
                await self._send(response, self._event("ADDED", resource, obj, watcher.as_table))
            if send_initial:
                await self._send(response, self._bookmark(resource, position, initial_end=True))
            for change in replay:
                await self._deliver(watcher, change)
            if await self._follow(request, watcher, queue, time.monotonic() + timeout_s):
                await response.write_eof()
            return response
        except ConnectionResetError:
            return response_or_empty(response)  # the client went away: nothing to tell it
        finally:
            store.unsubscribe(queue)

    async def _follow(
        self, request: web.Request, watcher: _Watcher, queue: asyncio.Queue[Change | None], deadline: float
    ) -> bool:
        """A watch's live part: each change as the store queues it, and bookmarks if asked for, until
        `deadline` (True), or until fault injection drops the connection (False: nothing more to write)."""
        bookmarks = _flag(request, "allowWatchBookmarks")
        next_bookmark = self._next_bookmark(time.monotonic(), deadline)
        while True:
            now = time.monotonic()
            if now >= deadline:
                return True
            if bookmarks and now >= next_bookmark:
                if watcher.position > watcher.last_sent:
                    await self._send(watcher.response, self._bookmark(watcher.resource, watcher.position))
                    watcher.last_sent = watcher.position
                next_bookmark = self._next_bookmark(time.monotonic(), deadline)
                continue
            # Every change queued so far at once, as kube-apiserver hands a watcher its backlog: taken one
            # by one through wait_for (three event-loop turns each, matching or not) a watch fell tens of
            # seconds behind a busy store, and informers kept pods the server had deleted.
            batch: list[Change | None] = []
            if queue.empty():
                wait_s = min(deadline, next_bookmark) - now if bookmarks else deadline - now
                try:
                    batch.append(await asyncio.wait_for(queue.get(), timeout=max(wait_s, 0.001)))
                except TimeoutError:
                    continue
            while not queue.empty():
                batch.append(queue.get_nowait())
            if self.faults.watch_held(request.path, request.query.get("fieldSelector", "")):
                await self.faults.wait_watches_released()  # the injected lag: what came meanwhile follows
                while not queue.empty():
                    batch.append(queue.get_nowait())
            for queued in batch:
                if queued is None:  # fault injection: drop the connection
                    if request.transport is not None:
                        request.transport.close()
                    return False
                if queued.rv > watcher.position:
                    await self._deliver(watcher, queued)

    async def _deliver(self, watcher: _Watcher, change: Change) -> None:
        """`change` to the watch if it matches what it watches; either way the watch has now seen it."""
        watcher.position = change.rv
        event = self._filter(change, watcher.resource, watcher.namespace, watcher.selection)
        if event is not None:
            type_, obj = event
            await self._send(watcher.response, self._event(type_, watcher.resource, obj, watcher.as_table))
            watcher.last_sent = change.rv

    def _watch_timeout(self, asked: str | None) -> float:
        """kube-apiserver's (handlers/get.go): `timeoutSeconds` as asked, however long; without it (or 0)
        between --min-request-timeout and twice it, at random, so watches opened together end apart. Whole
        seconds only: anything else (an empty value too) is a 400 from the query's decoding."""
        if asked is not None and not re.fullmatch(r"[+-]?[0-9]+", asked):
            raise ApiError.bad_request(f'strconv.ParseInt: parsing "{asked}": invalid syntax')
        seconds = int(asked) if asked is not None else 0
        return seconds if seconds > 0 else self.min_request_timeout_s * (1.0 + random.random())

    def _next_bookmark(self, now: float, deadline: float) -> float:
        """When kube-apiserver's watch cache sends the next bookmark: every `bookmark_interval_s` (a
        minute there) and once 2 s before the watch's timeout; never when that moment has passed."""
        due = min(now + self.bookmark_interval_s, deadline - PRE_TIMEOUT_BOOKMARK_S)
        return due if due >= now else math.inf

    async def _open_stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        return response

    async def _send(self, response: web.StreamResponse, event: dict[str, Any]) -> None:
        await response.write(_encoder.encode(event) + b"\n")

    def _event(self, type_: str, resource: Resource, obj: dict[str, Any], as_table: bool) -> dict[str, Any]:
        if as_table:
            return {"type": type_, "object": table(resource, [obj], obj["metadata"]["resourceVersion"], "")}
        return {"type": type_, "object": obj}

    def _bookmark(self, resource: Resource, rv: int, initial_end: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {
            "type": "BOOKMARK",
            "object": {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta},
        }

    @staticmethod
    def _filter(
        change: Change, resource: Resource, namespace: str | None, selection: Selection
    ) -> tuple[str, dict[str, Any]] | None:
        """Translate a store change into what this watch sees, as the watch cache does for selectors."""
        if change.resource != resource.key:
            return None
        if (
            resource.namespaced
            and namespace is not None
            and change.obj["metadata"].get("namespace") != namespace
        ):
            return None
        new_match = change.type != "DELETED" and selection.matches(change.obj)
        old_match = change.old is not None and selection.matches(change.old)
        if change.type == "DELETED":
            return ("DELETED", change.obj) if old_match else None
        if new_match and old_match:
            return ("MODIFIED", change.obj)
        if new_match:
            return ("ADDED", change.obj)
        if old_match:
            return ("DELETED", change.obj)
        return None
