"""The only code that talks to the Kubernetes API.

client = await KubeClient.from_config(kubeconfig_path)       # None: in-cluster
cache = KubeCache(client); cache.start(); await cache.wait_synced()
cache.subscribe(lambda slurm_names: ...)                       # which Slurm nodes to re-check
gate = WriteGate(dry_run=False)                                # syncer/control/gate.py
elector = LeaderElector(client, gate, namespace="slurm", name="slurm-syncer", identity=host,
                        lease_duration_s=15, renew_deadline_s=10, retry_period_s=2)
writer = KubeWriter(client, gate); events = EventRecorder(client, gate)
pods = SchedulerPods(client, "slurm-syncer", ("inference",))   # the pods a scheduler name owns
reads = SchedulingReads(client)                                # a pod, a Job, the pods on a Node, fresh
await writer.bind(namespace, name, uid, node)                  # -> Outcome
"""

from syncer.kube.cache import KubeCache
from syncer.kube.client import KubeClient
from syncer.kube.errors import KubeConnectionError, KubeError
from syncer.kube.events import EventRecorder, ObjectRef
from syncer.kube.informer import Informer
from syncer.kube.leader import LeaderElector
from syncer.kube.scheduler_pods import SchedulerPods
from syncer.kube.scheduling_reads import SchedulingReads
from syncer.kube.writer import KubeWriter, Outcome, assigned_node, node_path, pod_path

__all__ = [
    "EventRecorder", "Informer", "KubeCache", "KubeClient", "KubeConnectionError", "KubeError", "KubeWriter",
    "LeaderElector", "ObjectRef", "Outcome", "SchedulerPods", "SchedulingReads", "assigned_node", "node_path",
    "pod_path",
]  # fmt: skip
