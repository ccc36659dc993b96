"""One sandbox instance: its daemons, its state file, and commands run inside it."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import http.client
import json
import os
import shlex
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncer.testing.sandbox.config import (
    INNER,
    MAX_SIM_NODES,
    REAL_NODE,
    Ports,
    free_port,
    port_is_free,
    sim_node_names,
    write_instance,
)
from syncer.testing.sandbox.errors import SandboxError
from syncer.testing.sandbox.processes import ProcessId, chroot_argv, terminate, wait_until
from syncer.testing.sandbox.releases import COMMON_API_VERSION, RELEASES, Release, release
from syncer.testing.sandbox.rootfs import (
    REST_USER,
    check_host,
    ensure_rootfs,
    installed_slurm,
    progress,
    user_ids,
)

STATE_FILE = "sandbox.json"
TOKEN_LIFESPAN_S = 30 * 24 * 3600
DEFAULT_MAX_DYNAMIC = 256
START_TIMEOUT_S = 90.0
API_VERSION = COMMON_API_VERSION  # served by every release the sandbox runs
READY_STATES = ("IDLE", "MIXED", "ALLOCATED", "COMPLETING")
BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


def _program(name: str) -> str:
    """Daemon key ("slurmctld", "slurmrestd", "slurmd:<node>") -> program name."""
    return name.split(":", 1)[0]


@dataclass
class Sandbox:
    """A running (or recorded) sandbox; see the package docstring for the API."""

    directory: Path
    rootfs: Path
    nodes: int
    ports: Ports
    max_dynamic: int = DEFAULT_MAX_DYNAMIC
    topology: bool = False  # topology.yaml and its partitions (config.py), Slurm 25.05+
    keep_partitions: bool = False  # ReconfigFlags=KeepPartInfo: partitions made over REST survive a reload
    extra_conf: tuple[str, ...] = ()  # slurm.conf lines appended (a private sandbox's preemption, partitions)
    release: Release = RELEASES["24.11"]
    daemons: dict[str, ProcessId] = field(default_factory=dict)
    _children: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    # --- where things are -------------------------------------------------------------
    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.rest}"

    @property
    def metrics_url(self) -> str:
        """slurmctld's own OpenMetrics (``GET /metrics/nodes`` ...); "" where the release has none."""
        return f"http://127.0.0.1:{self.ports.slurmctld}" if self.release.openmetrics else ""

    @property
    def token_file(self) -> Path:
        return self.directory / "token"

    @property
    def jwt_key_path(self) -> Path:
        return self.directory / "etc" / "jwt.key"

    @property
    def slurm_conf(self) -> Path:
        return self.directory / "etc" / "slurm.conf"

    @property
    def slurm_version(self) -> str:
        """The Debian version of the Slurm packages in this sandbox's root file system, e.g. 26.05.5-1."""
        return installed_slurm(self.rootfs)

    @property
    def api_versions(self) -> tuple[str, ...]:
        """REST versions this sandbox's slurmrestd serves, oldest first."""
        return self.release.api_versions

    @property
    def real_node(self) -> str:
        return REAL_NODE

    @property
    def node_names(self) -> list[str]:
        """The nodes from slurm.conf: the real node first, then node00001..nodeN (CLOUD)."""
        return [REAL_NODE, *sim_node_names(self.nodes)]

    @property
    def dynamic_nodes(self) -> list[str]:
        """Nodes whose slurmd this sandbox started with start_slurmd (and that still run)."""
        return [
            n.split(":", 1)[1] for n in self.daemons if n.startswith("slurmd:") and n != f"slurmd:{REAL_NODE}"
        ]

    @property
    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self.daemons.items()}

    def log_path(self, daemon: str) -> Path:
        """stdout/stderr of a daemon ("slurmctld", "slurmrestd", "slurmd:<node>")."""
        return self.directory / "log" / f"{daemon.replace(':', '-')}.out"

    def exports(self) -> str:
        return "\n".join(
            [
                f"export SLURM_SYNCER_SLURM_URL={self.rest_url}",
                f"export SLURM_SYNCER_SLURM_TOKEN_FILE={shlex.quote(str(self.token_file))}",
                f"export SLURM_SYNCER_SLURM_JWT_KEY={shlex.quote(str(self.jwt_key_path))}",
                f"# slurm.conf: {self.slurm_conf} (inside the sandbox: {INNER}/etc/slurm.conf)",
                f"# Slurm {self.slurm_version or self.release.name}: REST API {', '.join(self.api_versions)}",
                f"# nodes: {REAL_NODE} (real slurmd) + {self.nodes} CLOUD nodes",
                f"# scontrol: slurm-syncer sandbox scontrol --dir {self.directory} show nodes",
            ]
        )

    # --- commands inside the sandbox ----------------------------------------------------
    def run(
        self, *argv: str, timeout: float = 60, check: bool = False, user: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (sinfo, sbatch, srun, squeue, ...) inside the sandbox."""
        if not argv:
            raise ValueError("run() needs a command, e.g. run('sinfo')")
        result = subprocess.run(
            chroot_argv(self.rootfs, self.directory, argv, user=user),
            capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise SandboxError(
                f"{' '.join(argv)} failed (exit {result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )
        return result

    def scontrol(self, *args: str, timeout: float = 60) -> str:
        """stdout of `scontrol ARGS` inside the sandbox; SandboxError when it fails. A reconfigure returns
        once the real node's slurmd is back (see `_after_reconfigure`)."""
        if args[:1] != ("reconfigure",):
            return self.run("scontrol", *args, timeout=timeout, check=True).stdout
        log = self.directory / "log" / f"slurmd-{REAL_NODE}.log"
        before = self._registrations(log)
        out = self.run("scontrol", *args, timeout=timeout, check=True).stdout
        self._after_reconfigure(log, before, timeout)
        return out

    @staticmethod
    def _registrations(log: Path) -> int:
        return log.read_text(errors="replace").count("CPUs=") if log.exists() else 0

    def _after_reconfigure(self, log: Path, before: int, timeout: float) -> None:
        """26.05's slurmd re-executes itself on the SIGHUP a reconfigure sends it; a second reconfigure while
        the new one starts killed it in CI (the real node DOWN+NOT_RESPONDING for the rest of the session).
        So wait until it has started again (its resources line in the log) before anything else happens."""
        pid = self.pids.get(f"slurmd:{REAL_NODE}")
        if self.release.name != "26.05" or pid is None or not Path(f"/proc/{pid}").exists():
            return
        wait_until(
            lambda: self._registrations(log) > before, timeout,
            f"slurmd {REAL_NODE} started again after the reconfigure",
        )  # fmt: skip

    def token(self, user: str = "slurm", lifespan: int = 3600, *, lifespan_s: int | None = None) -> str:
        """A JWT for `user` valid `lifespan` seconds, issued by slurmctld (`scontrol token`).

        `lifespan_s` is an alias of `lifespan` kept for early callers.
        """
        lifespan = lifespan if lifespan_s is None else lifespan_s
        if lifespan <= 0:
            raise ValueError(f"token lifespan must be positive seconds, got {lifespan}")
        out = self.scontrol("token", f"username={user}", f"lifespan={lifespan}")
        for line in out.splitlines():
            if line.startswith("SLURM_JWT="):
                return line.split("=", 1)[1].strip()
        raise SandboxError(f"scontrol token printed no SLURM_JWT line: {out.strip()!r}")

    def node_state(self, node: str) -> set[str]:
        """Slurm's state flags of a node, e.g. {"IDLE", "CLOUD", "POWERED_DOWN"}; empty if unknown."""
        result = self.run("scontrol", "show", "node", "-o", node, timeout=20)
        for part in result.stdout.split():
            if part.startswith("State="):
                return set(part.removeprefix("State=").split("+"))
        return set()

    # --- daemons ------------------------------------------------------------------------
    def running(self, name: str) -> bool:
        """True when the daemon `name` that this sandbox started still runs."""
        process = self.daemons.get(name)
        return process is not None and process.runs(_program(name))

    def _spawn(
        self, name: str, argv: list[str], user: str | None = None, ctld_socket: bool = True, jwt: bool = False
    ) -> ProcessId:
        if self.running(name):
            raise SandboxError(f"{name} already runs in {self.directory} (pid {self.daemons[name].pid})")
        env = {"SLURM_JWT": "daemon"} if jwt else None
        with open(self.log_path(name), "ab") as log:
            child = subprocess.Popen(
                chroot_argv(self.rootfs, self.directory, argv, user=user, env=env, ctld_socket=ctld_socket),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        process = ProcessId.of(child.pid)
        if process is None:  # died before we could look at it
            child.wait()
            raise SandboxError(f"{name} exited at once (exit {child.returncode})\n{self.log_tail(name)}")
        self._children[child.pid] = child
        self.daemons[name] = process
        self._save()
        self._record(f"started {name} pid={process.pid} start={process.start}")
        return process

    def _exited(self, name: str) -> str | None:
        """Why the daemon is gone, or None while it lives (used to stop waiting early)."""
        process = self.daemons.get(name)
        if process is None:
            return f"{name} is not running"
        child = self._children.get(process.pid)
        if child is not None and child.poll() is not None:
            return f"{name} exited with status {child.returncode}"
        return None if process.alive() else f"{name} is gone"

    def _stop(self, name: str, timeout: float = 15) -> None:
        process = self.daemons.pop(name, None)
        self._save()
        if process is not None:
            terminate(process, timeout)
            self._record(f"stopped {name} pid={process.pid} start={process.start}")
            child = self._children.pop(process.pid, None)
            if child is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=1)

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last lines of a daemon's output and of its Slurm log file."""
        candidates = [self.log_path(name)]
        if name == "slurmctld":
            candidates.append(self.directory / "log" / "slurmctld.log")
        elif name.startswith("slurmd:"):
            candidates.append(self.directory / "log" / f"slurmd-{name.split(':', 1)[1]}.log")
        texts = []
        for path in candidates:
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                texts.append(f"--- last lines of {path}:\n" + "\n".join(tail))
        return "\n".join(texts) or f"(no log written by {name})"

    def _ctld_answers(self) -> bool:
        result = self.run("scontrol", "ping", timeout=20)
        return result.returncode == 0 and "UP" in result.stdout

    def start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", f"{INNER}/etc/slurm.conf"])
        wait_until(
            self._ctld_answers, START_TIMEOUT_S, "slurmctld start",
            lambda: self.log_tail("slurmctld"), lambda: self._exited("slurmctld"),
        )  # fmt: skip

    def stop_slurmctld(self) -> None:
        self._stop("slurmctld")

    def restart_slurmctld(self, down_s: float = 0.0) -> None:
        """Stop slurmctld, leave it down `down_s` seconds (an outage, not just a restart), and start it
        again from its saved state (dynamic nodes survive).

        Returns once slurmctld answers and the real node (when its slurmd runs) is responding again.
        """
        self._stop("slurmctld")
        if down_s > 0:
            time.sleep(down_s)  # the outage itself: its length is what is being tested
        self.start_slurmctld()
        if self.running(f"slurmd:{REAL_NODE}"):
            wait_until(
                lambda: self._registered(REAL_NODE), START_TIMEOUT_S, f"{REAL_NODE} responding after restart",
                lambda: self.log_tail("slurmctld"),
            )  # fmt: skip

    def _registered(self, node: str) -> bool:
        flags = self.node_state(node)
        return bool(flags & set(READY_STATES)) and "NOT_RESPONDING" not in flags

    def start_slurmd(
        self, node: str = REAL_NODE, cpus: int = 1, memory_mb: int = 500, features: Sequence[str] = (),
        boot: bool = False, port: int = 0, gres: str = "",
    ) -> None:  # fmt: skip
        """Start a real slurmd and wait until it is registered and idle.

        For REAL_NODE, or a node named in `extra_conf` (a power member on 24.11, which cannot create nodes
        over REST), it is that node of slurm.conf, whose line gives its shape and port; any other name
        registers a dynamic node (`slurmd -Z`) with `cpus` CPUs, `memory_mb` MB and `features`, which runs
        real jobs. `boot` adds `-b` (report a boot now): slurmctld completes a power-up only for a node
        booted after it asked, and this slurmd shares the host's boot time (docs/slurm-releases.md, Power
        saving). `port`: the one its Slurm record was declared with (default: a free one). `gres` (e.g.
        "gpu:4") needs `GresTypes` in slurm.conf and the node's lines in etc/gres.conf (`write_gres`).
        """
        if not node or not node.replace("-", "").replace("_", "").isalnum():
            raise SandboxError(f"bad node name {node!r}: use letters, digits, '-' and '_'")
        if node != REAL_NODE and node in sim_node_names(self.nodes):
            raise SandboxError(
                f"{node} is a CLOUD node from slurm.conf: pick another name for a dynamic node"
            )
        argv = ["slurmd", "-D", "-f", f"{INNER}/etc/slurm.conf", "-N", node]
        if self.named_in_conf(node):
            argv[1:1] = ["-b"] if boot else []
        elif node != REAL_NODE:
            conf = f"CPUs={cpus} RealMemory={memory_mb} Port={port or free_port()} NodeAddr=127.0.0.1"
            if features:
                conf += f" Feature={','.join(features)}"
            if gres:
                conf += f" Gres={gres}"
            argv[1:1] = ["-Z", *(["-b"] if boot else []), "--conf", conf]
        spool = self.directory / "spool" / node
        spool.mkdir(parents=True, exist_ok=True)
        name = f"slurmd:{node}"
        self._spawn(name, argv)
        wait_until(
            lambda: self._registered(node), START_TIMEOUT_S, f"slurmd {node} registration",
            lambda: self.log_tail(name), lambda: self._exited(name),
        )  # fmt: skip

    def write_gres(self, node: str, name: str = "gpu", count: int = 4, kind: str = "") -> str:
        """Declares `count` devices of GRES `name` (of type `kind`, if given) on `node` in etc/gres.conf
        (stand-in device files under the instance directory, so Slurm hands out indices as on a GPU node) and
        returns the node's Gres string for `start_slurmd(gres=...)` (several: joined by commas). slurm.conf
        needs `GresTypes=<name>` (config.GRES in the tests' shared sandbox, or a private one's extra_conf)."""
        devices = self.directory / "dev"
        devices.mkdir(exist_ok=True)
        stem = f"{node}-{name}{kind}"
        for index in range(count):
            (devices / f"{stem}{index}").touch()
        typed = f" Type={kind}" if kind else ""
        with open(self.directory / "etc" / "gres.conf", "a") as conf:
            conf.write(f"NodeName={node} Name={name}{typed} File={INNER}/dev/{stem}[0-{count - 1}]\n")
        return f"{name}:{kind}:{count}" if kind else f"{name}:{count}"

    def named_in_conf(self, node: str) -> bool:
        """A node of this sandbox's own slurm.conf lines (`extra_conf`): a static record, never deleted."""
        return any(f"NodeName={node} " in f"{line} " for line in self.extra_conf)

    def stop_slurmd(self, node: str) -> None:
        """Stop a slurmd this sandbox started (its jobs' processes too). The node stays known."""
        self._stop(f"slurmd:{node}")

    def delete_node(self, node: str, timeout: float = 60) -> None:
        """Stop a dynamic node's slurmd and remove the node from slurmctld.

        Slurm refuses ("nodes are busy") while a job on it is still completing: retried until `timeout`.
        """
        if self.running(f"slurmd:{node}"):
            # a job still completing needs its slurmd to report the end; once slurmd is gone, Slurm holds
            # the node busy until it marks it down (SlurmdTimeout, 60 s here)
            deadline = time.monotonic() + timeout / 2
            while self.node_state(node) & BUSY_STATES and time.monotonic() < deadline:
                time.sleep(0.2)
        self.stop_slurmd(node)
        last = ""

        def deleted() -> bool:
            nonlocal last
            result = self.run("scontrol", "delete", f"nodename={node}", timeout=20)
            last = (result.stderr or result.stdout).strip()
            return result.returncode == 0

        def busy() -> str | None:
            return None if "busy" in last else f"scontrol delete nodename={node} failed: {last}"

        wait_until(deleted, timeout, f"delete node {node}", abort=busy)

    def _rest_answers(self, version: str = API_VERSION) -> bool:
        # An authenticated read (ping answers 200 even to a bad token): proves token and slurmctld link.
        token = self.token_file.read_text().strip()
        request = urllib.request.Request(
            f"{self.rest_url}/slurm/{version}/node/{REAL_NODE}", headers={"X-SLURM-USER-TOKEN": token}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def start_slurmrestd(self, api_versions: Sequence[str] = ()) -> None:
        """`api_versions` (e.g. ["v0.0.42"]): serve only those (`-d data_parser/<v>,...`: the data parsers
        loaded are the /slurm/<v> paths served, on both releases); empty: all of this release's."""
        parsers = ["-d", ",".join(f"data_parser/{v}" for v in api_versions)] if api_versions else []
        self._spawn(
            "slurmrestd",
            ["slurmrestd", "-s", "openapi/slurmctld", *parsers, f"127.0.0.1:{self.ports.rest}"],
            user=REST_USER, ctld_socket=False, jwt=True,
        )  # fmt: skip

        def why_not() -> str:
            busy = (
                ""
                if port_is_free(self.ports.rest)
                else f"port {self.ports.rest} is in use: pick another --port\n"
            )
            return busy + self.log_tail("slurmrestd")

        version = api_versions[0] if api_versions else API_VERSION
        wait_until(
            lambda: self._rest_answers(version), START_TIMEOUT_S,
            f"slurmrestd start on 127.0.0.1:{self.ports.rest}",
            why_not, lambda: self._exited("slurmrestd"),
        )  # fmt: skip

    def stop_slurmrestd(self) -> None:
        self._stop("slurmrestd")

    @property
    def rest_socket(self) -> Path:
        """Host path of the unix socket served by start_slurmrestd_unix()."""
        return self.directory / "run" / "rest" / "slurmrestd.sock"

    def start_slurmrestd_unix(self) -> Path:
        """A second slurmrestd on a unix socket with rest_auth/local (no token); returns the socket path.

        It identifies callers by the socket's peer credentials and talks to slurmctld as its own
        unprivileged user: reads work, node updates are refused (not an admin).
        """
        self.rest_socket.unlink(missing_ok=True)
        name = "slurmrestd:unix"
        inner = f"{INNER}/{self.rest_socket.relative_to(self.directory)}"
        # 24.11 takes "unix:PATH"; 25.11+ parses listeners as URLs and wants "unix://PATH".
        listener = f"unix:{inner}" if self.release.name == "24.11" else f"unix://{inner}"
        self._spawn(
            name, ["slurmrestd", "-a", "rest_auth/local", "-s", "openapi/slurmctld", listener],
            user=REST_USER,
        )  # fmt: skip
        wait_until(
            self._unix_rest_answers, START_TIMEOUT_S, f"slurmrestd start on unix:{self.rest_socket}",
            lambda: self.log_tail(name), lambda: self._exited(name),
        )  # fmt: skip
        return self.rest_socket

    def stop_slurmrestd_unix(self) -> None:
        self._stop("slurmrestd:unix")
        self.rest_socket.unlink(missing_ok=True)

    def _unix_rest_answers(self) -> bool:
        if not self.rest_socket.exists():
            return False
        connection = _UnixHTTPConnection(self.rest_socket)
        try:
            connection.request("GET", f"/slurm/{API_VERSION}/node/{REAL_NODE}")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def healthy(self) -> bool:
        return all(self.running(n) for n in ("slurmctld", "slurmrestd", f"slurmd:{REAL_NODE}"))

    def down(self) -> None:
        """Stop only what this sandbox started: slurmrestd and every slurmd first, slurmctld last."""
        for name in sorted(self.daemons, key=lambda n: (n == "slurmctld", n)):
            self._stop(name)

    # --- persistence --------------------------------------------------------------------
    @property
    def events_log(self) -> Path:
        """One line per daemon started or stopped, with PID and start time (for humans and tests)."""
        return self.directory / "log" / "events.log"

    def _record(self, event: str) -> None:
        with open(self.events_log, "a") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {event}\n")

    def _save(self) -> None:
        state = {
            "rootfs": str(self.rootfs), "release": self.release.name, "nodes": self.nodes,
            "max_dynamic": self.max_dynamic,
            "topology": self.topology, "keep_partitions": self.keep_partitions,
            "extra_conf": list(self.extra_conf),
            "ports": dataclasses.asdict(self.ports),
            "daemons": {name: [p.pid, p.start] for name, p in self.daemons.items()},
        }  # fmt: skip
        # unique per process and thread: a test's threads start and stop slurmds of one sandbox at once (two
        # saves under one name: the second rename found no file, FileNotFoundError in a power e2e run)
        tmp = self.directory / f"{STATE_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.directory / STATE_FILE)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=5)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        sock.connect(str(self.socket_path))
        self.sock = sock


def _recorded_daemons(state: dict[str, Any]) -> dict[str, ProcessId]:
    if "daemons" in state:
        return {name: ProcessId(int(v[0]), int(v[1])) for name, v in state["daemons"].items()}
    # Early state files had bare PIDs: adopt those that still run the right program.
    adopted = {}
    for name, pid in state["pids"].items():
        process = ProcessId.of(int(pid))
        if process is not None and process.runs(_program(name)):
            adopted[name] = process
    return adopted


def load(directory: Path) -> Sandbox | None:
    """The sandbox recorded in `directory` (None if none), with stale entries dropped.

    An entry is stale when its process is gone, or its PID now belongs to another process (other
    start time) or another program (checked in /proc/PID/cmdline).
    """
    directory = directory.resolve()
    path = directory / STATE_FILE
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        sandbox = Sandbox(
            directory=directory, rootfs=Path(state["rootfs"]), release=release(state.get("release", "24.11")),
            nodes=int(state["nodes"]),
            max_dynamic=int(state.get("max_dynamic", DEFAULT_MAX_DYNAMIC)), ports=Ports(**state["ports"]),
            topology=bool(state.get("topology", False)),
            keep_partitions=bool(state.get("keep_partitions", False)),
            extra_conf=tuple(str(line) for line in state.get("extra_conf", ())),
            daemons=_recorded_daemons(state),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise SandboxError(
            f"{path} is damaged ({exc}): stop leftover daemons by hand if any, remove {directory}, "
            "then run 'slurm-syncer sandbox up' again"
        ) from exc
    stale = [name for name in sandbox.daemons if not sandbox.running(name)]
    for name in stale:
        sandbox.daemons.pop(name)
    if stale:
        sandbox._save()
    return sandbox


@contextlib.contextmanager
def _instance_lock(directory: Path) -> Iterator[None]:
    """Serialise up/down of one instance directory across processes."""
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def up(
    directory: Path,
    nodes: int = 100,
    rest_port: int | None = None,
    max_dynamic: int = DEFAULT_MAX_DYNAMIC,
    slurm: str | None = None,
    topology: bool = False,
    keep_partitions: bool = False,
    extra_conf: Sequence[str] = (),
) -> Sandbox:
    """Start (or reuse) a sandbox: one real slurmd node plus `nodes` simulated CLOUD nodes.

    `slurm` names the release ("24.11", "26.05"); default: $SLURM_SYNCER_SLURM_RELEASE, else 26.05.
    `topology` (25.05+) adds topology.yaml with a block and a tree topology, each with its partition.
    `keep_partitions` adds `ReconfigFlags=KeepPartInfo` (what SlurmPartitions need; the tests' default
    sandbox has none, so that its refusal without it is tested). `extra_conf`: slurm.conf lines appended last
    (a private sandbox's PreemptType, partitions with GraceTime, ...; the shared test sandbox's only
    `config.TIERS`, which changes nothing for a job outside its partitions).

    Idempotent: a healthy sandbox with the same settings in `directory` is returned as it is; one with
    other settings is an error saying what to do. A failed start stops what it started and raises
    SandboxError with the failing daemon's last log lines.
    """
    if not 0 <= nodes <= MAX_SIM_NODES:
        raise SandboxError(f"--nodes must be between 0 and {MAX_SIM_NODES}, got {nodes}")
    if rest_port is not None and not 1024 <= rest_port <= 65535:
        raise SandboxError(f"--port must be between 1024 and 65535, got {rest_port}")
    wanted = release(slurm)
    if topology and not wanted.topology:
        raise SandboxError(
            f"a topology sandbox needs Slurm 25.05+ (topology.yaml); Slurm {wanted.name} has none"
        )
    check_host()
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    with _instance_lock(directory):
        existing = load(directory)
        if existing is not None and existing.daemons:
            if existing.healthy():
                same = (
                    existing.nodes == nodes
                    and existing.release == wanted
                    and existing.topology == topology
                    and existing.keep_partitions == keep_partitions
                    and existing.extra_conf == tuple(extra_conf)
                )
                if same and rest_port in (None, existing.ports.rest):
                    return existing
                raise SandboxError(
                    f"a Slurm {existing.release.name} sandbox with {existing.nodes} nodes on port "
                    f"{existing.ports.rest} already runs in "
                    f"{directory}: run 'slurm-syncer sandbox down --dir {directory}' first, "
                    "or use another --dir"
                )
            progress(f"a sandbox in {directory} is only partly running; stopping it to start clean")
            existing.down()
        rootfs = ensure_rootfs(wanted=wanted)
        previous = existing.ports if existing is not None else None
        for attempt in (1, 2):
            ports = _choose_ports(previous, rest_port)
            try:
                sandbox = _start(
                    directory, rootfs, wanted, nodes, ports, max_dynamic, topology, keep_partitions,
                    tuple(extra_conf),
                )  # fmt: skip
                break
            except SandboxError:
                # Another program may have taken a port between our choice and the daemon's bind.
                taken = [p for p in (ports.slurmctld, ports.slurmd) if not port_is_free(p)]
                if attempt == 2 or not taken:
                    raise
                progress(f"port {taken[0]} was taken meanwhile; retrying with other ports")
                previous = None
        progress("ready")
        return sandbox


def _choose_ports(previous: Ports | None, rest_port: int | None) -> Ports:
    """Free ports, keeping the previous run's where still free (so printed exports stay valid)."""

    def keep(port: int | None) -> int:
        return port if port is not None and port_is_free(port) else free_port()

    if previous is None:
        return Ports(slurmctld=free_port(), slurmd=free_port(), rest=rest_port or free_port())
    return Ports(
        slurmctld=keep(previous.slurmctld),
        slurmd=keep(previous.slurmd),
        rest=rest_port or keep(previous.rest),
    )


def _start(
    directory: Path,
    rootfs: Path,
    wanted: Release,
    nodes: int,
    ports: Ports,
    max_dynamic: int,
    topology: bool,
    keep_partitions: bool = False,
    extra_conf: tuple[str, ...] = (),
) -> Sandbox:
    """A fresh cluster (saved state and spools from an earlier run are removed; keys are kept)."""
    for sub in ("state", "spool", "work"):
        shutil.rmtree(directory / sub, ignore_errors=True)
    write_instance(
        directory,
        nodes,
        ports,
        max_dynamic,
        user_ids(rootfs, "slurm"),
        user_ids(rootfs, REST_USER),
        openmetrics=wanted.openmetrics,
        topology=topology,
        keep_partitions=keep_partitions,
        extra_conf=extra_conf,
    )
    sandbox = Sandbox(
        directory=directory,
        rootfs=rootfs,
        release=wanted,
        nodes=nodes,
        ports=ports,
        max_dynamic=max_dynamic,
        topology=topology,
        keep_partitions=keep_partitions,
        extra_conf=extra_conf,
    )
    sandbox._save()
    try:
        progress(f"starting Slurm {installed_slurm(rootfs)} slurmctld ({nodes} CLOUD nodes) in {directory}")
        sandbox.start_slurmctld()
        sandbox.token_file.write_text(sandbox.token(lifespan=TOKEN_LIFESPAN_S) + "\n")
        os.chmod(sandbox.token_file, 0o600)
        progress(f"starting slurmd for {REAL_NODE}")
        sandbox.start_slurmd(REAL_NODE)
        progress(f"starting slurmrestd on 127.0.0.1:{ports.rest}")
        sandbox.start_slurmrestd()
    except BaseException:
        sandbox.down()
        raise
    return sandbox


def down(directory: Path) -> bool:
    """Stop the sandbox recorded in `directory`; False when nothing was running there."""
    directory = directory.resolve()
    if not (directory / STATE_FILE).exists():
        return False
    with _instance_lock(directory):
        sandbox = load(directory)
        if sandbox is None:
            return False
        was_running = bool(sandbox.daemons)
        sandbox.down()
        return was_running
