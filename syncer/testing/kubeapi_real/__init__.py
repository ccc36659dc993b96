"""A real Kubernetes API server for tests: k8s.io/apiextensions-apiserver with our own main, on etcd.

It serves CRDs and custom resources with the genuine machinery of kube-apiserver 1.36 (no Pods, Nodes,
Events, Leases). Built once per machine (build.py), run by server.py. See docs/emulator.md.
"""

from syncer.testing.kubeapi_real.build import Binaries, ensure_built
from syncer.testing.kubeapi_real.errors import RealKubeApiError
from syncer.testing.kubeapi_real.server import RealKubeApi

__all__ = ["Binaries", "RealKubeApi", "RealKubeApiError", "ensure_built"]
