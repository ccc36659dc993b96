"""What the API server does with a request, apart from HTTP: the semantics the emulator promises."""

from __future__ import annotations

import base64
import copy
import json
import re
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from syncer.testing.kubeapi import binding, jobs, podspec, ssa
from syncer.testing.kubeapi import patch as patching
from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.resources import Registry, Resource, from_crd
from syncer.testing.kubeapi.schema import validate_custom_resource
from syncer.testing.kubeapi.selectors import (
    FieldMatcher,
    Requirement,
    labels_match,
    parse_field_selector,
    parse_label_selector,
    selector_from_label_selector_object,
)
from syncer.testing.kubeapi.store import Change, Store

MAX_ANNOTATIONS_BYTES = 256 * 1024  # TotalAnnotationSizeLimitB in apimachinery
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
}

# status subresources whose strategy keeps metadata changes (pkg/registry/core/{pod,node}/strategy.go);
# a CRD's /status, like most others, ignores everything but status
METADATA_THROUGH_STATUS = frozenset({("", "pods"), ("", "nodes")})


def rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def parse_rfc3339(text: str) -> float:
    import calendar

    return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))


@dataclass(frozen=True)
class Selection:
    labels: tuple[Requirement, ...] = ()
    fields: FieldMatcher | None = None

    def matches(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        if self.labels and not labels_match(self.labels, obj["metadata"].get("labels")):
            return False
        return self.fields is None or self.fields(obj)


@dataclass(frozen=True)
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""
    remaining: int | None = None


class Api:
    def __init__(self, store: Store | None = None, clock: Callable[[], float] = time.time) -> None:
        self.store = store or Store()
        self.registry = Registry()
        self.clock = clock
        self.denied_access: set[tuple[str, str, str]] = set()  # (verb, group, resource) SSAR says no to
        # uid of a deleted Job -> its propagation policy, for the emulator's Job controller (jobs.py)
        self.dependents_policy: dict[str, str] = {}
        self.store.listeners.append(self._on_change)

    # -- lookup -----------------------------------------------------------------------------------
    def resource(self, group: str, version: str, plural: str) -> Resource:
        found = self.registry.get(group, version, plural)
        if found is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return found

    def selection(self, resource: Resource, label_selector: str = "", field_selector: str = "") -> Selection:
        labels = parse_label_selector(label_selector) if label_selector else ()
        fields = parse_field_selector(field_selector, resource.field_selectors) if field_selector else None
        return Selection(labels, fields)

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(resource.key, namespace if resource.namespaced else "", name)
        if obj is None:
            raise ApiError.not_found(resource.plural, name, resource.group)
        return obj

    def list_objects(
        self,
        resource: Resource,
        namespace: str | None,
        selection: Selection,
        *,
        limit: int = 0,
        continue_token: str = "",
        resource_version: str = "",
        resource_version_match: str = "",
    ) -> ListResult:
        start_after = ""
        at_rv = self.store.rv
        if continue_token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                at_rv, start_after = int(decoded["rv"]), str(decoded["start"])
            except (ValueError, KeyError, TypeError):
                raise ApiError.bad_request(
                    "continue key is not valid: incorrect encoded start resourceVersion"
                ) from None
        elif resource_version and resource_version != "0":
            try:
                wanted = int(resource_version)
            except ValueError:
                raise ApiError.bad_request(f"invalid resource version: {resource_version}") from None
            if wanted > self.store.rv:
                raise ApiError(
                    504, "Timeout", f"Timeout: Too large resource version: {wanted}, current: {self.store.rv}"
                )
            if resource_version_match == "Exact":
                at_rv = wanted
        try:
            objects = self._state_at(resource, at_rv, continue_token != "")
        except ApiError as gone:
            if gone.code == 410 and not continue_token:
                raise ApiError.gone("The resourceVersion for the provided list is too old.") from None
            if continue_token and gone.code == 410:
                # an inconsistent continuation from now on, as kube-apiserver offers in its 410
                gone.list_meta = {"continue": _continue_token(self.store.rv, start_after)}
            raise
        scope = namespace if resource.namespaced else None
        items = [
            obj
            for obj in objects
            if (scope is None or obj["metadata"].get("namespace") == scope)
            and selection.matches(obj)
            and _sort_key(obj) > start_after
        ]
        if limit and len(items) > limit:
            page = items[:limit]
            token = _continue_token(at_rv, _sort_key(page[-1]))
            return ListResult(page, str(at_rv), token, len(items) - limit)
        return ListResult(items, str(at_rv))

    def _state_at(self, resource: Resource, rv: int, for_continue: bool) -> list[dict[str, Any]]:
        """The kind's objects as they were at `rv`, rebuilt from history (410 once compacted)."""
        if rv >= self.store.rv:
            return self.store.objects_of(resource.key)
        try:
            later = self.store.changes_after(rv)
        except ApiError:
            if for_continue:
                raise ApiError.gone(
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter, or use the continue token "
                    "in this response to retrieve the remainder of the results. Continuing with the "
                    "provided token results in an inconsistent list - objects that were created, "
                    "modified, or deleted between the time the first chunk was returned and now may show "
                    "up in the list."
                ) from None
            raise
        state = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for o in self.store.objects_of(resource.key)
        }
        for change in reversed(later):
            if change.resource != resource.key:
                continue
            meta = change.obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if change.type == "ADDED":
                state.pop(key, None)
            elif change.old is not None:
                state[key] = change.old
        return [state[k] for k in sorted(state)]

    # -- writes -----------------------------------------------------------------------------------
    def create(
        self,
        resource: Resource,
        namespace: str,
        body: Any,
        dry_run: bool = False,
        managed: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name") or ""
        if not name:
            raise ApiError.invalid(
                resource.kind, "", [("metadata.name", "Required value: name or generateName is required")]
            )
        if resource.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            if self.store.get(("", "namespaces"), "", namespace) is None:
                raise ApiError.not_found("namespaces", namespace)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if self.store.get(resource.key, meta.get("namespace", ""), name) is not None:
            raise ApiError.already_exists(resource.plural, name, resource.group)
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock())
        meta["generation"] = 1
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        meta.pop("managedFields", None)
        self._defaults_on_create(resource, obj)
        obj = self._validate(resource, obj)
        if managed is None:
            managed = ssa.record_update(
                resource, None, obj, ssa.field_manager.get(), "", meta["creationTimestamp"]
            )
        if managed:
            obj["metadata"]["managedFields"] = managed
        if dry_run:
            return obj
        return self.store.write(resource.key, obj, "ADDED").obj

    def apply(
        self, resource: Resource, namespace: str, name: str, config: Any, subresource: str, dry_run: bool
    ) -> tuple[dict[str, Any], bool]:
        """Server-side apply (ssa.py): the object, and whether it was created."""
        live = self.store.get(resource.key, namespace if resource.namespaced else "", name)
        if live is None and subresource:
            raise ApiError.not_found(resource.plural, name, resource.group)
        if isinstance(config, dict) and (config.get("metadata") or {}).get("name", name) != name:
            raise ApiError.bad_request(
                f"the name of the object ({config['metadata'].get('name')}) does not match the URL's ({name})"
            )
        result, managed = ssa.apply(
            resource, live, config, ssa.field_manager.get(),
            force=ssa.force_apply.get(), sub=subresource, now=rfc3339(self.clock()),
        )  # fmt: skip
        if live is None:
            result.setdefault("metadata", {})["name"] = name
            return self.create(resource, namespace, result, dry_run, managed=managed), True
        return self._commit(resource, live, result, subresource, dry_run, managed=managed), False

    def update(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Any,
        subresource: str = "",
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        old = self.get(resource, namespace, name)
        body_meta = body.get("metadata") or {}
        if body_meta.get("name", name) != name:
            raise ApiError.bad_request(
                f"the name of the object ({body_meta.get('name')}) does not match the URL's ({name})"
            )
        return self._commit(resource, old, body, subresource, dry_run)

    def patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        raw: bytes,
        content_type: str,
        subresource: str = "",
        dry_run: bool = False,
    ) -> dict[str, Any]:
        kind = _PATCH_TYPES.get(content_type.split(";")[0].strip())
        if kind is None or (kind == "strategic" and not resource.builtin):
            raise ApiError.unsupported_media_type(accepted_patches(resource))
        try:
            patch_doc = json.loads(raw or b"null")
        except ValueError as exc:
            raise ApiError.bad_request(f"error decoding patch: {exc}") from None
        old = self.get(resource, namespace, name)
        if kind == "json":
            new = patching.json_patch(old, patch_doc)
        elif not isinstance(patch_doc, dict):
            raise ApiError.bad_request("a merge patch must be a JSON object")
        elif kind == "strategic":
            new = patching.strategic_merge_patch(old, patch_doc)
        else:
            new = patching.merge_patch(old, patch_doc)
        if not isinstance(new, dict):
            raise ApiError(422, "Invalid", "the patch result is not an object")
        _uid_unchanged(resource, old, new, subresource)
        # A resourceVersion in the patch is a precondition; otherwise PATCH is unconditional.
        new_meta = dict(new.get("metadata") or {})
        patched_rv = _patched_resource_version(patch_doc, kind)
        if patched_rv is None:
            new_meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        new["metadata"] = new_meta
        return self._commit(resource, old, new, subresource, dry_run)

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        options = options or {}
        obj = self.get(resource, namespace, name)
        meta = obj["metadata"]
        pre = options.get("preconditions") or {}
        for field, what, then in (
            ("uid", "UID", "deleted and then recreated"),
            ("resourceVersion", "ResourceVersion", "modified"),
        ):
            if pre.get(field) and pre[field] != meta.get(field):
                # rest.BeforeDelete: a conflict on the Kind (not the resource), worded as it words it
                kind = f"{resource.kind}.{resource.group}" if resource.group else resource.kind
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {kind} "{name}": the {what} in the precondition '
                    f"({pre[field]}) does not match the {what} in record ({meta.get(field, '')}). "
                    f"The object might have been {then}",
                    {
                        "name": name,
                        **({"group": resource.group} if resource.group else {}),
                        "kind": resource.kind,
                    },
                )
        grace = options.get("gracePeriodSeconds")
        graceful = resource.key == ("", "pods") and (obj.get("spec") or {}).get("nodeName") and grace != 0
        if grace is None and resource.key == ("", "pods"):
            grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        if dry_run:
            return obj
        if resource.key == jobs.JOBS:
            policy = jobs.propagation(options)
            if policy == "Foreground" and jobs.FOREGROUND not in (meta.get("finalizers") or []):
                meta = {**meta, "finalizers": [*(meta.get("finalizers") or []), jobs.FOREGROUND]}
                obj = {**obj, "metadata": meta}
            self.dependents_policy[meta.get("uid", "")] = policy
        if meta.get("finalizers") or graceful:
            if meta.get("deletionTimestamp"):
                return obj
            new = {**obj, "metadata": {**meta, "deletionTimestamp": rfc3339(self.clock())}}
            if resource.key == ("", "pods"):
                new["metadata"]["deletionGracePeriodSeconds"] = grace
            return self.store.write(resource.key, new, "MODIFIED").obj
        return self.store.remove(resource.key, meta.get("namespace", ""), name).obj

    def delete_collection(
        self, resource: Resource, namespace: str | None, selection: Selection
    ) -> list[dict[str, Any]]:
        listed = self.list_objects(resource, namespace, selection).items
        return [
            self.delete(resource, o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in listed
        ]

    def _commit(
        self,
        resource: Resource,
        old: dict[str, Any],
        body: dict[str, Any],
        subresource: str,
        dry_run: bool,
        managed: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        old_meta = old["metadata"]
        meta = dict(body.get("metadata") or {})
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and wanted_rv != old_meta["resourceVersion"]:
            raise ApiError.conflict(resource.plural, old_meta["name"], resource.group)
        if subresource == "status":
            new = dict(old)
            if "status" in body:
                new["status"] = body["status"]
            meta = dict(old_meta)
            if (resource.group, resource.plural) in METADATA_THROUGH_STATUS:
                # kube-apiserver's pod and Node status strategies reset only spec (and a pod's
                # ownerReferences and deletionTimestamp): labels and annotations go through
                for field in ("labels", "annotations"):
                    if field in (body.get("metadata") or {}):
                        meta[field] = body["metadata"][field]
                    else:
                        meta.pop(field, None)
        else:
            new = (
                {k: v for k, v in body.items() if k != "status"}
                if resource.status_subresource
                else dict(body)
            )
            if resource.status_subresource and "status" in old:
                new["status"] = old["status"]
            for field in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "name",
            ):
                if field in old_meta:
                    meta[field] = old_meta[field]
                else:
                    meta.pop(field, None)
            if _spec_part(new) != _spec_part(old):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
        meta["resourceVersion"] = old_meta["resourceVersion"]
        meta.pop("managedFields", None)  # the server keeps them, not the client
        if "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
        new["metadata"] = meta
        new["apiVersion"], new["kind"] = resource.api_version, resource.kind
        new = self._validate(resource, new)
        if new == old and managed is None:
            return old  # a no-op write does not move the resourceVersion
        if managed is None:
            now = rfc3339(self.clock())
            managed = ssa.record_update(resource, old, new, ssa.field_manager.get(), subresource, now)
        new["metadata"] = {k: v for k, v in new["metadata"].items() if k != "managedFields"}
        if managed:
            new["metadata"]["managedFields"] = managed
        if _without_times(new) == _without_times(old):
            return old  # an apply that changes nothing (times aside) does not move the resourceVersion
        if dry_run:
            return new
        kubelet_owned = resource.key == ("", "pods") and (new.get("spec") or {}).get("nodeName")
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not kubelet_owned:
            return self.store.remove(resource.key, meta.get("namespace", ""), meta["name"]).obj
        return self.store.write(resource.key, new, "MODIFIED").obj

    # -- subresources -----------------------------------------------------------------------------
    def get_scale(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        if resource.scale is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        obj = self.get(resource, namespace, name)
        meta = obj["metadata"]
        status: dict[str, Any] = {
            "replicas": _jsonpath(obj, resource.scale.get("statusReplicasPath", "")) or 0
        }
        selector = _jsonpath(obj, resource.scale.get("labelSelectorPath", ""))
        if selector:
            status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": _jsonpath(obj, resource.scale["specReplicasPath"]) or 0},
            "status": status,
        }

    def set_scale(self, resource: Resource, namespace: str, name: str, scale: Any) -> dict[str, Any]:
        if resource.scale is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not isinstance(scale, dict) or not isinstance((scale.get("spec") or {}).get("replicas"), int):
            raise ApiError.invalid("Scale", name, [("spec.replicas", "Required value: an integer")])
        old = self.get(resource, namespace, name)
        wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise ApiError.conflict(resource.plural, name, resource.group)
        new = copy.deepcopy(old)
        _set_jsonpath(new, resource.scale["specReplicasPath"], scale["spec"]["replicas"])
        self._commit(resource, old, new, "", False)
        return self.get_scale(resource, namespace, name)

    def patch_scale(
        self, resource: Resource, namespace: str, name: str, raw: bytes, content_type: str
    ) -> dict[str, Any]:
        current = self.get_scale(resource, namespace, name)
        kind = _PATCH_TYPES.get(content_type.split(";")[0].strip())
        doc = json.loads(raw or b"null")
        if kind == "json":
            scale = patching.json_patch(current, doc)
        elif kind in ("merge", "strategic"):
            scale = patching.merge_patch(current, doc)
        else:
            raise ApiError.unsupported_media_type(accepted_patches(resource))
        return self.set_scale(resource, namespace, name, scale)

    def evict(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        pods = self.resource("", "v1", "pods")
        pod = self.get(pods, namespace, name)
        for pdb in self.store.objects_of(("policy", "poddisruptionbudgets"), namespace):
            spec = pdb.get("spec") or {}
            if not pod_ready(pod) and spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
                continue  # kube-apiserver: a not-ready pod is evicted whatever the budget says
            requirements = selector_from_label_selector_object(spec.get("selector") or {})
            if not requirements or not labels_match(requirements, pod["metadata"].get("labels")):
                continue
            covered = [
                p
                for p in self.store.objects_of(pods.key, namespace)
                if labels_match(requirements, p["metadata"].get("labels"))
            ]
            healthy = sum(1 for p in covered if pod_ready(p) and not p["metadata"].get("deletionTimestamp"))
            desired = _desired_healthy(spec, len(covered))
            after = healthy - (1 if pod_ready(pod) else 0)
            if after < desired or (not pod_ready(pod) and healthy < desired):
                error = ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget {pdb['metadata']['name']} needs {desired} "
                                f"healthy pods and has {healthy} currently",
                            }
                        ]
                    },
                )
                raise error
        options = (body or {}).get("deleteOptions") if isinstance(body, dict) else None
        self.delete(pods, namespace, name, options)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def bind(self, namespace: str, name: str | None, body: Any, dry_run: bool = False) -> dict[str, Any]:
        """`pods/NAME/binding` (`name` None: the legacy `bindings` collection): binding.py."""
        return binding.bind(self.store, rfc3339(self.clock()), namespace, name, body, dry_run)

    def access_review(self, body: Any) -> dict[str, Any]:
        attrs = ((body or {}).get("spec") or {}).get("resourceAttributes") or {}
        key = (attrs.get("verb", ""), attrs.get("group", ""), attrs.get("resource", ""))
        allowed = key not in self.denied_access
        review = copy.deepcopy(body) if isinstance(body, dict) else {}
        review.update({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"})
        review.setdefault("metadata", {})["creationTimestamp"] = None
        review["status"] = (
            {"allowed": allowed} if allowed else {"allowed": False, "reason": "denied by the emulator"}
        )
        return review

    # -- server-side behaviour --------------------------------------------------------------------
    def _defaults_on_create(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource.key == ("", "pods"):
            spec = obj.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("schedulerName", "default-scheduler")
            podspec.default_requests(spec)
            obj["status"] = {"phase": "Pending", "qosClass": podspec.qos_class(spec)}
        elif resource.key == jobs.JOBS:
            jobs.default_job(obj)
        elif resource.key == ("", "namespaces"):
            obj["status"] = {"phase": "Active"}
        elif resource.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            now = rfc3339(self.clock())
            obj["status"] = {
                "acceptedNames": (obj.get("spec") or {}).get("names") or {},
                "storedVersions": [
                    v["name"] for v in (obj.get("spec") or {}).get("versions") or [] if v.get("storage")
                ],
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": now, "reason": r, "message": m}
                    for t, r, m in (
                        ("NamesAccepted", "NoConflicts", "no conflicts found"),
                        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                    )
                ],
            }
        elif resource.status_subresource and not resource.builtin:
            obj.pop("status", None)  # status of a custom resource is only written through /status

    def _validate(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        name = meta.get("name", "")
        causes: list[tuple[str, str]] = []
        if resource.key != ("", "events") and (len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
            causes.append(
                (
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                    "lower case alphanumeric characters, '-' or '.'",
                )
            )
        for key, value in (meta.get("labels") or {}).items():
            if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
                causes.append(
                    (
                        f"metadata.labels[{key}]",
                        f'Invalid value: "{value}": a valid label must be an empty string or consist of '
                        "alphanumeric characters, '-', '_' or '.', at most 63 characters",
                    )
                )
            if not _valid_qualified_name(key):
                causes.append(
                    ("metadata.labels", f'Invalid value: "{key}": name part must be a valid qualified name')
                )
        annotations = meta.get("annotations") or {}
        for key, value in annotations.items():
            if not isinstance(value, str):
                raise ApiError.bad_request(f"metadata.annotations[{key}]: must be a string")
        size = sum(len(k) + len(v.encode()) for k, v in annotations.items())
        if size > MAX_ANNOTATIONS_BYTES:
            causes.append(
                ("metadata.annotations", f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes")
            )
        if not resource.builtin and resource.schema:
            obj, schema_causes, unknown = validate_custom_resource(obj, resource.schema)
            if unknown:  # strict decoding fails before any validation, as in kube-apiserver
                version = resource.api_version.rsplit("/", 1)[-1]
                listed = ", ".join(f'unknown field "{field}"' for field in unknown)
                raise ApiError.bad_request(
                    f'{resource.kind} in version "{version}" cannot be handled as a {resource.kind}: '
                    f"strict decoding error: {listed}"
                )
            causes.extend(sorted(schema_causes))
            causes.extend(_scale_causes(resource, obj))
        if resource.key == jobs.JOBS:
            causes.extend(jobs.job_causes(obj))
        if causes:
            raise ApiError.invalid(resource.kind, name, causes, group=resource.group)
        return obj

    def _on_change(self, change: Change) -> None:
        if change.resource == ("apiextensions.k8s.io", "customresourcedefinitions"):
            spec = change.obj.get("spec") or {}
            group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
            self.registry.remove_group_plural(group, plural)
            if change.type == "DELETED":
                for obj in list(self.store.objects_of((group, plural))):
                    self.store.remove(
                        (group, plural), obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
                    )
            else:
                for resource in from_crd(change.obj):
                    self.registry.add(resource)
        elif change.resource == ("", "namespaces") and change.type == "DELETED":
            namespace = change.obj["metadata"]["name"]
            for key in list(self.store.objects):
                for obj in list(self.store.objects_of(key, namespace)):
                    self.store.remove(key, namespace, obj["metadata"]["name"])


def _uid_unchanged(
    resource: Resource, old: Mapping[str, Any], new: Mapping[str, Any], subresource: str
) -> None:
    """A patch that changes metadata.uid is refused as immutable (validation runs it twice, hence two
    causes under one message); a custom resource's /status takes no metadata, so there it is ignored.
    Clients put the uid in a patch as a precondition this way (the kubelet's status patches)."""
    if subresource == "status" and resource.key not in METADATA_THROUGH_STATUS:
        return
    uid = (new.get("metadata") or {}).get("uid")
    if uid is None or uid == old["metadata"].get("uid"):
        return
    why = ("metadata.uid", f'Invalid value: "{uid}": field is immutable')
    error = ApiError.invalid(resource.kind, old["metadata"]["name"], [why], group=resource.group)
    error.details["causes"] = error.details["causes"] * 2
    raise error


def _without_times(obj: Mapping[str, Any]) -> Any:
    meta = dict(obj.get("metadata") or {})
    meta["managedFields"] = [
        {k: v for k, v in entry.items() if k != "time"} for entry in meta.get("managedFields") or []
    ]
    return {**obj, "metadata": meta}


def _continue_token(rv: int, start_after: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": start_after}).encode()).decode()


def accepted_patches(resource: Resource) -> tuple[str, ...]:
    """The patch media types kube-apiserver lists in its 415 for this kind."""
    if resource.builtin:
        return (
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        )
    return ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")


def _scale_causes(resource: Resource, obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The scale subresource's own check of specReplicasPath, after the schema's (as the real server)."""
    path = (resource.scale or {}).get("specReplicasPath", "")
    if not path:
        return []
    value = _jsonpath(obj, path)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [(path, f"Invalid value: {value}: should be a non-negative integer")]
    return []


def pod_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _desired_healthy(spec: Mapping[str, Any], expected: int) -> int:
    def resolve(value: Any, round_up: bool) -> int:
        if isinstance(value, str) and value.endswith("%"):
            fraction = int(value[:-1]) * expected
            return -(-fraction // 100) if round_up else fraction // 100
        return int(value)

    if "minAvailable" in spec:
        return resolve(spec["minAvailable"], round_up=True)
    if "maxUnavailable" in spec:
        return max(0, expected - resolve(spec["maxUnavailable"], round_up=True))
    return 0


def _valid_qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _sort_key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _patched_resource_version(doc: Any, kind: str) -> str | None:
    if kind == "json":
        for op in doc if isinstance(doc, list) else []:
            if (
                isinstance(op, dict)
                and op.get("path") == "/metadata/resourceVersion"
                and op.get("op") != "test"
            ):
                return str(op.get("value"))
        return None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return str(value) if value else None


def _jsonpath(obj: Any, path: str) -> Any:
    """`.spec.replicas`-style paths, as CRD scale subresources and printer columns use them."""
    if not path:
        return None
    value = obj
    for part in path.lstrip(".").split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _set_jsonpath(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.lstrip(".").split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
