"""The one error the real API server raises: the message says what failed and what to do."""

from __future__ import annotations


class RealKubeApiError(RuntimeError):
    """The real Kubernetes API server could not be built or started."""
