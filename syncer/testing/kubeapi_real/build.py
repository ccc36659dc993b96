"""Building the real API server once per machine: a Debian sid tree with Go, etcd and the source of
k8s.io/apiextensions-apiserver, our main.go compiled in it, and only the two binaries kept.

Cached in `$SLURM_SYNCER_CACHE/kubeapi-real` (beside the Slurm root file systems), built in a temporary
directory under an flock and renamed into place, so a concurrent builder waits and a half-built cache is
never used. The 2.5 GB Go tree is deleted afterwards: a change of main.go (or of this recipe) rebuilds
from nothing, about 5 minutes on 2 cores.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from syncer.testing.kubeapi_real.errors import RealKubeApiError
from syncer.testing.sandbox.errors import SandboxError
from syncer.testing.sandbox.releases import RELEASES
from syncer.testing.sandbox.rootfs import MIRROR, _in_chroot, _run, cache_dir, check_host

# Bump when the recipe changes (packages, flags), so an older cache is rebuilt instead of reused.
RECIPE_VERSION = "1"
MARKER = ".slurm-syncer-kubeapi-real"
SUITE = "sid"  # the only suite with golang-k8s-apiextensions-apiserver-dev 0.36
BUILD_PACKAGES = ("golang-go", "etcd-server", "golang-k8s-apiextensions-apiserver-dev")
SOURCE_PACKAGE = "golang-k8s-apiextensions-apiserver-dev"
APISERVER = "slurm-syncer-kubeapi"
ETCD = "etcd"


def say(message: str) -> None:
    print(f"kubeapi-real: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Binaries:
    apiserver: Path
    etcd: Path
    version: str  # the Kubernetes version served, e.g. "v1.36.4"


def main_source() -> bytes:
    return (resources.files("syncer.testing.kubeapi_real") / "main.go").read_bytes()


def recipe_id() -> str:
    """Changes when main.go or the recipe changes: the cache is rebuilt then."""
    return hashlib.sha256(RECIPE_VERSION.encode() + b"\0" + main_source()).hexdigest()[:16]


def cache_path(base: Path | None = None) -> Path:
    return (base or cache_dir()) / "kubeapi-real"


def _ready(target: Path) -> Binaries | None:
    try:
        recipe, version = (target / MARKER).read_text().split()[:2]
    except (OSError, ValueError):
        return None
    binaries = Binaries(target / "bin" / APISERVER, target / "bin" / ETCD, version)
    if recipe != recipe_id() or not binaries.apiserver.is_file() or not binaries.etcd.is_file():
        return None
    return binaries


def kube_version(package_version: str) -> str:
    """v1.36.4 from the Debian version of the apiextensions source package, e.g. 0.36.4-1."""
    upstream = package_version.split("-", 1)[0].split("+", 1)[0].split("~", 1)[0]
    parts = upstream.split(".")
    if len(parts) < 3 or parts[0] != "0" or not all(p.isdigit() for p in parts[:3]):
        raise RealKubeApiError(
            f"{SOURCE_PACKAGE} {package_version!r} is not a 0.MINOR.PATCH version: the recipe in "
            f"{__file__} expects k8s.io/apiextensions-apiserver's own versioning"
        )
    return f"v1.{parts[1]}.{parts[2]}"


def _go_build(root: Path, version: str) -> None:
    """Compile main.go in the chroot, reporting progress by packages compiled (go build -v)."""
    minor = version.split(".")[1]
    ldflags = (
        f"-s -w -X k8s.io/component-base/version.gitVersion={version} "
        "-X k8s.io/component-base/version.gitMajor=1 "
        f"-X k8s.io/component-base/version.gitMinor={minor}"
    )
    script = (
        f"cd /build/src/{APISERVER}\n"
        f"GO111MODULE=off GOPATH=/build:/usr/share/gocode GOCACHE=/build/cache GOFLAGS= "
        f'go build -v -trimpath -ldflags "{ldflags}" -o /build/{APISERVER} . 2>&1\n'
    )
    process = subprocess.Popen(_in_chroot(root, script), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    tail: deque[str] = deque(maxlen=15)
    for compiled, line in enumerate(process.stdout, start=1):
        tail.append(line.rstrip())
        if compiled % 200 == 0:
            say(f"go build: {compiled} packages compiled")
    if process.wait() != 0:
        raise RealKubeApiError(
            f"go build of {APISERVER} failed (exit {process.returncode}):\n" + "\n".join(tail)
        )


def _installed(root: Path, package: str) -> str:
    result = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f=${Version}", package],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return result.stdout.strip()


def _build(work: Path, out: Path) -> str:
    root = work / "root"
    say(f"building the real Kubernetes API server (once per machine, about 5 min; in {work})")
    say(f"debootstrap Debian {SUITE} with Go ({MIRROR})")
    _run(["debootstrap", "--variant=minbase", SUITE, str(root), MIRROR], f"debootstrap {SUITE}")
    apt = " ".join(("apt-get", *RELEASES["26.05"].apt_options))  # sid's apt options
    say("installing " + " ".join(BUILD_PACKAGES) + " (about 360 MB download, 2.5 GB installed)")
    _run(
        _in_chroot(
            root,
            f"{apt} update -qq\nDEBIAN_FRONTEND=noninteractive {apt} install -y -qq "
            "--no-install-recommends " + " ".join(BUILD_PACKAGES) + " >/dev/null\n",
        ),
        "installing Go, etcd and the apiextensions-apiserver source",
    )
    version = kube_version(_installed(root, SOURCE_PACKAGE))
    say(f"compiling {APISERVER} on k8s.io/apiextensions-apiserver {version} (about 3 min on 2 cores)")
    source = root / "build" / "src" / APISERVER
    source.mkdir(parents=True)
    (source / "main.go").write_bytes(main_source())
    _go_build(root, version)
    (out / "bin").mkdir(parents=True)
    shutil.copy2(root / "build" / APISERVER, out / "bin" / APISERVER)
    shutil.copy2(root / "usr" / "bin" / "etcd", out / "bin" / ETCD)
    for binary, flag in ((ETCD, "--version"), (APISERVER, "--help")):
        _run([str(out / "bin" / binary), flag], f"running the built {binary} on this host")
    etcd_version = _installed(root, "etcd-server")
    (out / MARKER).write_text(f"{recipe_id()}\n{version}\netcd {etcd_version}\n")
    return version


def ensure_built(base: Path | None = None) -> Binaries:
    """The cached apiserver and etcd binaries, built on first use (see the module's docstring)."""
    base = base or cache_dir()
    target = cache_path(base)
    found = _ready(target)
    if found:
        return found
    try:
        check_host("debootstrap")
    except SandboxError as error:
        raise RealKubeApiError(f"cannot build the real Kubernetes API server: {error}") from None
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "kubeapi-real.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another process is building {target}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        found = _ready(target)
        if found:
            return found
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="kubeapi-real-build-", dir=base))
        try:
            out = work / "out"
            try:
                version = _build(work, out)
            except SandboxError as error:
                raise RealKubeApiError(f"building the real Kubernetes API server: {error}") from None
            if target.exists():
                old = base / f"kubeapi-real-old-{os.getpid()}"
                target.rename(old)  # running servers keep their (now unlinked) binaries
                shutil.rmtree(old, ignore_errors=True)
            out.rename(target)
            say(f"{APISERVER} {version} and etcd ready in {target} ({time.monotonic() - started:.0f} s)")
        finally:
            if work.exists():
                say(f"removing the build tree {work}")
                shutil.rmtree(work, ignore_errors=True)
    found = _ready(target)
    if found is None:
        raise RealKubeApiError(f"{target} is incomplete right after its build: remove it and try again")
    return found
