"""Launching commands inside the shared root file system and telling our processes from strangers.

Each command runs as `unshare --mount` + `sh` + `exec env` + `exec chroot` + `exec <program>`, so the
PID we get is the program's own and its mounts (/proc, /sys, /dev, a private /run and the instance
directory at /sbx) exist only in its private mount namespace: they vanish with it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from syncer.testing.sandbox.config import INNER
from syncer.testing.sandbox.errors import SandboxError

PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
WORK = f"{INNER}/work"


def chroot_argv(
    rootfs: Path,
    instance: Path,
    argv: Sequence[str],
    *,
    user: str | None = None,
    env: Mapping[str, str] | None = None,
    ctld_socket: bool = True,
) -> list[str]:
    """argv that runs `argv` inside `rootfs` with the instance directory at /sbx.

    /run is a fresh tmpfs per process: slurmd and slurmctld put their auth sockets under /run, and
    the rootfs is shared by every sandbox. `ctld_socket` mounts this instance's slurmctld socket
    directory at /run/slurmctld, where client commands look for it.
    """
    root = shlex.quote(str(rootfs))
    hosts = shlex.quote(str(instance / "etc" / "hosts"))
    environment = {"SLURM_CONF": f"{INNER}/etc/slurm.conf", "PATH": PATH, "HOME": "/root", **(env or {})}
    # cd to the instance's work directory, so jobs (whose cwd is the submitter's) write their
    # slurm-N.out there and not into the shared rootfs.
    inside = ["/bin/sh", "-c", f'cd {WORK} 2>/dev/null || cd /; exec "$0" "$@"', *argv]
    chroot = ["chroot", *([f"--userspec={user}:{user}"] if user else []), str(rootfs), *inside]
    steps = [
        f"mount -t proc proc {root}/proc",
        f"mount -t sysfs -o ro sysfs {root}/sys",
        f"mount --rbind /dev {root}/dev",
        f"mount -t tmpfs -o mode=755 tmpfs {root}/run",
        f"mkdir -p {root}/run/slurmctld {root}/run/lock",
        f"mount --bind {shlex.quote(str(instance))} {root}{INNER}",
        # The instance's hosts file over the rootfs one (made empty first if missing, as a mount point).
        f"if [ -e {hosts} ]; then [ -e {root}/etc/hosts ] || : > {root}/etc/hosts; "
        f"mount --bind {hosts} {root}/etc/hosts; fi",
    ]
    if ctld_socket:
        steps.append(f"mount --bind {shlex.quote(str(instance / 'run' / 'ctld'))} {root}/run/slurmctld")
    exec_line = "exec env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in environment.items())
    script = "; ".join([*steps, exec_line + " " + " ".join(shlex.quote(part) for part in chroot)])
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script]


@dataclass(frozen=True)
class ProcessId:
    """A PID plus its start time (clock ticks since boot): a reused PID has another start time."""

    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        start = start_time(pid)
        return None if start is None else cls(pid, start)

    def alive(self) -> bool:
        return start_time(self.pid) == self.start

    def runs(self, program: str) -> bool:
        """Alive and (already) executing `program`, not some other program that got the PID."""
        return self.alive() and runs_program(self.pid, program)


def start_time(pid: int) -> int | None:
    """Start time of a live (not zombie) process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


LAUNCHERS = ("unshare", "sh", "env", "chroot")  # what a PID runs before the exec chain reaches the daemon


def runs_program(pid: int, program: str) -> bool:
    """The PID runs `program`, or is still in our launch chain on its way to exec it."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    first = os.path.basename(cmdline[0])
    if first == program:
        return True
    return first in LAUNCHERS and any(program in part for part in cmdline[1:])


def mount_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def processes_in(namespace: str) -> list[int]:
    """Live (not zombie) processes in a mount namespace."""
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [pid for pid in pids if mount_namespace(pid) == namespace and start_time(pid) is not None]


def kill_namespace(namespace: str, timeout: float = 10) -> None:
    """SIGKILL every process left in a mount namespace we created (job steps, user tasks)."""
    if namespace == mount_namespace(os.getpid()):
        return  # never the host's own namespace

    def gone() -> bool:
        # killed again on every look: a process forked between a look and its kill (a job step's helper)
        # would otherwise outlive the wait
        left = processes_in(namespace)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return not left

    wait_until(gone, timeout, f"processes in {namespace} to end")


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    explain: Callable[[], str] = lambda: "",
    abort: Callable[[], str | None] = lambda: None,
) -> None:
    """Poll `check` until true; raise with `explain()` on timeout, or at once when `abort()` says why."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        if check():
            return
        reason = abort()
        if reason:
            raise SandboxError(f"{what}: {reason}\n{explain()}")
        if time.monotonic() >= deadline:
            raise SandboxError(f"{what}: not done within {timeout:.0f} s\n{explain()}")
        time.sleep(delay)  # back-off between polls of a condition, bounded by the deadline
        delay = min(delay * 1.5, 0.5)


def terminate(process: ProcessId, timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL after `timeout`; then kill anything left in its mount namespace."""
    namespace = mount_namespace(process.pid) if process.alive() else None
    # An open handle keeps the namespace alive: once its last process is gone the kernel could
    # otherwise give its inode number to a new namespace (say, a concurrent sinfo's) and we would
    # kill that process instead.
    handle = _open_namespace(process.pid) if namespace is not None else None
    try:
        if process.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                wait_until(lambda: not process.alive(), timeout, f"pid {process.pid} stop")
            except SandboxError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                wait_until(lambda: not process.alive(), 5, f"pid {process.pid} kill")
        if namespace is not None and handle is not None:
            kill_namespace(namespace)
    finally:
        if handle is not None:
            os.close(handle)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(process.pid, os.WNOHANG)  # reap it when it was our child


def _open_namespace(pid: int) -> int | None:
    try:
        return os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    except OSError:
        return None
