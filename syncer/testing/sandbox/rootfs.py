"""The cached Debian trixie root file system with Slurm 24.11 that every sandbox shares."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Bump when the recipe changes so an older cached tree is rebuilt instead of reused.
ROOTFS_VERSION = "2"
MARKER = ".slurm-syncer-rootfs"
SLURM_PACKAGES = ("munge", "slurmctld", "slurmd", "slurmrestd", "slurm-client", "slurm-wlm-jwt-plugin")
REST_USER = "slurmrest"
MIRROR = os.environ.get("SLURM_SYNCER_DEBIAN_MIRROR", "http://deb.debian.org/debian")


class SandboxError(RuntimeError):
    """The sandbox could not be built, started or stopped; the message says what to do."""


def cache_dir() -> Path:
    env = os.environ.get("SLURM_SYNCER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "slurm-syncer"


def progress(message: str) -> None:
    print(f"sandbox: {message}", file=sys.stderr, flush=True)


def check_host(*tools: str) -> None:
    """Fail with what to do when we are not root or a needed host tool is missing."""
    if os.geteuid() != 0:
        raise SandboxError(
            "the Slurm sandbox needs root (chroot, mount namespaces): run it as root, e.g. with sudo"
        )
    for tool in ("unshare", "chroot", "mount", *tools):
        if shutil.which(tool) is None:
            raise SandboxError(f"'{tool}' is missing on this host: run scripts/bootstrap (as root) first")


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise SandboxError(f"{what} failed (exit {result.returncode}):\n{tail}")


def _in_chroot(root: Path, script: str) -> list[str]:
    """argv running `script` in `root` with /proc and /dev mounted in a private mount namespace."""
    return [
        "unshare", "--mount", "--propagation", "private", "--", "sh", "-ec",
        f'mount -t proc proc "{root}/proc"; mount --rbind /dev "{root}/dev"; '
        f'exec chroot "{root}" sh -ec "$0"',
        script,
    ]  # fmt: skip


def _ready(target: Path) -> bool:
    marker = target / MARKER
    try:
        return marker.read_text().strip() == ROOTFS_VERSION
    except OSError:
        return False


def ensure_rootfs(base: Path | None = None) -> Path:
    """The ready root file system, built on first use (about 30 s) and reused afterwards.

    Built in a temporary directory and renamed into place, under an flock, so a concurrent builder
    waits and a half-built tree (no marker) is never used.
    """
    base = base or cache_dir()
    target = base / "rootfs-trixie"
    if _ready(target):
        return target
    check_host("debootstrap")
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "rootfs.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"another process is building {target}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if _ready(target):
            return target
        started = time.monotonic()
        build = Path(tempfile.mkdtemp(prefix="rootfs-build-", dir=base))
        os.chmod(build, 0o755)  # mkdtemp makes 0700; daemons running as other users must traverse it
        try:
            progress(f"building a Debian trixie root file system in {build} (once; about 30 s)")
            _run(["debootstrap", "--variant=minbase", "trixie", str(build), MIRROR], "debootstrap trixie")
            progress("installing Slurm 24.11 into it: " + " ".join(SLURM_PACKAGES))
            install = (
                "apt-get update -qq\n"
                "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
                + " ".join(SLURM_PACKAGES)
                + " >/dev/null\n"
                "apt-get clean\n"
                "rm -rf /var/lib/apt/lists/*\n"
                f"useradd --system --no-create-home --shell /usr/sbin/nologin {REST_USER}\n"
                "mkdir -p /sbx\n"
            )
            _run(_in_chroot(build, install), "installing Slurm in the root file system")
            (build / MARKER).write_text(ROOTFS_VERSION + "\n")
            if target.exists():
                old = base / f"rootfs-old-{os.getpid()}"
                target.rename(old)  # running sandboxes keep their (now unlinked) tree
                shutil.rmtree(old, ignore_errors=True)
            build.rename(target)
            progress(f"root file system ready at {target} ({time.monotonic() - started:.0f} s)")
        finally:
            if build.exists():
                shutil.rmtree(build, ignore_errors=True)
    return target


def user_ids(rootfs: Path, user: str) -> tuple[int, int]:
    """uid and gid of `user` in the root file system's /etc/passwd."""
    for line in (rootfs / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) > 3 and fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise SandboxError(f"user {user!r} is missing in {rootfs}: remove that directory so it is rebuilt")
