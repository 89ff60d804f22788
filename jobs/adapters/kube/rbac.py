"""What each Kubernetes adapter module calls, as RBAC: a job's ServiceAccount gets exactly the union of the grants
of the modules it is wired with (its command's ``KUBE_PORTS``), no verb more, none less
(tests/integration/test_deploy.py renders the Roles and compares)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Scope = Literal["cluster", "namespace"]  # namespace: only the job's own namespace (a Role there)


@dataclass(frozen=True)
class Grant:
    api_group: str
    resource: str
    verbs: tuple[str, ...]
    scope: Scope
    #: Only these objects (``resourceNames``): a Secret the job reads is named, never all Secrets of a namespace.
    resource_names: tuple[str, ...] = ()


def union(grants: Iterable[Grant]) -> dict[tuple[str, str, Scope], frozenset[str]]:
    """``(api group, resource, scope) -> verbs``, as a Role and a ClusterRole would grant them."""
    merged: dict[tuple[str, str, Scope], frozenset[str]] = {}
    for g in grants:
        key = (g.api_group, g.resource, g.scope)
        merged[key] = merged.get(key, frozenset()) | frozenset(g.verbs)
    return merged
