"""Start an image's entrypoint the way the chart's container runs, without a container runtime (`podman
run` does not work on the CI machines): `python3 tests/e2e/pod_exec.py SPEC.json`, as root.

In a new mount and UTS namespace (the host's network namespace, so 127.0.0.1 is shared) it
  * sets the host name (the pod's name: the syncer's default identity),
  * builds the container's root read-only (readOnlyRootFilesystem): an overlay without an upper layer of
    the image's file system (`podman image mount`) and a layer holding only the empty mount points,
  * mounts what the pod spec mounts: tmpfs for each emptyDir, read-only binds for Secret and service
    account volumes (directories laid out by the test as the kubelet lays them out), a fresh /proc and a
    /dev with the usual device nodes,
  * chroots, sets the supplementary groups (fsGroup), no_new_privs (allowPrivilegeEscalation: false),
    the group and user (runAsGroup, runAsUser: every capability is gone once the user is not root),
  * and execs the entrypoint: the process keeps this one's PID, so the caller signals and measures the
    syncer itself.
Not reproduced: the seccomp profile, cgroup limits (resources), a PID namespace.

SPEC: {"image_root", "stage", "hostname", "uid", "gid", "groups", "workdir", "argv", "env",
       "tmpfs": [{"path", "size"}], "binds": [{"source", "path"}]}
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

CLONE_NEWNS, CLONE_NEWUTS = 0x00020000, 0x04000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        libc.mount(
            source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )  # fmt: skip


def inside(root: Path, path: str) -> Path:
    """`path` of the container, resolved within `root` (its symbolic links followed inside the image,
    e.g. /var/run -> /run), as a path relative to root. Mounting on a path with a link in it would
    follow the link out of the image."""
    parts = [p for p in path.split("/") if p]
    resolved: list[str] = []
    for _ in range(40):
        if not parts:
            return Path(*resolved) if resolved else Path(".")
        part = parts.pop(0)
        if part == "..":
            resolved = resolved[:-1]
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink():
            target = os.readlink(candidate)
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                resolved = []
            continue
        resolved.append(part)
    raise OSError(f"too many symbolic links resolving {path} in {root}")


def main(spec_file: str) -> None:
    spec: dict[str, Any] = json.loads(Path(spec_file).read_text())
    image, stage = Path(spec["image_root"]), Path(spec["stage"])
    points, newroot = stage / "mountpoints", stage / "root"
    targets = [t["path"] for t in spec["tmpfs"]] + [b["path"] for b in spec["binds"]] + ["/proc", "/dev"]
    relative = {target: inside(image, target) for target in targets}
    for rel in relative.values():
        if not (image / rel).is_dir():
            (points / rel).mkdir(parents=True, exist_ok=True)
    newroot.mkdir(parents=True, exist_ok=True)

    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWUTS), "unshare")
    mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
    socket.sethostname(spec["hostname"])
    mount("overlay", str(newroot), "overlay", MS_RDONLY, f"lowerdir={points}:{image}")
    for tmpfs in spec["tmpfs"]:
        mount("tmpfs", str(newroot / relative[tmpfs["path"]]), "tmpfs", MS_NOSUID | MS_NODEV,
              f"size={tmpfs['size']},mode=1777")  # fmt: skip
    for bind in spec["binds"]:
        target = str(newroot / relative[bind["path"]])
        mount(bind["source"], target, None, MS_BIND | MS_REC)
        mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    mount("proc", str(newroot / relative["/proc"]), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    dev = newroot / relative["/dev"]
    mount("tmpfs", str(dev), "tmpfs", MS_NOSUID, "size=64k,mode=755")
    for name in DEVICES:
        (dev / name).touch()
        mount(f"/dev/{name}", str(dev / name), None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, dev / name)

    os.chroot(newroot)
    os.chdir(spec["workdir"] or "/")
    os.setgroups(spec["groups"])
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    os.setresgid(spec["gid"], spec["gid"], spec["gid"])
    os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
