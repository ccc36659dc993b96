"""A faithful Kubernetes API emulator for tests, the demo and the benchmarks (docs/emulator.md).

async with KubeApiEmulator() as kube:
    kube.seed(SeedOptions(nodes=10))
    kube.write_kubeconfig(path)       # kubectl and the syncer use it
    kube.faults.fail_next(3, 429)     # break it
"""

from syncer.testing.kubeapi.emulator import KubeApiEmulator, SeedOptions, bundled_crds
from syncer.testing.kubeapi.errors import ApiError

__all__ = ["ApiError", "KubeApiEmulator", "SeedOptions", "bundled_crds"]
