"""Where Kubernetes credentials come from, in client-go's order: --kubeconfig, else $KUBECONFIG (a
colon-separated list, merged), else ~/.kube/config, else the in-cluster service account."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from syncer.kube.errors import config_error


@dataclass(frozen=True)
class CredentialSource:
    """`files` to merge (empty: in-cluster), and `origin` in words for `check` and error messages."""

    files: tuple[str, ...]
    origin: str

    @property
    def in_cluster(self) -> bool:
        return not self.files


def resolve(
    explicit: str | None, env: Mapping[str, str] | None = None, home: Path | None = None
) -> CredentialSource:
    env = os.environ if env is None else env
    if explicit:
        if not Path(explicit).expanduser().is_file():
            raise config_error(
                f"cannot load Kubernetes credentials from --kubeconfig {explicit}: no such file"
            )
        return CredentialSource((str(Path(explicit).expanduser()),), f"--kubeconfig {explicit}")
    listed = env.get("KUBECONFIG", "")
    if listed:
        paths = [str(Path(p).expanduser()) for p in listed.split(os.pathsep) if p]
        present = tuple(p for p in paths if Path(p).is_file())
        if not present:
            raise config_error(
                f"cannot load Kubernetes credentials: KUBECONFIG names {listed!r}, but none of those files "
                "exists; fix KUBECONFIG or unset it"
            )
        return CredentialSource(present, f"KUBECONFIG ({os.pathsep.join(present)})")
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return CredentialSource((str(default),), f"{default}")
    return CredentialSource((), "the in-cluster service account")
