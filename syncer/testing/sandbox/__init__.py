"""A real Slurm (24.11 or 26.05: slurmctld, slurmd, slurmrestd) here, for tests, demo and benchmarks.

Needs root. One Debian root file system per release is built once (trixie for 24.11, about 30 s; sid
for 26.05, about 1 min) into ``${SLURM_SYNCER_CACHE:-~/.cache/slurm-syncer}/rootfs-<suite>`` and
shared read-mostly by every instance; each instance lives in its own directory, so many can run at
once. The release is `up(slurm=...)`, else $SLURM_SYNCER_SLURM_RELEASE, else 26.05.

API (stable; other parts depend on it)::

    from syncer.testing.sandbox import Sandbox, SandboxError, REAL_NODE, up, down, load

    sbx = up(Path(".sandbox/default"), nodes=1000, rest_port=None, max_dynamic=256, slurm="26.05")
        # Idempotent: a healthy sandbox with the same settings is returned as is; other settings ->
        # SandboxError. Otherwise a FRESH cluster (earlier state/spool/work removed, keys kept, same
        # ports if free). A failed start stops what it started; the error has the daemon's log tail.
    sbx.rest_url        # "http://127.0.0.1:<port>", serves /slurm/<v> for v in sbx.api_versions
    sbx.metrics_url     # "http://127.0.0.1:<slurmctld port>": slurmctld's OpenMetrics (26.05; "" on 24.11)
    sbx.release         # Release("26.05", suite "sid", api_versions ("v0.0.42", ..., "v0.0.45"))
    sbx.slurm_version   # "26.05.5-1": the Debian version of its Slurm packages
    sbx.token_file      # Path: a 30-day JWT for user `slurm` (SlurmUser, may update nodes)
    sbx.jwt_key_path    # Path: the HS256 key slurmctld/slurmrestd verify tokens with
    sbx.directory       # Path: the instance directory (etc/, state/, spool/, log/, work/, sandbox.json)
                        # mounted at /sbx inside; commands and jobs run in /sbx/work (= directory/work)
    sbx.events_log      # Path: one line per daemon started/stopped with PID and start time
    sbx.slurm_conf      # Path: its slurm.conf
    sbx.node_names      # [REAL_NODE, "node00001", ..., "node<N>"]; sbx.nodes == N
    sbx.real_node       # REAL_NODE == "sbx-real": the node with a real slurmd that runs jobs
    sbx.dynamic_nodes   # names of running slurmd started with start_slurmd()
    sbx.ports           # Ports(slurmctld, slurmd, rest)
    sbx.scontrol("show", "node", "node00001") -> str        # SandboxError when scontrol fails
    sbx.rest_socket     # Path of the unix socket of start_slurmrestd_unix()
    sbx.run("sbatch", "-w", REAL_NODE, "--wrap", "sleep 5") -> CompletedProcess[str]
                        # any Slurm client inside the chroot; keywords: timeout, check, user
    sbx.node_state("node00001") -> {"IDLE", "CLOUD", "POWERED_DOWN"}
    sbx.token(user="slurm", lifespan=3600) -> str           # issued by `scontrol token`
    sbx.stop_slurmrestd(); sbx.start_slurmrestd()           # same port again
    sbx.start_slurmrestd_unix() -> Path; sbx.stop_slurmrestd_unix()  # 2nd slurmrestd, unix socket,
                        # rest_auth/local (no token; acts as an unprivileged user: reads only)
    sbx.stop_slurmctld(); sbx.start_slurmctld(); sbx.restart_slurmctld()
    sbx.start_slurmd("dyn1", cpus=1, memory_mb=500)         # real slurmd, dynamic node, waits idle
    sbx.stop_slurmd("dyn1"); sbx.delete_node("dyn1")        # stop; stop + `scontrol delete`
    sbx.running("slurmrestd") -> bool; sbx.healthy() -> bool; sbx.log_tail("slurmctld") -> str
    sbx.exports() -> str                                    # the shell export lines
    sbx.down()                                              # stops only what it started
    down(Path(".sandbox/default")) -> bool; load(Path(...)) -> Sandbox | None

Every daemon runs in a private mount namespace (/proc, /sys, /dev, a tmpfs /run and the instance
directory at /sbx are mounted there only), so mounts vanish with the process; the PID recorded is
the daemon's own (exec chain) together with its start time, so a reused PID is never mistaken for
ours. Stopping a daemon also kills whatever is left in its mount namespace (job steps).
"""

from __future__ import annotations

from syncer.testing.sandbox.config import PARTITION, REAL_NODE, Ports
from syncer.testing.sandbox.errors import SandboxError
from syncer.testing.sandbox.releases import DEFAULT_RELEASE, RELEASE_ENV, RELEASES, Release, release
from syncer.testing.sandbox.rootfs import cache_dir, ensure_rootfs
from syncer.testing.sandbox.sandbox import API_VERSION, Sandbox, down, load, up

__all__ = [
    "API_VERSION",
    "DEFAULT_RELEASE",
    "PARTITION",
    "REAL_NODE",
    "RELEASES",
    "RELEASE_ENV",
    "Ports",
    "Release",
    "Sandbox",
    "SandboxError",
    "cache_dir",
    "down",
    "ensure_rootfs",
    "load",
    "release",
    "up",
]
