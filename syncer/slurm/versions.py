"""What differs between slurmrestd API versions, in one place.

Verified live (tests/integration/test_slurm_client.py, run on both releases by scripts/test):
v0.0.40 and v0.0.41 on Slurm 24.11.5; v0.0.42 on 24.11.5 and 26.05.5; v0.0.43, v0.0.44 and v0.0.45
on 26.05.5. The node fields the syncer reads are the same in all of them; v0.0.44 adds the state
flags EXTERNAL and BLOCKED, v0.0.45 POWER_DOWN_ASAP and POWER_DOWN_FORCE (older versions omit flags
they do not know). From v0.0.43 a node update takes `topology_str` and a node shows `topology`
(tests/e2e/test_attributes.py); v0.0.42 has neither, even on 26.05. Only v0.0.45 has `GET /conf`.

How a server answers "changed since?" is not a property of the version but of the daemon (24.11:
HTTP 500 "Unable to query partitions"; 26.05.3+: 200 with every node; both: 304 when unchanged), so
the node cache reads it from each answer instead of from this table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ApiVersion:
    name: str
    # True only where a test against a real slurmrestd proves it (see the module docstring).
    verified_live: bool
    # v0.0.40/41 on 24.11 reject update_time ("Parsing of N for timestamp failed"), so the cache
    # cannot ask "changed since?" there and polls full lists under the duty limit instead. A server
    # that rejects it on another version is detected from its answer too (NodeCache).
    conditional_nodes: bool
    # The releases this version was verified on, for `check` and the docs.
    verified_on: tuple[str, ...] = ()
    # POST /reservation (create and update) exists from v0.0.43 (Slurm 25.05); v0.0.42 has only GET and
    # DELETE, so maintenance windows cannot become reservations there.
    reservation_writes: bool = False
    # A node update takes `topology_str` (v0.0.43+, Slurm 25.05+); v0.0.42 on 24.11 has no such field.
    topology: bool = False
    # `GET /conf` (slurmctld's configuration: SlurmctldPort, the controllers, MetricsType) exists in v0.0.45
    # only: 404 for v0.0.42-44 on 26.05.5 and for v0.0.40-42 on 24.11.5 (measured here, 2026-11-26).
    conf: bool = False
    # POST /partitions/ and DELETE /partition/{name} exist in v0.0.45 only (Slurm 26.05): 404 for v0.0.42-44
    # on 26.05.5 and for every version on 24.11.5 (measured, docs/slurm-releases.md "Partitions").
    partition_writes: bool = False
    # POST /new/node/ (create a node from a slurm.conf NodeName line) exists from v0.0.44: 404 for v0.0.42-43
    # on 26.05.5 and for every version on 24.11.5 (measured, docs/slurm-releases.md "Power saving").
    node_create: bool = False
    # `flags: ["EXTERNAL_JOB"]` in a job submission (an allocation nothing runs in: a pod's job, issue 44)
    # parses from v0.0.43: v0.0.42 refuses it with error 9207 "Unknown flag" (measured on 26.05.5,
    # docs/slurm-releases.md "Jobs for pods"); there a pod's job is a placeholder batch job, if allowed.
    external_jobs: bool = False

    @property
    def prefix(self) -> str:
        return f"/slurm/{self.name}"


# REST v0.0.43+ (Slurm 25.05+, verified on 26.05): node updates take topology_str, reservations can be
# created and updated, jobs can be external. A value, not a function: the table is built once at import,
# where a mutation run never sees a mutant (tests/unit/test_slurm_versions.py pins every version's
# capabilities instead).
_V0_0_43 = ApiVersion(
    "v0.0.43", True, conditional_nodes=True, verified_on=("26.05",), reservation_writes=True, topology=True,
    external_jobs=True,
)  # fmt: skip

VERSIONS: dict[str, ApiVersion] = {
    v.name: v
    for v in (
        replace(_V0_0_43, name="v0.0.45", conf=True, partition_writes=True, node_create=True),
        replace(_V0_0_43, name="v0.0.44", node_create=True),
        _V0_0_43,
        ApiVersion("v0.0.42", verified_live=True, conditional_nodes=True, verified_on=("24.11", "26.05")),
        ApiVersion("v0.0.41", verified_live=True, conditional_nodes=False, verified_on=("24.11",)),
        ApiVersion("v0.0.40", verified_live=True, conditional_nodes=False, verified_on=("24.11",)),
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
