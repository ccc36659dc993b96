"""Label and field selectors with the syntax and meaning kube-apiserver gives them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from syncer.testing.kubeapi.errors import ApiError

_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the key, as in Kubernetes
        return not present or labels[self.key] not in self.values


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses: `a in (x,y),b` -> ["a in (x,y)", "b"]."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    requirements: list[Requirement] = []
    for part in _split_top_level(text or ""):
        eq = _EQ_RE.match(part)
        if eq:
            key, op, value = eq.groups()
            requirements.append(Requirement(key, "!=" if op == "!=" else "=", frozenset({value})))
            continue
        st = _SET_RE.match(part)
        if st is None:
            raise ApiError.bad_request(f"unable to parse requirement: {part.strip()!r} in labelSelector")
        negate, key, op, values = st.groups()
        if op:
            if negate:
                raise ApiError.bad_request(f"unable to parse requirement: {part.strip()!r} in labelSelector")
            requirements.append(Requirement(key, op, frozenset(v.strip() for v in values.split(","))))
        else:
            requirements.append(Requirement(key, "!exists" if negate else "exists"))
    return tuple(requirements)


def selector_from_label_selector_object(selector: Mapping[str, Any]) -> tuple[Requirement, ...]:
    """A `metav1.LabelSelector` (matchLabels + matchExpressions), as PDBs carry."""
    requirements = [
        Requirement(k, "=", frozenset({str(v)})) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in selector.get("matchExpressions") or []:
        requirements.append(
            Requirement(expr["key"], ops[expr["operator"]], frozenset(expr.get("values") or []))
        )
    return tuple(requirements)


def labels_match(requirements: tuple[Requirement, ...], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return all(req.matches(labels) for req in requirements)


# what kube-apiserver selects by when the field is absent (a bool or a count it formats itself)
_FIELD_DEFAULTS = {"spec.hostNetwork": "false", "status.successful": "0"}


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return _FIELD_DEFAULTS.get(path, "")
        value = value.get(part)
    if value is None:
        return _FIELD_DEFAULTS.get(path, "")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


FieldMatcher = Callable[[Mapping[str, Any]], bool]


def parse_field_selector(text: str, supported: frozenset[str] | None = None) -> FieldMatcher:
    """`metadata.name=x,spec.nodeName!=` -> predicate. Unsupported fields are a 400, as in Kubernetes."""
    terms: list[tuple[str, bool, str]] = []
    for part in _split_top_level(text or ""):
        match = _EQ_RE.match(part)
        if match is None:
            raise ApiError.bad_request(
                f"invalid selector: {part.strip()!r}; can't understand '{part.strip()}'"
            )
        field, op, value = match.groups()
        if supported is not None and field not in supported:
            raise ApiError.bad_request(f"field label not supported: {field}")
        terms.append((field, op != "!=", value))

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, field) == value) == positive for field, positive, value in terms)

    return matches
