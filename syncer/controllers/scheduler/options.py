"""The scheduler core's settings (the controller fills them from its own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from syncer.controllers.scheduler.request import DEFAULT_GRES
from syncer.controllers.scheduler.settings import DEFAULT_POD_OVERRIDES


@dataclass(frozen=True, kw_only=True)
class Options:
    release: str  # names this syncer's jobs (the marker): another release's are not ours
    gres: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_GRES))  # extended resource -> GRES
    pod_overrides: frozenset[str] = DEFAULT_POD_OVERRIDES  # unless the Namespace lists its own
    retry_after_s: float = 60.0  # a job cancelled because its pod could not be placed: submitted again after
