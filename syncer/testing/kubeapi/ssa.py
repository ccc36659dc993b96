"""Server-side apply and managedFields, as kube-apiserver keeps them (structured-merge-diff).

Each manager owns a set of field paths. A write that is not an apply (create, update, patch) gives its
manager the fields it changed (operation Update) and takes them from the others. An apply
(`application/apply-patch+yaml`) owns exactly the fields of its configuration (operation Apply): a field
another manager owns with a different value is a 409 conflict unless `force=true` takes it over; a field
the manager applied before and no longer applies is removed, unless someone else owns it too.

Paths are tuples of steps: a map key (str), ("v", value) for an item of a set list, ("k", keys) for an
item of a map list. Lists are sets or maps by the CRD schema's x-kubernetes-list-type (by the Kubernetes
merge keys for built-in kinds); other lists are atomic (one field).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.patch import MERGE_KEYS, MERGED_PRIMITIVE_LISTS
from syncer.testing.kubeapi.resources import Resource

# The current request's field manager (?fieldManager=, else the User-Agent's product) and ?force=.
field_manager: ContextVar[str] = ContextVar("field_manager", default="kubeapi-emulator")  # in-process writes
force_apply: ContextVar[bool] = ContextVar("force_apply", default=False)

Step = str | tuple[str, str]
Path = tuple[Step, ...]
# Server-set metadata nobody owns.
_UNOWNED_META = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "managedFields", "selfLink",
})  # fmt: skip


class _Shape:
    """What kind of list sits at a place in an object: from the CRD schema, or built-in merge keys."""

    def __init__(self, resource: Resource, schema: dict[str, Any] | None) -> None:
        self.builtin = resource.builtin
        self.schema = schema

    def child(self, schema: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
        if not schema:
            return None
        properties = schema.get("properties") or {}
        if key in properties:
            found: dict[str, Any] = properties[key]
            return found
        extra = schema.get("additionalProperties")
        return extra if isinstance(extra, dict) else None

    def list_type(self, schema: dict[str, Any] | None, key: str) -> tuple[str, tuple[str, ...]]:
        """("set", ()), ("map", (key fields...)) or ("atomic", ())."""
        if self.builtin or key == "finalizers":
            if key in MERGE_KEYS:
                return "map", (MERGE_KEYS[key],)
            if key in MERGED_PRIMITIVE_LISTS:
                return "set", ()
            return "atomic", ()
        kind = (schema or {}).get("x-kubernetes-list-type", "atomic")
        if kind == "map":
            return "map", tuple((schema or {}).get("x-kubernetes-list-map-keys") or ())
        return ("set", ()) if kind == "set" else ("atomic", ())


def _item_key(item: Any, keys: tuple[str, ...]) -> str:
    return json.dumps({k: item.get(k) for k in keys} if isinstance(item, dict) else item, sort_keys=True)


def leaves(obj: dict[str, Any], resource: Resource, subresource: str = "") -> set[Path]:
    """The field paths an object (or an applied configuration) sets."""
    shape = _Shape(resource, resource.schema)
    found: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if resource.status_subresource and (key == "status") != (subresource == "status"):
            continue  # the main resource does not own status, /status owns only status
        if key == "metadata" and isinstance(value, dict):
            for meta_key, meta_value in value.items():
                if meta_key not in _UNOWNED_META:
                    found |= set(_walk(shape, None, ("metadata", meta_key), meta_key, meta_value))
            continue
        found |= set(_walk(shape, shape.child(shape.schema, key), (key,), key, value))
    return found


def _walk(shape: _Shape, schema: dict[str, Any] | None, path: Path, key: str, value: Any) -> Iterator[Path]:
    if isinstance(value, dict) and value:
        for child_key, child in value.items():
            yield from _walk(shape, shape.child(schema, child_key), (*path, child_key), child_key, child)
    elif isinstance(value, list) and value:
        kind, keys = shape.list_type(schema, key)
        items = (schema or {}).get("items") if isinstance((schema or {}).get("items"), dict) else None
        if kind == "set":
            for item in value:
                yield (*path, ("v", json.dumps(item, sort_keys=True)))
        elif kind == "map" and all(isinstance(i, dict) for i in value):
            for item in value:
                step = ("k", _item_key(item, keys))
                for child_key, child in item.items():
                    yield from _walk(
                        shape, shape.child(items, child_key), (*path, step, child_key), child_key, child
                    )
        else:
            yield path
    else:
        yield path


def _value_at(obj: Any, path: Path, resource: Resource) -> tuple[bool, Any]:
    current = obj
    for step in path:
        if isinstance(step, str):
            if not isinstance(current, dict) or step not in current:
                return False, None
            current = current[step]
        elif step[0] == "v":
            wanted = json.loads(step[1])
            if not isinstance(current, list) or wanted not in current:
                return False, None
            current = wanted
        else:
            keys = tuple(json.loads(step[1]))
            matches = [i for i in current or [] if isinstance(i, dict) and _item_key(i, keys) == step[1]]
            if not matches:
                return False, None
            current = matches[0]
    return True, current


def _remove(obj: Any, path: Path) -> None:
    """Remove one path; maps, lists and list items left empty by it go too."""
    if not path:
        return
    step, rest = path[0], path[1:]
    if isinstance(step, str):
        if isinstance(obj, dict) and step in obj:
            if rest:
                _remove(obj[step], rest)
                if obj[step] in ({}, []):
                    obj.pop(step)
            else:
                obj.pop(step)
    elif step[0] == "v":
        if isinstance(obj, list) and json.loads(step[1]) in obj:
            obj.remove(json.loads(step[1]))
    elif isinstance(obj, list):
        keys = tuple(json.loads(step[1]))
        for index, item in enumerate(obj):
            if isinstance(item, dict) and _item_key(item, keys) == step[1]:
                if rest:
                    _remove(item, rest)
                if not rest or set(item) <= set(keys):
                    del obj[index]
                break


def _merge(live: Any, applied: Any, shape: _Shape, schema: dict[str, Any] | None, key: str) -> Any:
    if isinstance(applied, dict) and isinstance(live, dict):
        result = dict(live)
        for child_key, child in applied.items():
            result[child_key] = _merge(
                live.get(child_key), child, shape, shape.child(schema, child_key), child_key
            )
        return result
    if isinstance(applied, list) and isinstance(live, list):
        kind, keys = shape.list_type(schema, key)
        if kind == "set":
            return [*live, *(i for i in applied if i not in live)]
        if kind == "map":
            items = (schema or {}).get("items") if isinstance((schema or {}).get("items"), dict) else None
            merged = list(live)
            for item in applied:
                at = [n for n, i in enumerate(merged) if _item_key(i, keys) == _item_key(item, keys)]
                if at:
                    merged[at[0]] = _merge(merged[at[0]], item, shape, items, "")
                else:
                    merged.append(item)
            return merged
    return copy.deepcopy(applied)


def _fields_v1(paths: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths, key=lambda p: json.dumps(p)):
        node = tree
        for step in path:
            name = f"f:{step}" if isinstance(step, str) else f"{step[0]}:{step[1]}"
            node = node.setdefault(name, {})
    return tree


def _paths(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for name, child in tree.items():
        if name == ".":
            continue
        kind, _, rest = name.partition(":")
        step: Step = rest if kind == "f" else (kind, rest)
        found |= _paths(child, (*prefix, step)) if child else {(*prefix, step)}
    return found


def _entry(
    manager: str, operation: str, resource: Resource, paths: set[Path], now: str, sub: str
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager, "operation": operation, "apiVersion": resource.api_version, "time": now,
        "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(paths),
    }  # fmt: skip
    if sub:
        entry["subresource"] = sub
    return entry


def _owned(obj: dict[str, Any] | None) -> list[tuple[dict[str, Any], set[Path]]]:
    entries = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    return [(e, _paths(e.get("fieldsV1") or {})) for e in entries if isinstance(e, dict)]


def _same_manager(entry: dict[str, Any], manager: str, operation: str, sub: str) -> bool:
    return (entry.get("manager"), entry.get("operation"), entry.get("subresource", "")) == (
        manager,
        operation,
        sub,
    )


def _order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Apply entries first, then Update entries (as the real server lists them)."""
    return [e for e in entries if e["operation"] == "Apply"] + [
        e for e in entries if e["operation"] != "Apply"
    ]


