"""`pods/binding` (and the legacy `bindings` collection) as kube-apiserver answers it: a scheduler's
`v1.Binding` sets the pod's `spec.nodeName` and `PodScheduled=True`, once, and nothing else checks the Node.

Facts from kube-apiserver (pkg/registry/core/pod/storage/storage.go, `BindingREST.Create` and
`setPodNodeAndMetadata`): the URL's name must be the Binding's; the target must name a Node (`kind`
empty or `Node`, `name` set; an invalid target is a plain error, so HTTP 500); `metadata.uid` and
`metadata.resourceVersion` of the Binding are preconditions on the pod (409 from storage); a pod being
deleted, already on a Node or with scheduling gates is refused with a 409 on `pods/binding`; the Node is
not looked up. On success the Binding's annotations are merged into the pod's, `PodScheduled` becomes
True as `UpdatePodCondition` writes it (reason and message dropped, the transition time kept only when
the status was True already), and the answer is `201` with a `Status` `Success`. The write goes to
storage directly: no strategy, so `metadata.generation` and managedFields stay.
"""

from __future__ import annotations

import copy
from typing import Any

from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.store import Store

PODS = ("", "pods")
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _conflict(resource: str, name: str, why: str) -> ApiError:
    """apierrors.NewConflict: `Operation cannot be fulfilled on <resource> "<name>": <why>`."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource} "{name}": {why}',
        {"name": name, "kind": resource},
    )


def _precondition_failed(namespace: str, name: str, what: str, wanted: str, have: str) -> ApiError:
    """A storage precondition that failed, as etcd3's store words it, turned into a 409 on pods."""
    why = (
        f"StorageError: invalid object, Code: 4, Key: /registry/pods/{namespace}/{name}, ResourceVersion: 0, "
        f"AdditionalErrorMsg: Precondition failed: {what} in precondition: {wanted}, "
        f"{what} in object meta: {have}"
    )
    return _conflict("pods", name, why)


def _target_errors(target: Any) -> list[str]:
    """validation.ValidatePodBinding, as field errors."""
    target = target if isinstance(target, dict) else {}
    errors = []
    kind = str(target.get("kind") or "")
    if kind and kind != "Node":
        errors.append(f'target.kind: Unsupported value: "{kind}": supported values: "Node", "<empty>"')
    if not target.get("name"):
        errors.append("target.name: Required value")
    return errors


def bind(
    store: Store, now: str, namespace: str, name: str | None, body: Any, dry_run: bool = False
) -> dict[str, Any]:
    """POST a Binding for pod `name` (None: the legacy collection, the Binding names the pod)."""
    if not isinstance(body, dict):
        raise ApiError.bad_request("the body of the request must be a Binding object")
    meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise ApiError.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    bound_name = str(meta.get("name") or "")
    if name is None:
        name = bound_name
        if not name:
            raise ApiError.bad_request("Name parameter required.")
    if name != bound_name:
        raise ApiError.bad_request("name in URL does not match name in Binding object")
    errors = _target_errors(body.get("target"))
    if errors:  # an aggregate of field errors, not an API status: kube-apiserver answers 500
        message = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        raise ApiError(500, "", message)
    pod = store.get(PODS, namespace, name)
    if pod is None:
        raise ApiError.not_found("pods", name)
    pod_meta = pod["metadata"]
    for field, what in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = str(meta.get(field) or "")
        if wanted and wanted != pod_meta.get(field, ""):
            raise _precondition_failed(namespace, name, what, wanted, str(pod_meta.get(field, "")))
    spec = pod.get("spec") or {}
    if pod_meta.get("deletionTimestamp"):
        raise _conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
    if spec.get("nodeName"):
        raise _conflict("pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
    if spec.get("schedulingGates"):
        raise _conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
    if dry_run:
        return dict(SUCCESS)
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = body["target"]["name"]
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and annotations:
        bound["metadata"]["annotations"] = {**(pod_meta.get("annotations") or {}), **annotations}
    status = bound.setdefault("status", {})
    status["conditions"] = scheduled_true(status.get("conditions") or [], now)
    store.write(PODS, bound, "MODIFIED")
    return dict(SUCCESS)


def scheduled_true(conditions: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """podutil.UpdatePodCondition with `PodScheduled=True`: replaced in place (or appended); the old
    transition time stays only if it was True already; reason and message are not carried over."""
    wanted: dict[str, Any] = {"type": "PodScheduled", "status": "True", "lastProbeTime": None}
    for index, old in enumerate(conditions):
        if old.get("type") == "PodScheduled":
            same = old.get("status") == "True" and old.get("lastTransitionTime")
            wanted["lastTransitionTime"] = old["lastTransitionTime"] if same else now
            return [*conditions[:index], wanted, *conditions[index + 1 :]]
    wanted["lastTransitionTime"] = now
    return [*conditions, wanted]
