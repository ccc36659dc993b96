"""The real API server's build cache and start-up failures: a clear error naming what failed, never a
half-built cache used."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.testing.kubeapi_real import Binaries, RealKubeApi, RealKubeApiError
from syncer.testing.kubeapi_real.build import MARKER, _ready, cache_path, kube_version, recipe_id


def test_the_kubernetes_version_comes_from_the_source_package():
    assert kube_version("0.36.4-1") == "v1.36.4"
    assert kube_version("0.37.0~rc1-2") == "v1.37.0"
    with pytest.raises(RealKubeApiError, match=r"golang-k8s-apiextensions-apiserver-dev '1\.2'"):
        kube_version("1.2")


def test_a_cache_is_used_only_when_complete_and_of_this_recipe(tmp_path: Path):
    target = cache_path(tmp_path)
    assert _ready(target) is None
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "slurm-syncer-kubeapi").write_bytes(b"")
    assert _ready(target) is None, "no marker: a build that did not finish"
    (target / MARKER).write_text(f"{recipe_id()}\nv1.36.4\n")
    assert _ready(target) is None, "etcd missing"
    (target / "bin" / "etcd").write_bytes(b"")
    found = _ready(target)
    assert found is not None and found.version == "v1.36.4"
    (target / MARKER).write_text("0123456789abcdef\nv1.36.4\n")
    assert _ready(target) is None, "another main.go or recipe: rebuilt"


def test_a_server_that_cannot_start_fails_with_its_log(tmp_path: Path):
    broken = Binaries(Path("/bin/false"), Path("/bin/false"), "v1.36.4")
    server = RealKubeApi(tmp_path, binaries=broken)
    with pytest.raises(RealKubeApiError, match=r"etcd exited with 1 at start; its log \(.*etcd.log\)"):
        server.start()
    server.stop()  # nothing left running: stop is idempotent
