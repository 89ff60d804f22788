"""RBAC for ServiceAccount tokens, evaluated as the real authorizer does (``plugin/pkg/auth/authorizer/rbac``): the
rules of every ClusterRoleBinding and, in the request's namespace, every RoleBinding whose subjects include the
caller, each rule matched by API group, resource (``pods/eviction``, ``*``, ``pods/*``, ``*/log``), verb and
resourceNames. A request is allowed when one rule matches; nothing is denied explicitly.

Not modelled: aggregated ClusterRoles (their rules are whatever the object holds), escalation checks on writes of
Roles, the default roles a real cluster bootstraps (discovery and health paths are open to every token).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .cluster import Cluster, resource_type

Json = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class ServiceAccountCaller:
    """Who a ServiceAccount token says the caller is (``system:serviceaccount:<namespace>:<name>``)."""

    namespace: str
    name: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}", "system:authenticated")


@dataclass(frozen=True)
class Request:
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str  # "" at the cluster scope
    name: str


def _subject_matches(subject: Json, caller: ServiceAccountCaller, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return (subject.get("namespace") or binding_namespace, name) == (caller.namespace, caller.name)
    if kind == "User":
        return name == caller.user
    if kind == "Group":
        return name in caller.groups
    return False


def _rules(cluster: Cluster, role_ref: Json, namespace: str) -> list[Json]:
    kind, name = role_ref.get("kind"), role_ref.get("name", "")
    if kind == "ClusterRole":
        role = cluster.stored(resource_type("clusterroles", f"{GROUP}/v1"), "", name)
    elif kind == "Role" and namespace:
        role = cluster.stored(resource_type("roles", f"{GROUP}/v1"), namespace, name)
    else:
        role = None
    rules: list[Json] = (role or {}).get("rules") or []
    return rules


def _applicable_rules(cluster: Cluster, caller: ServiceAccountCaller, namespace: str) -> Iterator[Json]:
    for binding in cluster.scan(resource_type("clusterrolebindings", f"{GROUP}/v1")):
        if any(_subject_matches(s, caller, "") for s in binding.get("subjects") or []):
            yield from _rules(cluster, binding.get("roleRef") or {}, "")
    if namespace:
        for binding in cluster.scan(resource_type("rolebindings", f"{GROUP}/v1"), namespace):
            if any(_subject_matches(s, caller, namespace) for s in binding.get("subjects") or []):
                yield from _rules(cluster, binding.get("roleRef") or {}, namespace)


def _resource_matches(rule_resources: list[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for candidate in rule_resources:
        if candidate in ("*", combined):
            return True
        if subresource and candidate in (f"*/{subresource}", f"{resource}/*"):
            return True
    return False


def rule_allows(rule: Json, request: Request) -> bool:
    if "nonResourceURLs" in rule and not rule.get("resources"):
        return False
    verbs, groups = rule.get("verbs") or [], rule.get("apiGroups") or []
    names = rule.get("resourceNames") or []
    return (
        ("*" in verbs or request.verb in verbs)
        and ("*" in groups or request.group in groups)
        and _resource_matches(rule.get("resources") or [], request.resource, request.subresource)
        and (not names or request.name in names)
    )


def allows(cluster: Cluster, caller: ServiceAccountCaller, request: Request) -> bool:
    with cluster.lock:
        return any(rule_allows(rule, request) for rule in _applicable_rules(cluster, caller, request.namespace))
