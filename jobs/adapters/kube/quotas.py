"""Namespace ResourceQuotas through the Kubernetes API: one paginated list of namespaces and one of ResourceQuotas
per cluster (never a call per namespace), server-side apply under the job's own field manager (a conflict with
another manager is reported, never forced), and deletion of the quotas the job owns."""

from __future__ import annotations

import contextlib
import threading
from typing import Any
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, json_pages, request
from jobs.adapters.kube.rbac import Grant
from jobs.core.quantity import is_gpu_resource, parse_quantity
from jobs.core.quotas import NamespaceInfo, QuotaInfo
from jobs.events import ObjectRef
from jobs.labels import MANAGED_BY, MANAGED_BY_LABEL

FIELD_MANAGER = "gpu-jobs-quotas"

#: Cluster-wide: it reads every namespace and ResourceQuota, and writes only its own. An apply that creates a quota is
#: authorised as a create as well as a patch (the API server's patch handler), so both are needed. Events go on the
#: quotas, in the teams' namespaces.
RBAC = (
    Grant("", "namespaces", ("list",), "cluster"),
    Grant("", "resourcequotas", ("list", "create", "patch", "delete"), "cluster"),
    Grant("", "events", ("create",), "cluster"),
    Grant("", "nodes", ("list",), "cluster"),  # GPUs allocatable, where the policy does not give the groups' sizes
)


class KubeQuotas:
    """Through plain JSON calls (``client.request``): no generated API class to import, no models to build."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        # (namespace, name) -> uid, from the list and the applies' answers: the Events on a quota name it by uid.
        self._uids: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def namespaces(self) -> list[NamespaceInfo]:
        return [
            NamespaceInfo(
                ns["metadata"]["name"],
                dict(ns["metadata"].get("labels") or {}),
                terminating=bool(ns["metadata"].get("deletionTimestamp"))
                or (ns.get("status") or {}).get("phase") == "Terminating",
            )
            for ns in json_pages(self.api, "list namespaces", "/api/v1/namespaces")
        ]

    def quotas(self) -> list[QuotaInfo]:
        listed = list(json_pages(self.api, "list resourcequotas", "/api/v1/resourcequotas"))
        with self._lock:
            self._uids.update({_key(q): str(q["metadata"].get("uid", "")) for q in listed})
        return [_quota(q) for q in listed]

    def ref(self, namespace: str, name: str) -> ObjectRef:
        """The quota, for an Event on it: its uid as this run listed or applied it (none seen: no uid)."""
        with self._lock:
            uid = self._uids.get((namespace, name), "")
        return ObjectRef("ResourceQuota", name, namespace, uid)

    def apply(self, namespace: str, name: str, hard: dict[str, str]) -> None:
        """Server-side apply of the job's fields only (labels and spec.hard): idempotent by nature, so a resend after
        a lost answer does no harm. A field another manager owns is a Conflict (not forced)."""
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": {"hard": hard},
        }
        applied = request(
            self.api,
            "patch resourcequotas",
            "PATCH",
            _quota_path(namespace, name),
            query=[("fieldManager", FIELD_MANAGER), ("force", "false")],
            body=body,
            content_type="application/apply-patch+yaml",
        )
        if applied:  # a new quota's uid is in the answer: its Event needs no read
            with self._lock:
                self._uids[_key(applied)] = str(applied["metadata"].get("uid", ""))

    def delete(self, namespace: str, name: str) -> None:
        with contextlib.suppress(errors.NotFound):  # already gone: what a delete wanted
            request(self.api, "delete resourcequotas", "DELETE", _quota_path(namespace, name))

    def gpu_allocatable(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for node in json_pages(self.api, "list nodes", "/api/v1/nodes"):
            for name, value in ((node.get("status") or {}).get("allocatable") or {}).items():
                if is_gpu_resource(name):
                    with contextlib.suppress(ValueError):  # not a quantity: the node counts nothing, not a crash
                        total[name] = total.get(name, 0) + int(parse_quantity(str(value)))
        return total


def _quota(q: dict[str, Any]) -> QuotaInfo:
    """A listed quota, with its scopes and who owns them: the job's apply gives none, and removes only its own."""
    spec, metadata = q.get("spec") or {}, q["metadata"]
    scopes = [str(scope) for scope in spec.get("scopes") or []]
    for req in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        values = req.get("values") or []
        scopes.append(f"{req.get('scopeName')} {req.get('operator')}" + (f" ({', '.join(values)})" if values else ""))
    present = tuple(name for name in ("scopes", "scopeSelector") if spec.get(name))
    mine, others = _scope_owners(metadata.get("managedFields") or [], present)
    return QuotaInfo(
        metadata["namespace"],
        metadata["name"],
        {k: str(v) for k, v in (spec.get("hard") or {}).items()},
        {k: str(v) for k, v in ((q.get("status") or {}).get("used") or {}).items()},
        managed=(metadata.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY,
        scopes=tuple(scopes),
        scopes_mine=mine,
        scope_owners=others,
        managers=tuple(dict.fromkeys(str(m.get("manager")) for m in metadata.get("managedFields") or [])),
    )


def _scope_owners(entries: list[dict[str, Any]], present: tuple[str, ...]) -> tuple[bool, tuple[str, ...]]:
    """Whether the job's own apply owns every scope field the quota has, and which other managers own one of them
    (from ``managedFields``: server-side apply removes only the fields the applying manager alone owned)."""
    own: set[str] = set()
    others = []
    for entry in entries:
        spec = (entry.get("fieldsV1") or {}).get("f:spec") or {}
        owned = {name for name in present if f"f:{name}" in spec}
        if not owned:
            continue
        manager, operation = str(entry.get("manager")), entry.get("operation")
        if (manager, operation) == (FIELD_MANAGER, "Apply"):
            own |= owned
        else:
            others.append(manager if manager != FIELD_MANAGER else f"{manager} ({operation})")
    return bool(present) and own == set(present), tuple(dict.fromkeys(others))


def _quota_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/resourcequotas/{quote(name, safe='')}"


def _key(q: dict[str, Any]) -> tuple[str, str]:
    return str(q["metadata"]["namespace"]), str(q["metadata"]["name"])
