"""The cached Debian trixie root file system with Slurm 24.11 that every sandbox shares."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
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


def _progress(message: str) -> None:
    print(f"sandbox: {message}", file=sys.stderr, flush=True)


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise SandboxError(f"{what} failed (exit {result.returncode}):\n{tail}")


def in_chroot_shell(root: Path, script: str) -> list[str]:
    """argv that runs `script` in `root` with /proc and /dev mounted in a private mount namespace."""
    mounts = f'mount -t proc proc "{root}/proc" && mount --rbind /dev "{root}/dev"'
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        f"{mounts} && exec chroot \"{root}\" sh -c '{script}'",
    ]


def _check_host() -> None:
    if os.geteuid() != 0:
        raise SandboxError("the Slurm sandbox needs root (chroot, mount namespaces): run it as root")
    for tool in ("debootstrap", "unshare", "chroot"):
        if shutil.which(tool) is None:
            raise SandboxError(f"'{tool}' is missing: run scripts/bootstrap (it installs debootstrap)")


def ensure_rootfs(base: Path | None = None) -> Path:
    """The ready root file system, built on first use (about 30 s) and reused afterwards."""
    base = base or cache_dir()
    target = base / "rootfs-trixie"
    marker = target / MARKER
    if marker.exists() and marker.read_text().strip() == ROOTFS_VERSION:
        return target
    _check_host()
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "rootfs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same tree
        if marker.exists() and marker.read_text().strip() == ROOTFS_VERSION:
            return target
        build = Path(tempfile.mkdtemp(prefix="rootfs-build-", dir=base))
        os.chmod(build, 0o755)  # mkdtemp makes 0700; daemons and apt users must traverse it
        try:
            _progress(f"building a Debian trixie root file system in {build} (about 30 s, once)")
            _run(["debootstrap", "--variant=minbase", "trixie", str(build), MIRROR], "debootstrap trixie")
            _progress("installing Slurm 24.11 into it: " + " ".join(SLURM_PACKAGES))
            install = (
                "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                "--no-install-recommends " + " ".join(SLURM_PACKAGES) + " >/dev/null && apt-get clean"
                f" && useradd --system --no-create-home --shell /usr/sbin/nologin {REST_USER}"
                " && mkdir -p /sbx"
            )
            _run(in_chroot_shell(build, install), "installing Slurm in the root file system")
            (build / MARKER).write_text(ROOTFS_VERSION + "\n")
            if target.exists():
                shutil.rmtree(target)
            build.rename(target)
            _progress(f"root file system ready at {target}")
        finally:
            if build.exists():
                shutil.rmtree(build, ignore_errors=True)
    return target
