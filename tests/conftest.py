"""Shared fixtures: the real Slurm sandbox, the Kubernetes API emulator and the real API server."""

pytest_plugins = [
    "tests.fixtures.slurm",
    "tests.fixtures.kube",
    "tests.fixtures.kube_real",
    "tests.fixtures.kube_targets",
]
