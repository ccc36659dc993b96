"""The Slurm releases the sandbox can run, and which one a caller asked for."""

from __future__ import annotations

import os
from dataclasses import dataclass

from syncer.testing.sandbox.errors import SandboxError

RELEASE_ENV = "SLURM_SYNCER_SLURM_RELEASE"


@dataclass(frozen=True)
class Release:
    """One Slurm release: the Debian suite that ships it and what its slurmrestd serves."""

    name: str  # "24.11": the major.minor Slurm version
    suite: str  # Debian suite whose archive carries it
    api_versions: tuple[str, ...]  # REST versions its slurmrestd serves, oldest first
    # sid's Release file can be past its Valid-Until date; apt refuses such an index without this.
    apt_options: tuple[str, ...] = ()
    # slurmctld serves OpenMetrics itself (MetricsType=metrics/openmetrics, Slurm 25.11+).
    openmetrics: bool = False
    # topology.yaml and node updates with `topology_str` (Slurm 25.05+, REST v0.0.43+).
    topology: bool = False

    @property
    def newest_api_version(self) -> str:
        return self.api_versions[-1]


# v0.0.42 is the one version both releases serve (deprecated in 26.05, gone in 26.11).
COMMON_API_VERSION = "v0.0.42"

RELEASES: dict[str, Release] = {
    "24.11": Release("24.11", "trixie", ("v0.0.40", "v0.0.41", "v0.0.42")),
    "26.05": Release(
        "26.05",
        "sid",
        ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"),
        apt_options=("-o", "Acquire::Check-Valid-Until=false"),
        openmetrics=True,
        topology=True,
    ),
}
# What the sandbox, tests, demo and benchmarks use when nothing is asked for: what current clusters run
# (24.11 by --slurm / $SLURM_SYNCER_SLURM_RELEASE; scripts/test runs the Slurm-facing tests on both).
DEFAULT_RELEASE = "26.05"


class UnknownReleaseError(SandboxError):
    """A release name the sandbox does not know."""


def release(name: str | None = None, default: str = DEFAULT_RELEASE) -> Release:
    """The release `name`, else $SLURM_SYNCER_SLURM_RELEASE, else `default`; a clear error if unknown."""
    chosen = name or os.environ.get(RELEASE_ENV) or default
    try:
        return RELEASES[chosen.strip()]
    except KeyError:
        source = "asked for" if name else f"in ${RELEASE_ENV}"
        raise UnknownReleaseError(
            f"unknown Slurm release {chosen!r} {source}: choose one of {', '.join(RELEASES)}"
        ) from None
