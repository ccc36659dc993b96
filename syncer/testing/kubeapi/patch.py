"""The three PATCH flavours of the Kubernetes API: JSON merge patch (RFC 7386), strategic merge
patch (built-in kinds only) and JSON patch (RFC 6902, with `test`)."""

from __future__ import annotations

import copy
from typing import Any

from syncer.testing.kubeapi.errors import ApiError

# List fields that strategic merge patch merges by key (patchMergeKey in the Kubernetes API types);
# every other list is replaced whole.
MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "addresses": "type",
    "taints": "key",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "containerStatuses": "name",
}
# Lists of scalars that strategic merge patch treats as sets (patchStrategy: merge).
MERGED_PRIMITIVE_LISTS: frozenset[str] = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue  # ordering hints: the emulator keeps the existing order
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_keyed_list(result.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGED_PRIMITIVE_LISTS:
            merged = list(result.get(key) or [])
            merged.extend(item for item in value if item not in merged)
            result[key] = merged
        else:
            merged_value = strategic_merge_patch(result.get(key), value)
            if merged_value is None:
                result.pop(key, None)
            else:
                result[key] = merged_value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_keyed_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise ApiError.bad_request(f"strategic merge patch: list item lacks its merge key {merge_key!r}")
        index = next((i for i, old in enumerate(result) if old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
            continue
        if index is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


# kube-apiserver answers every failed JSON patch (a failed `test` included) with this and no details.
REJECTED = "the server rejected our request due to an error in our request"


def _failed(why: str) -> ApiError:
    error = ApiError(422, "Invalid", REJECTED)
    error.add_note(why)  # kept for the emulator's own tracebacks; not in the response, as in Kubernetes
    return error


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _failed(f"JSON patch path {path!r} does not start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts:
        if isinstance(node, dict):
            if part not in node:
                raise _failed(f"JSON patch: path {path!r} does not exist")
            node = node[part]
        elif isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError):
                raise _failed(f"JSON patch: path {path!r} does not exist") from None
        else:
            raise _failed(f"JSON patch: path {path!r} does not exist")
    return node


def _add(doc: Any, parts: list[str], value: Any, path: str, replace: bool) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _failed(f"JSON patch: cannot replace missing key at {path!r}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        else:
            try:
                index = int(last)
            except ValueError:
                raise _failed(f"JSON patch: bad array index at {path!r}") from None
            if replace:
                if not 0 <= index < len(parent):
                    raise _failed(f"JSON patch: index out of range at {path!r}")
                parent[index] = value
            else:
                if not 0 <= index <= len(parent):
                    raise _failed(f"JSON patch: index out of range at {path!r}")
                parent.insert(index, value)
    else:
        raise _failed(f"JSON patch: parent of {path!r} is not a container")
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        raise _failed("JSON patch: cannot remove the whole document")
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _failed(f"JSON patch: cannot remove missing key at {path!r}")
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError):
            raise _failed(f"JSON patch: cannot remove missing index at {path!r}") from None
    raise _failed(f"JSON patch: parent of {path!r} is not a container")


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise ApiError.bad_request("JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise ApiError.bad_request(f"JSON patch operation malformed: {operation!r}")
        op, path = operation["op"], operation["path"]
        parts = _pointer(path)
        if op == "add":
            doc = _add(doc, parts, copy.deepcopy(operation.get("value")), path, replace=False)
        elif op == "replace":
            doc = _add(doc, parts, copy.deepcopy(operation.get("value")), path, replace=True)
        elif op == "remove":
            _remove(doc, parts, path)
        elif op in ("move", "copy"):
            source = _pointer(operation.get("from", ""))
            value = copy.deepcopy(_resolve(doc, source, operation.get("from", "")))
            if op == "move":
                _remove(doc, source, operation.get("from", ""))
            doc = _add(doc, parts, value, path, replace=False)
        elif op == "test":
            if _resolve(doc, parts, path) != operation.get("value"):
                raise _failed(
                    f"JSON patch test operation failed: value at {path!r} is not {operation.get('value')!r}"
                )
        else:
            raise ApiError.bad_request(f"JSON patch: unknown operation {op!r}")
    return doc
