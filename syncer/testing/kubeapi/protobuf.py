"""Kubernetes' protobuf request bodies, for the few kinds kubectl sends that way.

kubectl's typed commands (`kubectl drain`'s eviction, `kubectl create namespace|configmap|secret`,
`kubectl auth can-i`) send
`application/vnd.kubernetes.protobuf`: the 4 bytes `k8s\\0`, then a `runtime.Unknown` message holding the
TypeMeta and the object's own message. This decodes those into the JSON shape the emulator stores; field
numbers are those of k8s.io/api's generated.proto. Anything else is refused as kube-apiserver refuses a
body it cannot read (415), naming the kind.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"
Schema = dict[int, tuple[str, str, "Schema | None"]]  # field number -> (json name, kind, nested schema)

_TIME: Schema = {1: ("seconds", "int", None), 2: ("nanos", "int", None)}
_OWNER: Schema = {
    1: ("kind", "string", None), 3: ("name", "string", None), 4: ("uid", "string", None),
    5: ("apiVersion", "string", None), 6: ("controller", "bool", None),
    7: ("blockOwnerDeletion", "bool", None),
}  # fmt: skip
_META: Schema = {
    1: ("name", "string", None), 2: ("generateName", "string", None), 3: ("namespace", "string", None),
    5: ("uid", "string", None), 6: ("resourceVersion", "string", None), 7: ("generation", "int", None),
    8: ("creationTimestamp", "time", _TIME), 9: ("deletionTimestamp", "time", _TIME),
    10: ("deletionGracePeriodSeconds", "int", None), 11: ("labels", "map", None),
    12: ("annotations", "map", None), 13: ("ownerReferences", "messages", _OWNER),
    14: ("finalizers", "strings", None),
}  # fmt: skip
_PRECONDITIONS: Schema = {1: ("uid", "string", None), 2: ("resourceVersion", "string", None)}
_DELETE_OPTIONS: Schema = {
    1: ("gracePeriodSeconds", "int", None), 2: ("preconditions", "message", _PRECONDITIONS),
    3: ("orphanDependents", "bool", None), 4: ("propagationPolicy", "string", None),
    5: ("dryRun", "strings", None),
}  # fmt: skip
_RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string", None), 2: ("verb", "string", None), 3: ("group", "string", None),
    4: ("version", "string", None), 5: ("resource", "string", None), 6: ("subresource", "string", None),
    7: ("name", "string", None),
}  # fmt: skip
_NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string", None), 2: ("verb", "string", None)}
KINDS: dict[tuple[str, str], Schema] = {
    ("policy/v1", "Eviction"): {
        1: ("metadata", "message", _META), 2: ("deleteOptions", "message", _DELETE_OPTIONS),
    },
    ("v1", "DeleteOptions"): _DELETE_OPTIONS,  # `kubectl drain --disable-eviction`, typed deletes
    ("meta.k8s.io/v1", "DeleteOptions"): _DELETE_OPTIONS,
    ("v1", "Namespace"): {
        1: ("metadata", "message", _META), 2: ("spec", "message", {1: ("finalizers", "strings", None)}),
    },
    ("v1", "ConfigMap"): {
        1: ("metadata", "message", _META), 2: ("data", "map", None), 3: ("binaryData", "bytesmap", None),
        4: ("immutable", "bool", None),
    },
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {  # `kubectl auth can-i`
        1: ("metadata", "message", _META),
        2: ("spec", "message", {
            1: ("resourceAttributes", "message", _RESOURCE_ATTRIBUTES),
            2: ("nonResourceAttributes", "message", _NON_RESOURCE_ATTRIBUTES),
        }),
    },
    ("v1", "Secret"): {
        1: ("metadata", "message", _META), 2: ("data", "bytesmap", None), 3: ("type", "string", None),
        4: ("stringData", "map", None), 5: ("immutable", "bool", None),
    },
}  # fmt: skip
_UNKNOWN: Schema = {
    1: ("typeMeta", "message", {1: ("apiVersion", "string", None), 2: ("kind", "string", None)}),
    2: ("raw", "bytes", None), 3: ("contentEncoding", "string", None), 4: ("contentType", "string", None),
}  # fmt: skip


class ProtobufError(ValueError):
    """The body is not a protobuf object the emulator can read; the message says which and why."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtobufError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs; varints as int, length-delimited as bytes; fixed widths skipped."""
    pos = 0
    out: list[tuple[int, int | bytes]] = []
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("a field runs past the end of the body")
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _message(data: bytes, schema: Schema) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in schema:
            continue  # a field this emulator does not store
        name, kind, nested = schema[number]
        if kind == "int" and isinstance(value, int):
            result[name] = _signed(value)
        elif kind == "bool" and isinstance(value, int):
            result[name] = bool(value)
        elif isinstance(value, int):
            raise ProtobufError(f"field {name} has the wrong wire type")
        elif kind == "string":
            result[name] = value.decode()
        elif kind == "bytes":
            result[name] = value
        elif kind == "strings":
            result.setdefault(name, []).append(value.decode())
        elif kind in ("message", "time") and nested is not None:
            decoded = _message(value, nested)
            result[name] = _rfc3339(decoded) if kind == "time" else decoded
        elif kind == "messages" and nested is not None:
            result.setdefault(name, []).append(_message(value, nested))
        elif kind in ("map", "bytesmap"):
            entry = dict(_fields(value))
            key, item = entry.get(1, b""), entry.get(2, b"")
            if isinstance(key, int) or isinstance(item, int):
                raise ProtobufError(f"map {name} has a malformed entry")
            text = base64.b64encode(item).decode() if kind == "bytesmap" else item.decode()
            result.setdefault(name, {})[key.decode()] = text
    return result


def _rfc3339(time: dict[str, Any]) -> str:
    return datetime.fromtimestamp(int(time.get("seconds", 0)), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of a kind in KINDS; ProtobufError otherwise."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the protobuf envelope k8s\\0")
    try:
        unknown = _message(body[len(MAGIC) :], _UNKNOWN)
        type_meta = unknown.get("typeMeta", {})
        api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
        schema = KINDS.get((api_version, kind))
        if schema is None:
            raise ProtobufError(
                f"protobuf bodies of {api_version or '?'}/{kind or '?'} are not supported by the emulator "
                f"(supported: {', '.join(f'{v}/{k}' for v, k in KINDS)}); send JSON"
            )
        obj = _message(unknown.get("raw", b""), schema)
    except UnicodeDecodeError as exc:
        raise ProtobufError(f"a string field is not UTF-8: {exc}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}
