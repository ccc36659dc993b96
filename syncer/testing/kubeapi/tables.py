"""Server-side printing (`as=Table`), which kubectl asks for on `get`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from syncer.testing.kubeapi.api import _jsonpath, parse_rfc3339, pod_ready
from syncer.testing.kubeapi.resources import Resource


def _age(obj: Mapping[str, Any]) -> str:
    created = obj["metadata"].get("creationTimestamp")
    if not created:
        return "<unknown>"
    seconds = max(0, int(time.time() - parse_rfc3339(created)))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _node_row(obj: Mapping[str, Any]) -> list[Any]:
    ready = "Unknown"
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    labels = obj["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")) or [
        "<none>"
    ]
    version = ((obj.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    status = obj.get("status") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        obj["metadata"]["name"],
        ready,
        ",".join(roles),
        _age(obj),
        version,
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _pod_row(obj: Mapping[str, Any]) -> list[Any]:
    status = obj.get("status") or {}
    containers = (obj.get("spec") or {}).get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    phase = status.get("reason") or status.get("phase", "Pending")
    for state in reversed([s.get("state") or {} for s in statuses]):  # kubectl: the first container's wins
        phase = (
            (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get("reason")
        ) or phase
    if obj["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    return [
        obj["metadata"]["name"],
        f"{ready}/{len(containers)}",
        phase,
        restarts,
        _age(obj),
        status.get("podIP", "<none>"),
        (obj.get("spec") or {}).get("nodeName", "<none>"),
    ]


def _duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration, to the minute's precision kubectl shows for young objects."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 600:
        return f"{seconds // 60}m{seconds % 60}s" if seconds % 60 else f"{seconds // 60}m"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _job_row(obj: Mapping[str, Any]) -> list[Any]:
    """kubectl's Job columns since 1.30: NAME STATUS COMPLETIONS DURATION AGE (wide: CONTAINERS IMAGES
    SELECTOR), the status and completions worded as pkg/printers/internalversion/printers.go does."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    state = "Running"
    for condition, shown in (
        ("Complete", "Complete"), ("Failed", "Failed"), ("", "Terminating"), ("Suspended", "Suspended"),
        ("FailureTarget", "FailureTarget"), ("SuccessCriteriaMet", "SuccessCriteriaMet"),
    ):  # fmt: skip
        if (condition in true) if condition else obj["metadata"].get("deletionTimestamp"):
            state = shown
            break
    succeeded, parallelism = int(status.get("succeeded", 0)), spec.get("parallelism")
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif parallelism is not None and int(parallelism) > 1:
        completions = f"{succeeded}/1 of {parallelism}"
    else:
        completions = f"{succeeded}/1"
    duration = ""
    if status.get("startTime"):
        end = parse_rfc3339(status["completionTime"]) if status.get("completionTime") else time.time()
        duration = _duration(end - parse_rfc3339(status["startTime"]))
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = ",".join(
        f"{k}={v}" for k, v in ((spec.get("selector") or {}).get("matchLabels") or {}).items()
    )
    return [
        obj["metadata"]["name"], state, completions, duration, _age(obj),
        ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
        selector,
    ]  # fmt: skip


def _columns(resource: Resource) -> list[dict[str, Any]]:
    def col(name: str, type_: str = "string", priority: int = 0, fmt: str = "") -> dict[str, Any]:
        return {"name": name, "type": type_, "format": fmt, "description": "", "priority": priority}

    if resource.key == ("", "nodes"):
        wide = [col(n, priority=1) for n in ("Internal-IP", "External-IP", "OS-Image", "Kernel-Version")]
        return [
            col("Name", fmt="name"),
            col("Status"),
            col("Roles"),
            col("Age"),
            col("Version"),
            *wide,
            col("Container-Runtime", priority=1),
        ]
    if resource.key == ("", "pods"):
        return [
            col("Name", fmt="name"),
            col("Ready"),
            col("Status"),
            col("Restarts", "integer"),
            col("Age"),
            col("IP", priority=1),
            col("Node", priority=1),
        ]
    if resource.key == ("batch", "jobs"):
        wide = [col(n, priority=1) for n in ("Containers", "Images", "Selector")]
        return [
            col("Name", fmt="name"),
            col("Status"),
            col("Completions"),
            col("Duration"),
            col("Age"),
            *wide,
        ]
    extra = [
        col(c["name"], c.get("type", "string"), int(c.get("priority", 0))) for c in resource.printer_columns
    ]
    return [col("Name", fmt="name"), *extra, col("Age")]


def _cells(resource: Resource, obj: Mapping[str, Any]) -> list[Any]:
    if resource.key == ("", "nodes"):
        return _node_row(obj)
    if resource.key == ("", "pods"):
        return _pod_row(obj)
    if resource.key == ("batch", "jobs"):
        return _job_row(obj)
    extra = []
    for column in resource.printer_columns:
        value = _jsonpath(obj, column.get("jsonPath", ""))
        extra.append("<none>" if value is None else value)
    return [obj["metadata"]["name"], *extra, _age(obj)]


def table(
    resource: Resource, objects: list[dict[str, Any]], resource_version: str, include_object: str
) -> dict[str, Any]:
    rows = []
    for obj in objects:
        if include_object == "Object":
            embedded: dict[str, Any] = obj
        elif include_object == "None":
            embedded = {}
        else:
            embedded = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append({"cells": _cells(resource, obj), "object": embedded})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": _columns(resource),
        "rows": rows,
    }


__all__ = ["pod_ready", "table"]
