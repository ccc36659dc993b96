"""RBAC as kube-apiserver's authorizer applies it, for the identities a test names (a bearer token or an
admin's `Impersonate-User`): their requests are judged by the Roles, ClusterRoles and bindings stored in
the emulator, a denial is the 403 kube-apiserver answers, and every request they make is recorded.
Other clients (the tests' admin) stay unrestricted. Differences from kube-apiserver: docs/emulator.md."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from syncer.app.permissions import subject_user
from syncer.testing.kubeapi.errors import ApiError
from syncer.testing.kubeapi.store import Store

RBAC = "rbac.authorization.k8s.io"
# what kube-apiserver's default ClusterRoles give every authenticated user (system:basic-user)
SELF_REVIEWS = {
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
}


@dataclass(frozen=True, order=True)
class Request:
    """kube-apiserver's authorizer.Attributes of a resource request."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass
class Authorizer:
    store: Store
    users: dict[str, str] = field(default_factory=dict)  # bearer token -> user name
    # user -> every request it made, allowed or not (the e2e suite compares them with what was granted)
    seen: dict[str, dict[Request, bool]] = field(default_factory=dict)

    def allowed(self, user: str, request: Request) -> tuple[bool, str]:
        """(allowed, reason) as the RBAC authorizer says it; `reason` names the binding that allowed."""
        if (request.group, request.resource) in SELF_REVIEWS and request.verb == "create":
            return True, 'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole ' \
                '"system:basic-user" to Group "system:authenticated"'  # fmt: skip
        for binding, role in self._bindings(user, request.namespace):
            if any(_rule_allows(rule, request) for rule in role.get("rules") or []):
                return True, f"RBAC: allowed by {_describe(binding, role)}"
        return False, ""

    def check(self, user: str, request: Request) -> None:
        """Records the request; raises the 403 kube-apiserver gives when RBAC does not allow it."""
        allowed, _ = self.allowed(user, request)
        self.seen.setdefault(user, {})[request] = self.seen.get(user, {}).get(request, False) or allowed
        if not allowed:
            raise forbidden(user, request)

    def review(self, user: str, body: Any) -> dict[str, Any]:
        """A SelfSubjectAccessReview answered for `user`, as `kubectl auth can-i` reads it."""
        review = copy.deepcopy(body) if isinstance(body, dict) else {}
        spec = review.setdefault("spec", {})
        attrs = spec.get("resourceAttributes")
        if attrs is None:  # nonResourceAttributes: /version, /healthz, discovery are open to everyone
            allowed, reason = True, 'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole ' \
                '"system:discovery" to Group "system:authenticated"'  # fmt: skip
        else:
            asked = Request(
                attrs.get("verb", ""),
                attrs.get("group", ""),
                attrs.get("resource", ""),
                attrs.get("subresource", ""),
                attrs.get("namespace", ""),
                attrs.get("name", ""),
            )
            allowed, reason = self.allowed(user, asked)
        review.update({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"})
        review.setdefault("metadata", {})["creationTimestamp"] = None
        review["status"] = {"allowed": allowed, **({"reason": reason} if reason else {})}
        return review

    def used(self, user: str) -> set[Request]:
        return {request for request, allowed in self.seen.get(user, {}).items() if allowed}

    def denied(self, user: str) -> set[Request]:
        return {request for request, allowed in self.seen.get(user, {}).items() if not allowed}

    def _bindings(self, user: str, namespace: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(binding, role) pairs that apply to `user` for a request in `namespace` ("": cluster scope)."""
        found = []
        bindings = self.store.objects_of((RBAC, "clusterrolebindings"))
        if namespace:
            bindings = bindings + self.store.objects_of((RBAC, "rolebindings"), namespace)
        for binding in bindings:
            if not any(_subject_matches(s, user) for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "Role":
                role = self.store.get(
                    (RBAC, "roles"), binding["metadata"].get("namespace", ""), ref.get("name", "")
                )
            else:
                role = self.store.get((RBAC, "clusterroles"), "", ref.get("name", ""))
            if role is not None:
                found.append((binding, role))
        return found


def request_of(
    method: str, query: Any, group: str, plural: str, namespace: str, name: str, subresource: str
) -> Request:
    """The verb kube-apiserver's RequestInfoFactory derives from the method, the path and `watch`."""
    watch = query.get("watch", "").lower() in ("true", "1")
    if method == "GET" and not name:
        verb = "watch" if watch else "list"
        selector = query.get("fieldSelector", "")
        if selector.startswith("metadata.name=") and "," not in selector:
            name = selector.partition("=")[2]  # lets resourceNames apply to list and watch of one object
    else:
        verb = {
            "GET": "get",
            "HEAD": "get",
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method, method.lower())
    return Request(verb, group, plural, subresource, namespace, name)


def _subject_matches(subject: dict[str, Any], user: str) -> bool:
    if subject.get("kind") == "Group":
        return subject.get("name", "") in groups_of(user)
    return subject_user(subject) == user


def groups_of(user: str) -> set[str]:
    groups = {"system:authenticated"}
    if user.startswith("system:serviceaccount:"):
        namespace = user.split(":")[2]
        groups |= {"system:serviceaccounts", f"system:serviceaccounts:{namespace}"}
    return groups


def _rule_allows(rule: dict[str, Any], request: Request) -> bool:
    """rbac/v1 PolicyRule matching (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac)."""
    verbs, groups = rule.get("verbs") or [], rule.get("apiGroups") or []
    resources, names = rule.get("resources") or [], rule.get("resourceNames") or []
    if not ("*" in verbs or request.verb in verbs):
        return False
    if not ("*" in groups or request.group in groups):
        return False
    sub = request.subresource
    if not (
        "*" in resources
        or request.full_resource in resources
        or (sub and f"*/{sub}" in resources)
        or (sub and f"{request.resource}/*" in resources)
    ):
        return False
    return not names or request.name in names  # resourceNames cannot match a request without a name


def _describe(binding: dict[str, Any], role: dict[str, Any]) -> str:
    meta = binding["metadata"]
    where = f"{meta['name']}/{meta['namespace']}" if meta.get("namespace") else meta["name"]
    return f'{binding["kind"]} "{where}" of {role["kind"]} "{role["metadata"]["name"]}"'


def forbidden(user: str, request: Request) -> ApiError:
    """The 403 of k8s.io/apiserver's responsewriters.Forbidden wrapped by apierrors.NewForbidden."""
    qualified = f"{request.resource}.{request.group}" if request.group else request.resource
    scope = f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
    why = (
        f'User "{user}" cannot {request.verb} resource "{request.full_resource}" in API group '
        f'"{request.group}" {scope}'
    )
    subject = f'{qualified} "{request.name}"' if request.name else qualified
    details: dict[str, Any] = {"name": request.name, "group": request.group, "kind": request.resource}
    details = {key: value for key, value in details.items() if value}  # omitempty, as in metav1
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)
