"""API errors as kube-apiserver reports them: a `kind: Status` body with code and reason."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.headers: dict[str, str] = {}
        self.list_meta: dict[str, Any] = {}  # a Status's metadata (a 410's fresh continue token)

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]  # StatusReasonUnknown is "", which metav1.Status omits
        if self.details:
            body["details"] = self.details
        return body

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def not_found(cls, resource: str, name: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            404,
            "NotFound",
            f'{qualified} "{name}" not found',
            {"name": name, "group": group, "kind": resource},
        )

    @classmethod
    def conflict(cls, resource: str, name: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            {"name": name, "group": group, "kind": resource},
        )

    @classmethod
    def already_exists(cls, resource: str, name: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            409,
            "AlreadyExists",
            f'{qualified} "{name}" already exists',
            {"name": name, "group": group, "kind": resource},
        )

    @classmethod
    def invalid(cls, kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
        """422 Invalid as kube-apiserver words it: `Kind.group "name" is invalid: [a, b]`."""
        text = ", ".join(f"{field}: {msg}" for field, msg in causes)
        if len(causes) > 1:
            text = f"[{text}]"
        qualified = f"{kind}.{group}" if group else kind
        details: dict[str, Any] = (
            {"name": name, "group": group, "kind": kind} if group else {"name": name, "kind": kind}
        )
        details["causes"] = [{"reason": _cause_reason(m), "message": m, "field": f} for f, m in causes]
        return cls(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)

    @classmethod
    def method_not_allowed(cls) -> ApiError:
        return cls(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    @classmethod
    def unsupported_media_type(cls, accepted: tuple[str, ...] = ()) -> ApiError:
        listed = ", ".join(accepted or ("application/json-patch+json", "application/merge-patch+json"))
        return cls(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: {listed}",
        )


# The cause reasons of kube-apiserver's field errors, by the message's leading words.
_REASONS = (
    ("Unsupported value", "FieldValueNotSupported"),
    ("Required value", "FieldValueRequired"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Forbidden", "FieldValueForbidden"),
    ("Duplicate value", "FieldValueDuplicate"),
)


def _cause_reason(message: str) -> str:
    return next((reason for prefix, reason in _REASONS if message.startswith(prefix)), "FieldValueInvalid")
