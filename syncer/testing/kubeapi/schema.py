"""Structural-schema checks for custom resources: types, required, enums, bounds, defaults, pruning.

A subset of what kube-apiserver enforces (docs/emulator.md lists what is left out)."""

from __future__ import annotations

import copy
import re
from contextvars import ContextVar
from typing import Any

# `fieldValidation=Strict` on the current request: unknown fields are errors instead of pruned.
strict_fields: ContextVar[bool] = ContextVar("strict_fields", default=False)
UNKNOWN = "field not declared in schema"  # the marker of an unknown field among the errors

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def apply_schema(value: Any, schema: dict[str, Any], path: str, errors: list[tuple[str, str]]) -> Any:
    """Returns `value` with defaults applied and unknown fields pruned; appends (field, message) errors."""
    if value is None:
        if schema.get("nullable"):
            return None
        errors.append((path, "Invalid value: null"))
        return None
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errors.append((path, f'Invalid value: "{value}": must be an integer or a string'))
        return value
    expected = schema.get("type")
    if expected:
        allowed = _TYPES.get(expected, (object,))
        bad_bool = expected in ("integer", "number") and isinstance(value, bool)
        if not isinstance(value, allowed) or bad_bool:
            errors.append(
                (path, f'Invalid value: "{type(value).__name__}": {path} in body must be of type {expected}')
            )
            return value
    if "enum" in schema and value not in schema["enum"]:
        options = ", ".join(f'"{v}"' for v in schema["enum"])
        errors.append((path, f'Unsupported value: "{value}": supported values: {options}'))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(
                (
                    path,
                    f"Invalid value: {value}: {path} in body should be greater than or equal to "
                    f"{schema['minimum']}",
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(
                (
                    path,
                    f"Invalid value: {value}: {path} in body should be less than or equal to "
                    f"{schema['maximum']}",
                )
            )
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append((path, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                (path, f"Invalid value: {value!r}: should be at least {schema['minLength']} chars long")
            )
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            errors.append(
                (path, f"Invalid value: \"{value}\": {path} in body should match '{schema['pattern']}'")
            )
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_schema(item, schema["items"], f"{path}[{i}]", errors) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return _apply_object(value, schema, path, errors)
    return value


def _apply_object(
    value: dict[str, Any], schema: dict[str, Any], path: str, errors: list[tuple[str, str]]
) -> Any:
    properties: dict[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
    result: dict[str, Any] = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if key in properties:
            result[key] = apply_schema(item, properties[key], child, errors)
        elif isinstance(additional, dict):
            result[key] = apply_schema(item, additional, child, errors)
        elif preserve or additional is True:
            result[key] = item
        elif strict_fields.get():
            errors.append((child, UNKNOWN))
        # else: pruned, as kube-apiserver silently drops unknown fields of structural schemas
    for key, prop in properties.items():
        if key not in result and "default" in prop:
            # nested defaults apply inside a defaulted object too, as kube-apiserver does
            result[key] = apply_schema(
                copy.deepcopy(prop["default"]), prop, f"{path}.{key}" if path else key, errors
            )
    for key in schema.get("required") or []:
        if key not in result:
            errors.append((f"{path}.{key}" if path else key, "Required value"))
    return result


def validate_custom_resource(
    obj: dict[str, Any], schema: dict[str, Any] | None
) -> tuple[dict[str, Any], list[tuple[str, str]], list[str]]:
    """Validates everything but metadata, which the server checks itself: (object with defaults and
    pruning, field errors, unknown fields under fieldValidation=Strict)."""
    if not schema:
        return obj, [], []
    errors: list[tuple[str, str]] = []
    body = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
    props = {
        k: v
        for k, v in (schema.get("properties") or {}).items()
        if k not in ("metadata", "apiVersion", "kind")
    }
    checked = _apply_object(body, {**schema, "properties": props}, "", errors)
    unknown = [field for field, message in errors if message == UNKNOWN]
    return (
        {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": obj["metadata"],
            **checked,
        },
        [(field, message) for field, message in errors if message != UNKNOWN],
        unknown,
    )
