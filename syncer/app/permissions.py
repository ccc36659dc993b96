"""Which Kubernetes rights a configuration needs, in which scope: the one list that `check` asks about,
the Helm chart's RBAC templates render (a test keeps them equal) and the e2e suite holds the syncer to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syncer.app.settings import Settings


@dataclass(frozen=True, order=True)
class Right:
    verb: str
    group: str
    resource: str  # plural, or plural/subresource
    namespace: str = ""  # "": every namespace (and cluster-scoped objects)
    name: str = ""  # "": any object; else only this one (RBAC resourceNames)

    @property
    def qualified(self) -> str:
        """`pods/status`, `leases.coordination.k8s.io`, `nodesets.slurm-syncer.dev/status`."""
        plural, _, sub = self.resource.partition("/")
        name = f"{plural}.{self.group}" if self.group else plural
        return name + (f"/{sub}" if sub else "")

    @property
    def scope(self) -> str:
        where = f"namespace {self.namespace}" if self.namespace else "cluster-wide"
        return where + (f", only {self.name!r}" if self.name else "")

    @property
    def why(self) -> str:
        return WHY[(self.verb, self.group, self.resource)]

    def resource_attributes(self) -> dict[str, str]:
        """As a SubjectAccessReview asks about it (`kubectl auth can-i` does the same)."""
        plural, _, sub = self.resource.partition("/")
        attrs = {"verb": self.verb, "group": self.group, "resource": plural}
        optional = (("subresource", sub), ("namespace", self.namespace), ("name", self.name))
        attrs.update({key: value for key, value in optional if value})
        return attrs

    def covers(self, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
        """Whether this right allows that request (as RBAC matches a rule to a request)."""
        return (
            (self.verb, self.group, self.resource) == (verb, group, resource)
            and self.namespace in ("", namespace)
            and self.name in ("", name)
        )

    def __str__(self) -> str:
        return f"{self.verb} {self.qualified} ({self.scope})"


# (verb, group, resource) -> why the syncer needs it
_SLINKY_NODESETS = "Slinky's NodeSet partitions, never written (--slinky-partitions)"
_SLINKY_CONTROLLERS = "Slinky's extraConf partitions, never written (--slinky-partitions)"
WHY: dict[tuple[str, str, str], str] = {
    ("get", "", "nodes"): "fresh read before a write after a conflict; whether a power-managed member's "
    "Node is lost",
    ("list", "", "nodes"): "informer of Nodes",
    ("watch", "", "nodes"): "informer of Nodes",
    ("patch", "", "nodes"): "cordon on a Slurm drain (--cordon-on-slurm-drain) and lifting its own cordons, "
    "which happens with the option off too",
    ("patch", "", "nodes/status"): "Slurm state: conditions and annotations on Nodes, one patch per Node",
    ("get", "", "pods"): "fresh read before a write after a conflict; why a powering-up member cannot start",
    ("list", "", "pods"): "informer of slurmd pods",
    ("watch", "", "pods"): "informer of slurmd pods",
    ("patch", "", "pods"): "labels and annotations of NodeSet pods (busy, removal, power-down)",
    ("patch", "", "pods/status"): "Slurm state: conditions and annotations on slurmd pods, one patch per pod",
    ("create", "", "pods"): "NodeSet scale-out",
    ("delete", "", "pods"): "NodeSet scale-in",
    ("create", "", "events"): "Events for transitions",
    ("patch", "", "events"): "aggregating repeated Events",
    ("get", "coordination.k8s.io", "leases"): "leader election: reading the Lease",
    ("update", "coordination.k8s.io", "leases"): "leader election: renewing the Lease",
    ("create", "coordination.k8s.io", "leases"): "leader election: the Lease's first creation",
    ("list", "slurm-syncer.dev", "nodesets"): "NodeSet reconciler",
    ("watch", "slurm-syncer.dev", "nodesets"): "NodeSet reconciler",
    ("patch", "slurm-syncer.dev", "nodesets/status"): "NodeSet status",
    ("get", "slurm-syncer.dev", "nodesets"): "taking an unlabelled NodeSet (--adopt-unlabelled): read",
    ("patch", "slurm-syncer.dev", "nodesets"): "taking an unlabelled NodeSet (--adopt-unlabelled): label",
    ("create", "policy", "poddisruptionbudgets"): "protecting busy slurmd pods of a NodeSet",
    ("get", "slurm-syncer.dev", "slurmpartitions"): "fresh read before a write after a conflict",
    ("list", "slurm-syncer.dev", "slurmpartitions"): "SlurmPartition controller (--partitions-enabled)",
    ("watch", "slurm-syncer.dev", "slurmpartitions"): "SlurmPartition controller (--partitions-enabled)",
    (
        "patch",
        "slurm-syncer.dev",
        "slurmpartitions",
    ): "SlurmPartition: its ownership annotation and finalizer",
    ("patch", "slurm-syncer.dev", "slurmpartitions/status"): "SlurmPartition status",
    ("list", "slinky.slurm.net", "nodesets"): _SLINKY_NODESETS,
    ("watch", "slinky.slurm.net", "nodesets"): _SLINKY_NODESETS,
    ("list", "slinky.slurm.net", "controllers"): _SLINKY_CONTROLLERS,
    ("watch", "slinky.slurm.net", "controllers"): _SLINKY_CONTROLLERS,
    ("get", "kueue.x-k8s.io", "topologies"): "the Kueue Topology naming the tree labels (--topology-kueue)",
    ("create", "", "pods/binding"): "the scheduler: binding its pods where Slurm allocated their jobs",
    ("get", "", "namespaces"): "the scheduler: a Namespace's annotations are its pods' Slurm defaults",
    ("get", "batch", "jobs"): "the scheduler: a batch/v1 Job's parallelism makes its pods one gang",
}

_NODES = (
    ("get", "nodes"),
    ("list", "nodes"),
    ("watch", "nodes"),
    ("patch", "nodes"),
    ("patch", "nodes/status"),
)
_PODS = (("get", "pods"), ("list", "pods"), ("watch", "pods"), ("patch", "pods/status"))
_EVENTS = (("create", "events"), ("patch", "events"))
_NODESETS = (
    ("create", "", "pods"),
    ("delete", "", "pods"),
    ("patch", "", "pods"),
    ("list", "slurm-syncer.dev", "nodesets"),
    ("watch", "slurm-syncer.dev", "nodesets"),
    ("patch", "slurm-syncer.dev", "nodesets/status"),
    ("create", "policy", "poddisruptionbudgets"),
)

_PARTITIONS = (
    ("get", "slurmpartitions"),
    ("list", "slurmpartitions"),
    ("watch", "slurmpartitions"),
    ("patch", "slurmpartitions"),
    ("patch", "slurmpartitions/status"),
)


def needed(settings: Settings, lease_namespace: str) -> list[Right]:
    """Every right `slurm-syncer run` with these settings uses, in the narrowest scope it uses it.
    `lease_namespace` is the resolved --lease-namespace (Settings.lease_namespace_resolved), where the
    Events about Nodes and the syncer go too."""
    namespace = settings.namespace  # slurmd pods, their Events and NodeSets; "": all namespaces
    rights = [Right(verb, "", resource) for verb, resource in _NODES]
    rights += [Right(verb, "", resource, namespace) for verb, resource in _PODS + _EVENTS]
    if namespace and namespace != lease_namespace:  # Events about Nodes and the syncer go there
        rights += [Right(verb, "", resource, lease_namespace) for verb, resource in _EVENTS]
    if settings.value("nodeset_enabled"):
        rights += [Right(verb, group, resource, namespace) for verb, group, resource in _NODESETS]
        if settings.adopt_unlabelled:  # the label written on a NodeSet no release has taken yet
            rights += [Right(verb, "slurm-syncer.dev", "nodesets", namespace) for verb in ("get", "patch")]
    if settings.leader_election:
        name, group = settings.lease_name, "coordination.k8s.io"
        rights += [
            Right("get", group, "leases", lease_namespace, name),
            Right("update", group, "leases", lease_namespace, name),
            # resourceNames cannot restrict create: the name is not known when create is authorized
            Right("create", group, "leases", lease_namespace),
        ]
    if settings.value(
        "partitions_enabled"
    ):  # cluster-scoped; their Events go to the lease namespace with Nodes'
        rights += [Right(verb, "slurm-syncer.dev", resource) for verb, resource in _PARTITIONS]
        if settings.value(
            "slinky_partitions"
        ):  # a NodeSet in any namespace declares a cluster-wide partition
            rights += [Right(verb, "slinky.slurm.net", r) for r in ("nodesets", "controllers")
                       for verb in ("list", "watch")]  # fmt: skip
    if settings.value("scheduler_name"):
        rights += scheduler_rights(settings)
    if settings.value("topology_kueue"):
        rights.append(Right("get", "kueue.x-k8s.io", "topologies", "", settings.value("topology_kueue")))
    return sorted(set(rights))


# the scheduler's, in each namespace it serves: its pods' informer and fresh reads, tear-down, binding, the
# PodScheduled condition, Events about its pods, the Jobs owning them
_SCHEDULER = (
    ("get", "", "pods"),
    ("list", "", "pods"),
    ("watch", "", "pods"),
    ("delete", "", "pods"),
    ("create", "", "pods/binding"),
    ("patch", "", "pods/status"),
    ("create", "", "events"),
    ("patch", "", "events"),
    ("get", "batch", "jobs"),
)


def scheduler_rights(settings: Settings) -> list[Right]:
    """The one-pool scheduler's rights (--scheduler-name): per served namespace (every namespace when none
    is listed), plus cluster-wide `list pods` (what already runs on a Node before a bind, all namespaces,
    as kube-scheduler reads it) and `get` on the served Namespaces only (their annotations)."""
    served: tuple[str, ...] = settings.controller_options("scheduler").namespaces or ("",)
    rights = [Right(verb, group, resource, ns) for ns in served for verb, group, resource in _SCHEDULER]
    rights.append(Right("list", "", "pods"))
    rights += [Right("get", "", "namespaces", "", ns) for ns in served]
    return rights


def granted(objects: list[dict[str, Any]], user: str) -> list[Right]:
    """The rights rendered RBAC objects (Roles, ClusterRoles and their bindings) give `user`
    (`system:serviceaccount:NS:NAME`): one Right per verb, resource and name of each bound rule."""
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objects
        if o.get("kind") in ("Role", "ClusterRole")
    }
    rights: set[Right] = set()
    for binding in objects:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(subject_user(s) == user for s in binding.get("subjects") or []):
            continue
        # a RoleBinding grants in its namespace only, whether it names a Role or a ClusterRole
        where = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], where if ref["kind"] == "Role" else "", ref["name"])) or {}
        for rule in role.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        for name in rule.get("resourceNames") or [""]:
                            rights.add(Right(verb, group, resource, where, name))
    return sorted(set(rights))


def subject_user(subject: dict[str, str]) -> str:
    """The user name of a binding's ServiceAccount or User subject ("" for groups)."""
    if subject.get("kind") == "ServiceAccount":
        return f"system:serviceaccount:{subject.get('namespace', '')}:{subject.get('name', '')}"
    return subject.get("name", "") if subject.get("kind") == "User" else ""
