"""Per-instance Slurm configuration: slurm.conf, cgroup.conf and keys, all under one directory."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

# The instance directory is bind-mounted here inside the shared root file system.
INNER = "/sbx"
REAL_NODE = "sbx-real"
PARTITION = "main"
SIM_CPUS = 64
SIM_MEMORY_MB = 512000
# A topology sandbox (`up(topology=True)`, Slurm 25.05+) adds partitions whose jobs are placed by the block /
# tree topology of topology.yaml; its default partition keeps the flat topology.
BLOCK_TOPOLOGY = "block"
TREE_TOPOLOGY = "tree"
# Slurm 26.05 moves a node only into units topology.yaml declares (blocks; in a tree, the first switch of
# the path: those below it are created), so the units the tests label nodes with are declared here.
TOPOLOGY_YAML = f"""- topology: flat
  cluster_default: true
  flat: true
- topology: {BLOCK_TOPOLOGY}
  block:
    block_sizes: [2]
    blocks:
      - block: b-seed
        nodes: {REAL_NODE}
      - block: b1
      - block: b2
- topology: {TREE_TOPOLOGY}
  tree:
    switches:
      - switch: sw-root
        children: spine[1-2],sw-seed
      - switch: spine1
      - switch: spine2
      - switch: sw-seed
        nodes: {REAL_NODE}
"""
MAX_SIM_NODES = 99999  # node names are node00001..node99999
# Preemption tiers of the tests' shared sandbox (tests/fixtures/slurm.py; the scheduler's preemption e2e and
# check's preemption line): partitions over the nodes with the feature TIERED only (dynamic nodes a test
# starts with it; NodeSet by feature). PreemptType=preempt/partition_prio preempts a job only for a job of a
# partition of a higher PriorityTier on the same nodes: every other partition has the default tier, so
# without a TIERED node nothing can preempt anything (the other tests' jobs run as before).
TIERED = "tiered"
TIER_LOW = "tier_low"  # no GraceTime: a preemptor may start beside a stopping pod (check warns)
TIER_GRACE = "tier_grace"  # GraceTime 30 s: a pod is deleted and its node held before its job ends
TIER_HIGH = "tier_high"  # preempts the two others
TIER_GRACE_S = 30
# GPUs as GRES in the tests' shared sandbox: a node a test starts with `write_gres` has them; inert for the
# others (no node declares any otherwise)
GRES = ("GresTypes=gpu",)
TIERS = (
    "PreemptType=preempt/partition_prio",
    "PreemptMode=CANCEL",
    f"NodeSet={TIERED} Feature={TIERED}",
    f"PartitionName={TIER_LOW} Nodes={TIERED} PriorityTier=1 PreemptMode=CANCEL State=UP",
    f"PartitionName={TIER_GRACE} Nodes={TIERED} PriorityTier=1 PreemptMode=CANCEL GraceTime={TIER_GRACE_S} "
    "State=UP",
    f"PartitionName={TIER_HIGH} Nodes={TIERED} PriorityTier=10 PreemptMode=OFF State=UP",
)


@dataclass(frozen=True)
class Ports:
    slurmctld: int
    slurmd: int
    rest: int


def free_port() -> int:
    """A port the kernel just found free on 127.0.0.1 (others may take it later; callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LOW_PORTS = (20000, 32000)
# where the next block may start: blocks handed out in one process never overlap, and each process starts at
# its own place (by pid): two that both started at 20000 handed out the same block while neither listened
# yet, and the later slurmd could not bind (a 24.11 power member's port, in slurm.conf minutes before)
_next_low_port = [LOW_PORTS[0] + os.getpid() * 16 % (LOW_PORTS[1] - LOW_PORTS[0] - 1000)]


def free_port_block(slots: int) -> int:
    """The first of `slots` consecutive ports nobody listens on, below the kernel's ephemeral range
    (32768-60999 by default): a port in that range may be taken by any client connection between this
    check and the daemon's bind (a slurmd per power-managed member failed so)."""
    low, high = LOW_PORTS
    base = _next_low_port[0]
    for _ in range(2):  # from where this process is, then once more from the bottom
        while base + slots <= high:
            if all(port_is_free(base + i) for i in range(slots)):
                _next_low_port[0] = base + slots
                return base
            base += 1
        base = low
    raise RuntimeError(f"no {slots} free consecutive ports between {low} and {high}")


def port_is_free(port: int) -> bool:
    """Nobody listens on 127.0.0.1:port (TIME_WAIT leftovers do not count: daemons set SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def sim_node_names(count: int) -> list[str]:
    return [f"node{i:05d}" for i in range(1, count + 1)]


def short_hostname() -> str:
    """This machine's name as Slurm daemons compare it (the part before the first dot)."""
    return socket.gethostname().split(".", 1)[0]


def hosts_file() -> str:
    """/etc/hosts for the chroot: the rootfs has none, and Slurm must resolve this host's name."""
    names = sorted({short_hostname(), socket.gethostname(), "localhost"})
    return f"127.0.0.1 {' '.join(names)}\n::1 localhost\n"


def slurm_conf(
    nodes: int,
    ports: Ports,
    max_dynamic: int,
    openmetrics: bool = False,
    topology: bool = False,
    keep_partitions: bool = False,
    extra_conf: tuple[str, ...] = (),
) -> str:
    host = short_hostname()
    lines = [
        "ClusterName=sandbox",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports.slurmctld}",
        f"SlurmdPort={ports.slurmd}",
        "SlurmUser=slurm",
        "AuthType=auth/slurm",
        "CredType=cred/slurm",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={INNER}/etc/jwt.key",
        "AuthInfo=use_client_ids",
        f"StateSaveLocation={INNER}/state",
        # %n: one spool, pid file and log per node, so several real slurmd can run side by side.
        f"SlurmdSpoolDir={INNER}/spool/%n",
        f"SlurmctldPidFile={INNER}/run/slurmctld.pid",
        f"SlurmdPidFile={INNER}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={INNER}/log/slurmctld.log",
        f"SlurmdLogFile={INNER}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        # Nodes get exactly the configured CPUs/memory even on a smaller machine (else DRAIN "Low ...").
        "SlurmdParameters=config_overrides",
        "SelectType=select/cons_tres",
        # backfill every 5 s (default 30): a short job that fits before a maintenance reservation is
        # placed by backfill, and tests wait for it within seconds instead of half a minute
        "SchedulerParameters=bf_interval=5",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "MinJobAge=30",
        "KillWait=5",
        f"MaxNodeCount={nodes + 1 + max_dynamic}",
        # Simulated CLOUD nodes "power up" instantly and never run anything.
        "SuspendProgram=/bin/true",
        "ResumeProgram=/bin/true",
        "SuspendTime=600",
        # The real node must never be "powered down": idle 10 min in a long test session, it was, and the
        # next job left it POWERING_UP and NOT_RESPONDING for good (slurmd never reboots) - CI, issue 30.
        f"SuspendExcNodes={REAL_NODE}",
        "ResumeTimeout=600",
        f"NodeName={REAL_NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN",
    ]
    if keep_partitions:
        # partitions made over REST (SlurmPartition CRs) survive a reconfigure and a restart
        lines.append("ReconfigFlags=KeepPartInfo")
    if openmetrics:
        # 25.11+: slurmctld answers GET /metrics/... on SlurmctldPort (a change hint for the node cache).
        lines.append("MetricsType=metrics/openmetrics")
    if nodes:
        lines.append(
            f"NodeName=node[00001-{nodes:05d}] CPUs={SIM_CPUS} RealMemory={SIM_MEMORY_MB} State=CLOUD"
        )
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    if topology:
        for name in (BLOCK_TOPOLOGY, TREE_TOPOLOGY):
            lines.append(f"PartitionName={name} Nodes=ALL MaxTime=INFINITE State=UP Topology={name}")
    lines.extend(extra_conf)  # a private sandbox's own settings (preemption, partitions), last: they win
    return "\n".join(lines) + "\n"


