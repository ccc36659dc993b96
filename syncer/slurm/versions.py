"""What differs between slurmrestd API versions, in one place.

Verified live against Slurm 24.11.5: v0.0.40, v0.0.41, v0.0.42. v0.0.43 (25.05) and v0.0.44 (25.11)
follow the published OpenAPI spec and are NOT verified against a live slurmrestd here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiVersion:
    name: str
    verified_live: bool
    # v0.0.40/41 on 24.11 reject update_time ("Parsing of N for timestamp failed"), so the
    # cache cannot ask "changed since?" there and polls full lists under the duty limit instead.
    conditional_nodes: bool
    # slurmrestd before 26.05 answers a changed `update_time` query with HTTP 500 "Unable to query
    # partitions" (seen live on 24.11 v0.0.42); the bug is in the daemon, so every version reads it so.
    changed_means_500: bool = True

    @property
    def prefix(self) -> str:
        return f"/slurm/{self.name}"


VERSIONS: dict[str, ApiVersion] = {
    v.name: v
    for v in (
        ApiVersion("v0.0.44", verified_live=False, conditional_nodes=True),
        ApiVersion("v0.0.43", verified_live=False, conditional_nodes=True),
        ApiVersion("v0.0.42", verified_live=True, conditional_nodes=True),
        ApiVersion("v0.0.41", verified_live=True, conditional_nodes=False),
        ApiVersion("v0.0.40", verified_live=True, conditional_nodes=False),
    )
}
PREFERENCE: tuple[str, ...] = tuple(VERSIONS)  # newest first


def choose(served: set[str], pinned: str | None = None) -> ApiVersion | None:
    """The pinned version if served, else the newest version both sides speak."""
    if pinned:
        return VERSIONS[pinned] if pinned in served and pinned in VERSIONS else None
    for name in PREFERENCE:
        if name in served:
            return VERSIONS[name]
    return None