def record_update(
    resource: Resource, old: dict[str, Any] | None, new: dict[str, Any], manager: str, sub: str, now: str
) -> list[dict[str, Any]]:
    """managedFields after a write that is not an apply: `manager` takes the fields that changed."""
    before = leaves(old, resource, sub) if old else set()
    after = leaves(new, resource, sub)
    changed = {
        p for p in after if p not in before or _value_at(old, p, resource) != _value_at(new, p, resource)
    }
    gone = before - after
    entries: list[dict[str, Any]] = []
    mine: set[Path] = set(changed)
    for entry, paths in _owned(old):
        if _same_manager(entry, manager, "Update", sub):
            mine |= paths - gone
            continue
        kept = {
            p
            for p in paths - gone - changed
            if not any(c[: len(p)] == p or p[: len(c)] == c for c in changed)
        }
        if kept or entry["operation"] == "Apply":
            entries.append({**entry, "fieldsV1": _fields_v1(kept)})
    if mine:
        entries.append(_entry(manager, "Update", resource, mine, now, sub))
    return _order(entries)


def apply(
    resource: Resource,
    live: dict[str, Any] | None,
    config: Any,
    manager: str,
    *,
    force: bool,
    sub: str,
    now: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The object after applying `config` as `manager`, and its managedFields; 409 on conflicts."""
    if not manager:
        message = "Required value: is required for apply patch"
        raise ApiError(
            422, "Invalid", f'PatchOptions.meta.k8s.io "" is invalid: fieldManager: {message}',
            {"group": "meta.k8s.io", "kind": "PatchOptions",
             "causes": [{"reason": "FieldValueRequired", "message": message, "field": "fieldManager"}]},
        )  # fmt: skip
    if not isinstance(config, dict) or not config.get("apiVersion") or not config.get("kind"):
        kind = config.get("kind", "") if isinstance(config, dict) else ""
        raise ApiError.bad_request(f"invalid object type: /, Kind={kind}")
    if config["apiVersion"] != resource.api_version or config["kind"] != resource.kind:
        raise ApiError.bad_request(
            f"the API version in the data ({config['apiVersion']}) does not match the expected API version "
            f"({resource.api_version})"
        )
    applied = leaves(config, resource, sub)
    conflicts: list[tuple[str, Path]] = []
    others: list[tuple[dict[str, Any], set[Path]]] = []
    previous: set[Path] = set()
    for entry, paths in _owned(live):
        if _same_manager(entry, manager, "Apply", sub):
            previous = paths
            continue
        for path in sorted(applied & paths, key=lambda p: json.dumps(p)):
            if _value_at(live, path, resource) != _value_at(config, path, resource):
                who = f'"{entry["manager"]}"'
                if entry.get("operation") != "Apply":
                    who += f" using {entry.get('apiVersion', resource.api_version)}"
                conflicts.append((who, path))
        others.append((entry, paths))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    taken = {path for _, path in conflicts}
    owned_by_others: set[Path] = set()
    entries: list[dict[str, Any]] = []
    for entry, paths in others:
        kept = paths - taken
        owned_by_others |= kept
        if kept or entry.get("operation") == "Apply":
            entries.append({**entry, "fieldsV1": _fields_v1(kept)})
    body = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
    if resource.status_subresource:
        body = {k: v for k, v in body.items() if (k == "status") == (sub == "status") or k == "metadata"}
    body["metadata"] = {k: v for k, v in (body.get("metadata") or {}).items() if k not in _UNOWNED_META}
    shape = _Shape(resource, resource.schema)
    result = _merge(copy.deepcopy(live or {}), body, shape, resource.schema, "")
    for path in sorted(previous - applied - owned_by_others, key=lambda p: -len(p)):
        _remove(result, path)
    entries.insert(0, _entry(manager, "Apply", resource, applied, now, sub))
    return result, _order(entries)


def _conflict_error(conflicts: list[tuple[str, Path]]) -> ApiError:
    shown = [(who, _show(path)) for who, path in conflicts]
    if len(shown) == 1:
        text = f"conflict with {shown[0][0]}: {shown[0][1]}"
    else:
        managers = list(dict.fromkeys(who for who, _ in shown))
        if len(managers) == 1:
            text = f"conflicts with {managers[0]}:\n" + "".join(f"- {p}\n" for _, p in shown)
        else:
            text = "conflicts with" + "".join(
                f"\n{m}:\n" + "".join(f"- {p}\n" for w, p in shown if w == m) for m in managers
            )
    plural = "s" if len(shown) > 1 else ""
    return ApiError(
        409, "Conflict", f"Apply failed with {len(shown)} conflict{plural}: {text}",
        {"causes": [{"reason": "FieldManagerConflict", "message": f"conflict with {who}", "field": path}
                    for who, path in shown]},
    )  # fmt: skip


def _show(path: Path) -> str:
    """A path as structured-merge-diff prints it: .spec.size, .spec.tags[="a"], .list[name="x"]."""
    text = ""
    for step in path:
        if isinstance(step, str):
            text += f".{step}"
        elif step[0] == "v":
            text += f"[={step[1]}]"
        else:
            keys = json.loads(step[1])
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
    return text


def manager_of(query_manager: str | None, user_agent: str) -> str:
    """The field manager of a request: ?fieldManager=, else the User-Agent up to its first '/'."""
    if query_manager is not None:
        return query_manager
    return user_agent.split("/", 1)[0].strip() or "unknown"
