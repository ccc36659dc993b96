"""Every annotation, label, condition and finalizer key the syncer reads or writes."""

from typing import Final

ANNOTATION_PREFIX: Final = "slurm-syncer.dev/"
# The value of Keys.CORDONED_BY on a cordon the syncer made: written, recognised and lifted by it alone.
CORDONED_BY_SLURM: Final = "slurm"


class Keys:
    """Names from the sync contract (docs/contract.md); one place so they never drift apart."""

    NODE_NAME_LABEL: Final = ANNOTATION_PREFIX + "node-name"
    CORDON_REASON: Final = ANNOTATION_PREFIX + "cordon-reason"
    DRAIN_REQUEST: Final = ANNOTATION_PREFIX + "drain"
    STATE: Final = ANNOTATION_PREFIX + "state"
    REASON: Final = ANNOTATION_PREFIX + "reason"
    REASON_BY: Final = ANNOTATION_PREFIX + "reason-by"
    REASON_AT: Final = ANNOTATION_PREFIX + "reason-at"
    CORDONED_BY: Final = ANNOTATION_PREFIX + "cordoned-by"
    NODESET_LABEL: Final = ANNOTATION_PREFIX + "nodeset"
    BUSY_LABEL: Final = ANNOTATION_PREFIX + "busy"
    TEMPLATE_HASH_LABEL: Final = ANNOTATION_PREFIX + "template-hash"
    # NodeSet: why a pod is being removed ("scale-in" or "update") and since when (epoch seconds);
    # kept on the pod so a restarted syncer carries on where it stopped
    REMOVAL: Final = ANNOTATION_PREFIX + "removal"
    REMOVAL_SINCE: Final = ANNOTATION_PREFIX + "removal-since"
    # on a pod a power-managed NodeSet deletes because Slurm powered its node down (the state it saw):
    # its termination drains nothing, which would keep Slurm from powering the node up again
    POWER_DOWN: Final = ANNOTATION_PREFIX + "power-down"
    FINALIZER: Final = ANNOTATION_PREFIX + "slurm-node"
    # on the leader Lease: an operator's request to reset the safety valve (the value says who or why);
    # the leader consumes it, lets the held drains through and records an Event on the Lease
    VALVE_RESET: Final = ANNOTATION_PREFIX + "reset-safety-valve"
    # a Node's planned maintenance, an ISO 8601 interval: becomes a Slurm MAINT reservation (docs/contract.md)
    MAINTENANCE_WINDOW: Final = ANNOTATION_PREFIX + "maintenance-window"
    # on a SlurmPartition: "created" or "adopted", written before the partition is created (the ownership
    # record: Slurm keeps no marker on a partition), and the finalizer that lets it drain before it goes
    PARTITION_OWNER: Final = ANNOTATION_PREFIX + "partition-owner"
    # the finalizer releases wrote before cluster identities (one name for all): the release the CR belongs
    # to takes it as its own, and replaces it by its own (syncer/model/cluster.py) on its next claim
    PARTITION_FINALIZER: Final = ANNOTATION_PREFIX + "partition"
    # which release (its cluster identity, --cluster-name) a SlurmPartition, a NodeSet and a NodeSet's pods
    # belong to: each release sees only its own (syncer/model/cluster.py, docs/contract.md)
    CLUSTER_LABEL: Final = ANNOTATION_PREFIX + "cluster"
    # The scheduler (issue 44, docs/scheduler.md): on a pod, or a Namespace as its pods' default, what its
    # Slurm job asks for; the Namespace alone says which of them its pods may set themselves.
    JOB_PARTITION: Final = ANNOTATION_PREFIX + "partition"
    JOB_ACCOUNT: Final = ANNOTATION_PREFIX + "account"
    JOB_QOS: Final = ANNOTATION_PREFIX + "qos"
    JOB_TIME_LIMIT: Final = ANNOTATION_PREFIX + "time-limit"
    JOB_NICE: Final = ANNOTATION_PREFIX + "nice"
    JOB_CONSTRAINT: Final = ANNOTATION_PREFIX + "constraint"
    JOB_RESERVATION: Final = ANNOTATION_PREFIX + "reservation"
    POD_OVERRIDES: Final = ANNOTATION_PREFIX + "pod-overrides"
    # a gang: the pods sharing this label (and namespace) are one job of group-size nodes
    GROUP_LABEL: Final = ANNOTATION_PREFIX + "group"
    GROUP_SIZE: Final = ANNOTATION_PREFIX + "group-size"
    # written by the pod's binding: the Slurm job it runs under; and the job's admin comment names its pods
    SCHEDULER_JOB_ID: Final = ANNOTATION_PREFIX + "job-id"
    JOB_MARKER: Final = ANNOTATION_PREFIX + "pods"
    CONDITION_MAINTENANCE: Final = "SlurmMaintenanceReserved"
    CONDITION_DRAINED: Final = "SlurmNodeDrained"
    CONDITION_HEALTHY: Final = "SlurmNodeHealthy"
    LEASE_NAME: Final = "slurm-syncer"
    CRD_GROUP: Final = "slurm-syncer.dev"
    CRD_VERSION: Final = "v1alpha1"
    CRD_KIND: Final = "NodeSet"
    CRD_PLURAL: Final = "nodesets"


class Slinky:
    """What SchedMD's Slinky slurm-operator puts on its NodeSet pods and Nodes (docs/interop.md)."""

    HOSTNAME_LABEL: Final = "nodeset.slinky.slurm.net/pod-hostname"
    SCALING_MODE_LABEL: Final = "nodeset.slinky.slurm.net/scaling-mode"
    CORDON_REASON: Final = "nodeset.slinky.slurm.net/node-cordon-reason"
    REASON_PREFIX: Final = "slurm-operator: "


# Which label names a pod's Slurm node, and which Node annotation says why it was cordoned: the first
# present wins. Ours first, then Slinky's, so its pods bind with no relabelling.
DEFAULT_NODE_NAME_LABELS: Final = (Keys.NODE_NAME_LABEL, Slinky.HOSTNAME_LABEL)
DEFAULT_CORDON_REASON_ANNOTATIONS: Final = (Keys.CORDON_REASON, Slinky.CORDON_REASON)


class NVSentinel:
    """What NVIDIA's NVSentinel fault-quarantine puts on a Node it cordons (docs/interop.md): labels
    `<labelPrefix>cordon-reason` and friends, the prefix `k8saas.nvidia.com/` unless configured."""

    CORDON_REASON_LABEL: Final = "k8saas.nvidia.com/cordon-reason"


# Node labels read when no cordon-reason annotation is present (label values are short: 63 characters).
DEFAULT_CORDON_REASON_LABELS: Final = (NVSentinel.CORDON_REASON_LABEL,)
