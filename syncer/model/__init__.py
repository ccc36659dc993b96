"""Small typed value objects shared by every layer: no I/O here."""

from syncer.model.keys import ANNOTATION_PREFIX, Keys
from syncer.model.kube import Condition, KubeNode, KubePod
from syncer.model.slurm import SlurmNode

__all__ = ["ANNOTATION_PREFIX", "Condition", "Keys", "KubeNode", "KubePod", "SlurmNode"]
