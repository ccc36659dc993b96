"""Times as the Kubernetes API writes them."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(epoch_s: float) -> str | None:
    """UTC `2024-05-01T12:00:00Z`; None for times Python cannot represent."""
    try:
        return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None