def write_instance(
    directory: Path,
    nodes: int,
    ports: Ports,
    max_dynamic: int,
    slurm_ids: tuple[int, int],
    rest_ids: tuple[int, int],
    openmetrics: bool = False,
    topology: bool = False,
    keep_partitions: bool = False,
    extra_conf: tuple[str, ...] = (),
) -> None:
    """Write a fresh configuration; keys are made once and kept across restarts."""
    uid, gid = slurm_ids
    os.chmod(directory, 0o755)
    for sub in ("etc", "state", "spool", "run", "run/ctld", "log"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(directory / sub, 0o755)
    (directory / "work").mkdir(exist_ok=True)
    os.chmod(directory / "work", 0o1777)  # the working directory of commands and jobs inside
    for sub in ("state", "run", "run/ctld"):
        os.chown(directory / sub, uid, gid)
    (directory / "run" / "rest").mkdir(exist_ok=True)  # slurmrestd (unprivileged) makes its unix socket here
    os.chown(directory / "run" / "rest", *rest_ids)
    os.chmod(directory / "log", 0o777)  # slurmd (root) and slurmctld (slurm) both log here
    etc = directory / "etc"
    (etc / "slurm.conf").write_text(
        slurm_conf(nodes, ports, max_dynamic, openmetrics, topology, keep_partitions, extra_conf)
    )
    if topology:
        (etc / "topology.yaml").write_text(TOPOLOGY_YAML)
    (etc / "cgroup.conf").write_text("CgroupPlugin=disabled\n")
    (etc / "hosts").write_text(hosts_file())
    for key in ("slurm.key", "jwt.key"):
        path = etc / key
        if not path.exists():
            path.write_bytes(secrets.token_bytes(32))
        os.chmod(path, 0o600)
        os.chown(path, uid, gid)
