"""A real Slurm 24.11 (slurmctld, slurmd, slurmrestd) on this machine, for tests, demo and benchmarks.

    from syncer.testing.sandbox import up, Sandbox
    sbx = up(Path(".sandbox/default"), nodes=1000)   # idempotent; builds the rootfs once
    sbx.rest_url, sbx.token_file, sbx.jwt_key_path, sbx.node_names
    sbx.scontrol("show", "node", "node00001"); sbx.run("sbatch", "-w", "sbx-real", "--wrap", "sleep 5")
    sbx.stop_slurmrestd(); sbx.start_slurmrestd(); sbx.restart_slurmctld()
    sbx.start_slurmd("dyn1"); sbx.stop_slurmd("dyn1")        # a real slurmd registering a dynamic node
    sbx.token(user="slurm", lifespan_s=600); sbx.down()

Every daemon runs in a private mount namespace (/proc, /dev and the instance directory at /sbx are
mounted there only), so mounts vanish with the process and several sandboxes can share one rootfs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from syncer.slurm.jwt import mint_token
from syncer.testing.sandbox.config import (
    INNER,
    REAL_NODE,
    Ports,
    free_port,
    port_is_free,
    sim_node_names,
    write_instance,
)
from syncer.testing.sandbox.rootfs import REST_USER, SandboxError, ensure_rootfs

__all__ = ["REAL_NODE", "Sandbox", "SandboxError", "load", "up"]

STATE_FILE = "sandbox.json"
TOKEN_LIFESPAN_S = 7 * 24 * 3600
DEFAULT_MAX_DYNAMIC = 256


def wait_until(check: Callable[[], bool], timeout: float, what: str, on_fail: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(delay)  # polling a condition with a deadline, not synchronising on time
        delay = min(delay * 1.5, 0.5)
    raise SandboxError(f"{what} did not happen within {timeout:.0f} s\n{on_fail()}")


def _alive(pid: int, binary: str) -> bool:
    """True when `pid` runs `binary` (a reused pid running something else is stale)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if status.split(") ", 1)[-1].startswith("Z"):
        return False
    return any(part.endswith(binary.encode()) for part in cmdline[:12])


