"""slurm-syncer: keeps Slurm and Kubernetes in agreement about the same machines."""

__version__ = "0.1.0"
