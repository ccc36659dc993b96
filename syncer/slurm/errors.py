"""One exception hierarchy for everything that can go wrong talking to slurmrestd.

Messages never contain tokens: only the endpoint, the HTTP status and Slurm's own errors.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlurmMessage:
    """One entry of Slurm's `errors` or `warnings` list."""

    description: str = ""
    error_number: int = 0
    error: str = ""
    source: str = ""

    def __str__(self) -> str:
        text = self.description or self.error or "(no description)"
        return f"{text} (error {self.error_number})" if self.error_number else text


class SlurmError(Exception):
    """Base of every error from the Slurm client."""

    def __init__(self, message: str, *, endpoint: str = "") -> None:
        super().__init__(f"{endpoint}: {message}" if endpoint else message)
        self.endpoint = endpoint


class SlurmConnectionError(SlurmError):
    """slurmrestd could not be reached (refused, reset, DNS, socket missing)."""


class SlurmTimeout(SlurmError):
    """slurmrestd did not answer within the per-call deadline."""


class SlurmAuthError(SlurmError):
    """The token was rejected: expired, wrong key, or a user without the needed rights."""


class SlurmDecodeError(SlurmError):
    """The response was not the JSON this API version promises (truncated, corrupted, odd types)."""


class SlurmVersionError(SlurmError):
    """No API version both sides support, or a pinned version the server does not serve."""


class SlurmPathNotServed(SlurmError):
    """slurmrestd has no such path (its plain-text 404, not a Slurm answer): the API version in use is no
    longer served, as after an upgrade; the client chooses the version again."""


class SlurmUnsupported(SlurmVersionError):
    """This Slurm cannot do what was asked (e.g. an external job on 24.11 where no placeholder is allowed);
    raised before any request, naming what would be needed."""


class SlurmApiError(SlurmError):
    """slurmrestd answered with an error status; carries Slurm's errors and warnings."""

    def __init__(
        self,
        message: str,
        *,
        endpoint: str = "",
        status: int = 0,
        errors: tuple[SlurmMessage, ...] = (),
        warnings: tuple[SlurmMessage, ...] = (),
    ) -> None:
        detail = "; ".join(str(e) for e in errors)
        super().__init__(f"{message} (HTTP {status}){': ' + detail if detail else ''}", endpoint=endpoint)
        self.status = status
        self.errors = errors
        self.warnings = warnings

    def has_error(self, text: str) -> bool:
        return any(text in (e.description + " " + e.error) for e in self.errors)


class SlurmNotFound(SlurmApiError):
    """The named object (node, job) does not exist in Slurm."""