@dataclass
class Sandbox:
    directory: Path
    rootfs: Path
    nodes: int
    ports: Ports
    pids: dict[str, int] = field(default_factory=dict)  # "slurmctld", "slurmrestd", "slurmd:<node>"

    # --- where things are -------------------------------------------------------------
    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.rest}"

    @property
    def token_file(self) -> Path:
        return self.directory / "token"

    @property
    def jwt_key_path(self) -> Path:
        return self.directory / "etc" / "jwt.key"

    @property
    def node_names(self) -> list[str]:
        return [REAL_NODE, *sim_node_names(self.nodes)]

    def log_path(self, daemon: str) -> Path:
        return self.directory / "log" / f"{daemon.replace(':', '-')}.out"

    def exports(self) -> str:
        return "\n".join(
            [
                f"export SLURM_SYNCER_SLURM_URL={self.rest_url}",
                f"export SLURM_SYNCER_SLURM_TOKEN_FILE={self.token_file}",
                f"export SLURM_SYNCER_SLURM_JWT_KEY={self.jwt_key_path}",
                f"# slurm.conf: {self.directory / 'etc' / 'slurm.conf'} (inside the sandbox: {INNER}/etc)",
                f"# scontrol: slurm-syncer sandbox scontrol --dir {self.directory} show nodes",
            ]
        )

    # --- commands inside the sandbox ----------------------------------------------------
    def _argv(self, argv: list[str], user: str | None = None, env: dict[str, str] | None = None) -> list[str]:
        environment = {"SLURM_CONF": f"{INNER}/etc/slurm.conf", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        environment.update(env or {})
        root = shlex.quote(str(self.rootfs))
        chroot = ["chroot", *([f"--userspec={user}:{user}"] if user else []), str(self.rootfs)]
        script = (
            f"mount -t proc proc {root}/proc && mount --rbind /dev {root}/dev && "
            f"mount --bind {shlex.quote(str(self.directory))} {root}{INNER} && exec env -i "
            + " ".join(shlex.quote(f"{k}={v}") for k, v in environment.items())
            + " "
            + " ".join(shlex.quote(part) for part in chroot + argv)
        )
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]

    def run(self, *argv: str, timeout: float = 60, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (sinfo, sbatch, squeue, ...) inside the sandbox."""
        result = subprocess.run(
            self._argv(list(argv)), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise SandboxError(f"{' '.join(argv)} failed: {result.stderr.strip() or result.stdout.strip()}")
        return result

    def scontrol(self, *args: str, timeout: float = 60) -> str:
        return self.run("scontrol", *args, timeout=timeout, check=True).stdout

    def token(self, user: str = "slurm", lifespan_s: int = 3600) -> str:
        return mint_token(self.jwt_key_path.read_bytes(), user, lifespan_s)

    # --- daemons ------------------------------------------------------------------------
    def _spawn(
        self, name: str, argv: list[str], user: str | None = None, env: dict[str, str] | None = None
    ) -> int:
        with open(self.log_path(name), "ab") as log:
            proc = subprocess.Popen(
                self._argv(argv, user=user, env=env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.pids[name] = proc.pid
        self._save()
        return proc.pid

    def running(self, name: str) -> bool:
        pid = self.pids.get(name)
        return pid is not None and _alive(pid, name.split(":")[0])

    def _stop(self, name: str, timeout: float = 15) -> None:
        pid = self.pids.pop(name, None)
        self._save()
        if pid is None or not _alive(pid, name.split(":")[0]):
            return
        os.kill(pid, signal.SIGTERM)
        try:
            wait_until(lambda: not _alive(pid, name.split(":")[0]), timeout, f"{name} stop", lambda: "")
        except SandboxError:
            os.kill(pid, signal.SIGKILL)
        _reap(pid)

    def _log_tail(self, name: str, lines: int = 20) -> str:
        texts = []
        candidates = [self.log_path(name)]
        if name == "slurmctld":
            candidates.append(self.directory / "log" / "slurmctld.log")
        elif name.startswith("slurmd:"):
            candidates.append(self.directory / "log" / f"slurmd-{name.split(':', 1)[1]}.log")
        for path in candidates:
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                texts.append(f"--- last lines of {path}:\n" + "\n".join(tail))
        return "\n".join(texts) or f"(no log written by {name})"

    def _ping_ctld(self) -> bool:
        result = self.run("scontrol", "ping", timeout=20)
        return result.returncode == 0 and "UP" in result.stdout

    def start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", f"{INNER}/etc/slurm.conf"])
        wait_until(
            lambda: self.running("slurmctld") and self._ping_ctld(),
            60,
            "slurmctld start",
            lambda: self._log_tail("slurmctld"),
        )

    def restart_slurmctld(self) -> None:
        self._stop("slurmctld")
        self.start_slurmctld()

    def node_state(self, node: str) -> str:
        result = self.run("sinfo", "-h", "-N", "-n", node, "-o", "%T", timeout=20)
        return result.stdout.strip() if result.returncode == 0 else ""

    def start_slurmd(self, node: str = REAL_NODE, cpus: int = 1, memory_mb: int = 500) -> None:
        """Start a real slurmd; any name but the real node registers a dynamic node."""
        argv = ["slurmd", "-D", "-f", f"{INNER}/etc/slurm.conf", "-N", node]
        if node != REAL_NODE:
            port = free_port()
            argv[2:2] = ["-Z", "--conf", f"CPUs={cpus} RealMemory={memory_mb} Port={port} NodeAddr=127.0.0.1"]
        (self.directory / "spool" / node).mkdir(parents=True, exist_ok=True)
        name = f"slurmd:{node}"
        self._spawn(name, argv)
        wait_until(
            lambda: (
                self.running(name)
                and self.node_state(node).split("+")[0].rstrip("*~#!%$@^-")
                in ("idle", "mixed", "allocated", "drained", "draining", "completing")
            ),
            60,
            f"slurmd {node} registration",
            lambda: self._log_tail(name),
        )

    def stop_slurmd(self, node: str) -> None:
        self._stop(f"slurmd:{node}")

    def _rest_ready(self) -> bool:
        request = urllib.request.Request(
            f"{self.rest_url}/slurm/v0.0.42/ping", headers={"X-SLURM-USER-TOKEN": self.token(lifespan_s=60)}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def start_slurmrestd(self) -> None:
        if not port_is_free(self.ports.rest):
            raise SandboxError(
                f"REST port 127.0.0.1:{self.ports.rest} is already in use: pick another with --port"
            )
        self._spawn(
            "slurmrestd",
            ["slurmrestd", "-s", "openapi/slurmctld", f"127.0.0.1:{self.ports.rest}"],
            user=REST_USER,
            env={"SLURM_JWT": "daemon"},
        )
        wait_until(
            lambda: self.running("slurmrestd") and self._rest_ready(),
            60,
            "slurmrestd start",
            lambda: self._log_tail("slurmrestd"),
        )

    def stop_slurmrestd(self) -> None:
        self._stop("slurmrestd")

    def healthy(self) -> bool:
        return all(self.running(n) for n in ("slurmctld", "slurmrestd", f"slurmd:{REAL_NODE}"))

    def down(self) -> None:
        """Stop only what this sandbox started, dynamic slurmd first, slurmctld last."""
        for name in sorted(self.pids, key=lambda n: (n == "slurmctld", n)):
            self._stop(name)

    # --- persistence --------------------------------------------------------------------
    def _save(self) -> None:
        state = {
            "rootfs": str(self.rootfs),
            "nodes": self.nodes,
            "pids": self.pids,
            "ports": {
                "slurmctld": self.ports.slurmctld,
                "slurmd": self.ports.slurmd,
                "rest": self.ports.rest,
            },
        }
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.directory / STATE_FILE)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def load(directory: Path) -> Sandbox | None:
    """The sandbox recorded in `directory`, with stale pids (dead or reused) dropped."""
    directory = directory.resolve()
    path = directory / STATE_FILE
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        sandbox = Sandbox(
            directory=directory,
            rootfs=Path(state["rootfs"]),
            nodes=int(state["nodes"]),
            ports=Ports(**state["ports"]),
            pids={k: int(v) for k, v in state["pids"].items()},
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise SandboxError(
            f"{path} is damaged ({exc}): remove {directory} and run 'sandbox up' again"
        ) from exc
    for name in list(sandbox.pids):
        if not sandbox.running(name):
            sandbox.pids.pop(name)
    return sandbox


def up(directory: Path, nodes: int = 100, rest_port: int | None = None) -> Sandbox:
    """Start (or reuse) a sandbox with `nodes` simulated CLOUD nodes plus one real slurmd node."""
    if nodes < 0 or nodes > 99999:
        raise SandboxError(f"--nodes must be between 0 and 99999, got {nodes}")
    directory = directory.resolve()
    existing = load(directory)
    if existing is not None and existing.pids:
        if existing.healthy() and existing.nodes == nodes and rest_port in (None, existing.ports.rest):
            return existing
        if existing.healthy():
            raise SandboxError(
                f"a sandbox with {existing.nodes} nodes on port {existing.ports.rest} already runs in "
                f"{directory}: run 'slurm-syncer sandbox down --dir {directory}' first, or use another --dir"
            )
        existing.down()  # half-running from an earlier crash: start clean
    rootfs = ensure_rootfs()
    directory.mkdir(parents=True, exist_ok=True)
    ports = Ports(slurmctld=free_port(), slurmd=free_port(), rest=rest_port or free_port())
    write_instance(directory, nodes, ports, DEFAULT_MAX_DYNAMIC)
    sandbox = Sandbox(directory=directory, rootfs=rootfs, nodes=nodes, ports=ports)
    try:
        sandbox.start_slurmctld()
        sandbox.start_slurmd(REAL_NODE)
        sandbox.start_slurmrestd()
        token = sandbox.token(lifespan_s=TOKEN_LIFESPAN_S)
        sandbox.token_file.write_text(token + "\n")
        os.chmod(sandbox.token_file, 0o600)
    except BaseException:
        sandbox.down()
        raise
    return sandbox
