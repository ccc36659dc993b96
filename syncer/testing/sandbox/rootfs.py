"""The cached Debian root file systems with Slurm, one per release (trixie: 24.11, sid: 26.05)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from syncer.testing.sandbox.errors import SandboxError
from syncer.testing.sandbox.releases import Release, release

# Bump when the recipe changes so an older cached tree is rebuilt instead of reused.
ROOTFS_VERSION = "3"
MARKER = ".slurm-syncer-rootfs"
SLURM_PACKAGES = ("munge", "slurmctld", "slurmd", "slurmrestd", "slurm-client", "slurm-wlm-jwt-plugin")
REST_USER = "slurmrest"
MIRROR = os.environ.get("SLURM_SYNCER_DEBIAN_MIRROR", "http://deb.debian.org/debian")


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
        return marker.read_text().splitlines()[0].strip() == ROOTFS_VERSION
    except (OSError, IndexError):
        return False


def rootfs_path(wanted: Release, base: Path | None = None) -> Path:
    return (base or cache_dir()) / f"rootfs-{wanted.suite}"


def installed_slurm(rootfs: Path) -> str:
    """The Slurm version recorded when `rootfs` was built (e.g. "26.05.5-1"), or "" if unknown."""
    try:
        lines = (rootfs / MARKER).read_text().splitlines()
    except OSError:
        return ""
    return lines[1].strip() if len(lines) > 1 else ""


def _install_script(wanted: Release) -> str:
    apt = " ".join(("apt-get", *wanted.apt_options))
    return (
        f"{apt} update -qq\n"
        f"DEBIAN_FRONTEND=noninteractive {apt} install -y -qq --no-install-recommends "
        + " ".join(SLURM_PACKAGES)
        + " >/dev/null\n"
        "apt-get clean\n"
        "rm -rf /var/lib/apt/lists/*\n"
        f"useradd --system --no-create-home --shell /usr/sbin/nologin {REST_USER}\n"
        "mkdir -p /sbx\n"
    )


def _slurm_version(root: Path) -> str:
    result = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f=${Version}", "slurmctld"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return result.stdout.strip()


def check_release(wanted: Release, version: str) -> None:
    """Fail, naming what the archive offers, when the installed Slurm is not the release asked for."""
    if not version.startswith(wanted.name + "."):
        raise SandboxError(
            f"Slurm {wanted.name} was asked for, but Debian {wanted.suite} offers Slurm "
            f"{version or '(no slurmctld package)'}: choose the release that suite carries "
            f"(--slurm or $SLURM_SYNCER_SLURM_RELEASE), or point SLURM_SYNCER_DEBIAN_MIRROR at an archive "
            f"that has {wanted.name}"
        )


def ensure_rootfs(base: Path | None = None, wanted: Release | None = None) -> Path:
    """The ready root file system of `wanted` (default: the selected release), built on first use.

    Built in a temporary directory and renamed into place, under an flock, so a concurrent builder
    waits and a half-built tree (no marker) is never used. About 30 s for trixie, 1-2 min for sid.
    """
    wanted = wanted or release()
    base = base or cache_dir()
    target = rootfs_path(wanted, base)
    if _ready(target):
        check_release(wanted, installed_slurm(target))
        return target
    check_host("debootstrap")
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"rootfs-{wanted.suite}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"another process is building {target}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if _ready(target):
            check_release(wanted, installed_slurm(target))
            return target
        started = time.monotonic()
        build = Path(tempfile.mkdtemp(prefix=f"rootfs-{wanted.suite}-build-", dir=base))
        os.chmod(build, 0o755)  # mkdtemp makes 0700; daemons running as other users must traverse it
        try:
            progress(f"building a Debian {wanted.suite} root file system in {build} (once; 1-2 min)")
            _run(
                ["debootstrap", "--variant=minbase", wanted.suite, str(build), MIRROR],
                f"debootstrap {wanted.suite}",
            )
            progress(f"installing Slurm {wanted.name} into it: " + " ".join(SLURM_PACKAGES))
            _run(_in_chroot(build, _install_script(wanted)), "installing Slurm in the root file system")
            version = _slurm_version(build)
            check_release(wanted, version)
            (build / MARKER).write_text(f"{ROOTFS_VERSION}\n{version}\n")
            replace_tree(target, build)
            took = time.monotonic() - started
            progress(f"root file system with Slurm {version} ready at {target} ({took:.0f} s)")
        finally:
            if build.exists():
                shutil.rmtree(build, ignore_errors=True)
    return target


def in_use(tree: Path) -> list[int]:
    """PIDs of the processes whose root directory is `tree` or inside it (a sandbox's chrooted daemons)."""
    inside = os.path.realpath(tree)
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            root = os.readlink(entry / "root")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if root == inside or root.startswith(inside + "/"):
            pids.append(int(entry.name))
    return pids


def replace_tree(target: Path, build: Path) -> None:
    """`build` becomes `target`. The tree it replaces is moved aside (a running sandbox keeps using it where
    it is) and removed only when no process runs in it; set-aside trees whose sandboxes have ended since
    are removed too."""
    base = target.parent
    if target.exists():
        target.rename(base / f"{target.name}-old-{os.getpid()}-{time.monotonic_ns()}")
    build.rename(target)
    for old in sorted(base.glob(f"{target.name}-old-*")):
        if users := in_use(old):
            progress(f"keeping {old}: sandbox processes {users[:5]} still run from it")
            continue
        shutil.rmtree(old, ignore_errors=True)


def user_ids(rootfs: Path, user: str) -> tuple[int, int]:
    """uid and gid of `user` in the root file system's /etc/passwd."""
    for line in (rootfs / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) > 3 and fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise SandboxError(f"user {user!r} is missing in {rootfs}: remove that directory so it is rebuilt")
