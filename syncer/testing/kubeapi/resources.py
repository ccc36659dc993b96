"""The kinds the emulator serves: built-ins as a table, CRDs registered when they are created."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    scale: dict[str, str] | None = None  # specReplicasPath, statusReplicasPath, labelSelectorPath
    builtin: bool = True  # strategic merge patch is only for built-in kinds
    verbs: tuple[str, ...] = ALL_VERBS
    printer_columns: tuple[dict[str, Any], ...] = ()
    schema: dict[str, Any] | None = None  # openAPIV3Schema of a CRD version
    field_selectors: frozenset[str] = frozenset({"metadata.name", "metadata.namespace"})
    categories: tuple[str, ...] = ()
    extra_subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def discovery(self) -> list[dict[str, Any]]:
        entries = [
            {
                "name": self.plural,
                "singularName": self.singular,
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": list(self.verbs),
                **({"shortNames": list(self.short_names)} if self.short_names else {}),
                **({"categories": list(self.categories)} if self.categories else {}),
            }
        ]
        subresources = list(self.extra_subresources)
        if self.status_subresource:
            subresources.append("status")
        for sub in subresources:
            created = _CREATE_ONLY.get(sub)  # (kind, group, version) of a create-only subresource
            entries.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": created[0] if created else self.kind,
                    "verbs": ["create"] if created else ["get", "patch", "update"],
                    # kubectl drain evicts only where discovery names the Eviction's group and version;
                    # without them it falls back to DELETE, which no PodDisruptionBudget stops
                    **({"group": created[1], "version": created[2]} if created and created[1] else {}),
                }
            )
        if self.scale is not None:
            entries.append(
                {
                    "name": f"{self.plural}/scale",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
        return entries


_NAMESPACED_META = frozenset({"metadata.name", "metadata.namespace"})
# POST-only subresources as kube-apiserver lists them: kind, and group/version if not the parent's
_CREATE_ONLY = {"eviction": ("Eviction", "policy", "v1"), "binding": ("Binding", "", "")}
# the fields kube-apiserver selects pods by (pkg/registry/core/pod/strategy.go, ToSelectableFields)
POD_FIELDS = _NAMESPACED_META | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}

BUILTINS: tuple[Resource, ...] = (
    Resource(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        ("ns",),
        status_subresource=True,
        field_selectors=frozenset({"metadata.name", "status.phase"}),
    ),
    Resource(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        ("no",),
        status_subresource=True,
        field_selectors=frozenset({"metadata.name", "spec.unschedulable"}),
    ),
    Resource(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("po",),
        status_subresource=True,
        categories=("all",),
        extra_subresources=("eviction", "binding"),
        field_selectors=POD_FIELDS,
    ),
    # the legacy `POST .../namespaces/NS/bindings` (the Binding names its pod); create only
    Resource("", "v1", "bindings", "Binding", True, verbs=("create",)),
    Resource(
        "",
        "v1",
        "events",
        "Event",
        True,
        ("ev",),
        field_selectors=_NAMESPACED_META
        | {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        },
    ),
    Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",)),
    Resource("", "v1", "services", "Service", True, ("svc",), status_subresource=True, categories=("all",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("events.k8s.io", "v1", "events", "Event", True, ("ev",)),
    Resource(
        "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), status_subresource=True
    ),
    Resource(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        True,
        ("deploy",),
        status_subresource=True,
        scale={"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
        categories=("all",),
    ),
    Resource(
        "batch",
        "v1",
        "jobs",
        "Job",
        True,
        status_subresource=True,
        categories=("all",),
        field_selectors=_NAMESPACED_META | {"status.successful"},
    ),
    Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ("netpol",)),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    Resource(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        status_subresource=True,
    ),
    Resource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
)


def from_crd(crd: dict[str, Any]) -> list[Resource]:
    """One Resource per served version of a CustomResourceDefinition."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    resources = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        resources.append(
            Resource(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                status_subresource="status" in subresources,
                scale=dict(scale) if isinstance(scale, dict) else None,
                builtin=False,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
                categories=tuple(names.get("categories") or ()),
                # the CRD's selectableFields, as field selectors (`.spec.color` -> `spec.color`)
                field_selectors=_NAMESPACED_META
                | {str(f.get("jsonPath", "")).lstrip(".") for f in version.get("selectableFields") or []},
            )
        )
    return resources


@dataclass
class Registry:
    """Resources by (group, plural) and by (group, version); CRDs come and go at run time."""

    by_key: dict[tuple[str, str, str], Resource] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for resource in BUILTINS:
            self.add(resource)

    def add(self, resource: Resource) -> None:
        self.by_key[(resource.group, resource.version, resource.plural)] = resource

    def remove_group_plural(self, group: str, plural: str) -> None:
        for key in [k for k in self.by_key if k[0] == group and k[2] == plural]:
            del self.by_key[key]

    def get(self, group: str, version: str, plural: str) -> Resource | None:
        return self.by_key.get((group, version, plural))

    def versions(self, group: str) -> list[str]:
        return sorted({k[1] for k in self.by_key if k[0] == group})

    def groups(self) -> list[str]:
        return sorted({k[0] for k in self.by_key if k[0]})

    def in_version(self, group: str, version: str) -> list[Resource]:
        return [r for k, r in sorted(self.by_key.items()) if k[0] == group and k[1] == version]
