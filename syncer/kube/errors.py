"""One error type for everything the Kubernetes API can say no with."""

from __future__ import annotations


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after_s = retry_after_s

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        return self.status == 410


def config_error(message: str) -> KubeError:
    """Credentials or a kubeconfig that cannot be used; `message` says which and what to fix."""
    return KubeError(0, "ConfigError", message)


class KubeConnectionError(KubeError):
    def __init__(self, message: str) -> None:
        super().__init__(0, "ConnectionError", message)
