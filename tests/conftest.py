"""Shared fixtures: the real Slurm sandbox and the Kubernetes API emulator (session scope)."""

pytest_plugins = ["tests.fixtures.slurm", "tests.fixtures.kube"]
