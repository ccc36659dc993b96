"""Credentials are looked for in client-go's order: --kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.kube.errors import KubeError
from syncer.kube.kubeconfig import resolve


def test_the_order_is_flag_then_env_then_home_then_in_cluster(tmp_path: Path) -> None:
    flag, env_a, env_b = (tmp_path / name for name in ("flag", "a", "b"))
    for path in (flag, env_a, env_b):
        path.write_text("apiVersion: v1\n")
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\n")
    listed = {"KUBECONFIG": f"{tmp_path / 'missing'}:{env_a}:{env_b}"}
    assert resolve(str(flag), listed, home).files == (str(flag),)
    by_env = resolve(None, listed, home)
    assert by_env.files == (str(env_a), str(env_b)) and by_env.origin.startswith("KUBECONFIG (")
    assert resolve(None, {}, home).files == (str(home / ".kube" / "config"),)
    assert resolve(None, {"KUBECONFIG": ""}, home).files == (str(home / ".kube" / "config"),)
    nothing = resolve(None, {}, tmp_path / "empty-home")
    assert nothing.in_cluster and nothing.origin == "the in-cluster service account"


def test_a_kubeconfig_that_names_nothing_usable_says_what_to_fix(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match=r"from --kubeconfig .*/nope: no such file"):
        resolve(str(tmp_path / "nope"), {}, tmp_path)
    with pytest.raises(KubeError, match="none of those files exists; fix KUBECONFIG or unset it"):
        resolve(None, {"KUBECONFIG": f"{tmp_path / 'x'}:{tmp_path / 'y'}"}, tmp_path)
