"""Namespace ResourceQuotas through the Kubernetes API: one paginated list of namespaces and one of ResourceQuotas
per cluster (never a call per namespace), server-side apply under the job's own field manager (a conflict with
another manager is reported, never forced), and deletion of the quotas the job owns."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from kubernetes import client

from jobs import errors
from jobs.adapters.kube import PAGE, call, emit_event
from jobs.core.quotas import NamespaceInfo, QuotaInfo
from jobs.labels import MANAGED_BY, MANAGED_BY_LABEL

FIELD_MANAGER = "gpu-jobs-quotas"

#: What the quotas job needs, cluster-wide: it reads every namespace and ResourceQuota, and writes only its own.
RBAC_RULES = {
    ("", "namespaces"): ("list",),
    ("", "resourcequotas"): ("list", "patch", "delete"),
    ("", "events"): ("create",),
}


def _json_pages(operation: str, list_fn: Callable[..., Any]) -> Iterator[dict[str, Any]]:
    """A paginated list as plain JSON: building the client's models for thousands of objects costs seconds."""
    token = None
    while True:
        response = call(operation, partial(list_fn, limit=PAGE, _continue=token, _preload_content=False))
        page = json.loads(response.data)
        yield from page.get("items") or ()
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


class KubeQuotas:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)

    def namespaces(self) -> list[NamespaceInfo]:
        return [
            NamespaceInfo(
                ns["metadata"]["name"],
                dict(ns["metadata"].get("labels") or {}),
                terminating=bool(ns["metadata"].get("deletionTimestamp"))
                or (ns.get("status") or {}).get("phase") == "Terminating",
            )
            for ns in _json_pages("list namespaces", self.core.list_namespace)
        ]

    def quotas(self) -> list[QuotaInfo]:
        return [
            QuotaInfo(
                q["metadata"]["namespace"],
                q["metadata"]["name"],
                {k: str(v) for k, v in ((q.get("spec") or {}).get("hard") or {}).items()},
                {k: str(v) for k, v in ((q.get("status") or {}).get("used") or {}).items()},
                managed=(q["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY,
            )
            for q in _json_pages("list resourcequotas", self.core.list_resource_quota_for_all_namespaces)
        ]

    def apply(self, namespace: str, name: str, hard: dict[str, str]) -> None:
        """Server-side apply of the job's fields only (labels and spec.hard): idempotent by nature, so a resend after
        a lost answer does no harm. A field another manager owns is a Conflict (not forced)."""
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": {"hard": hard},
        }
        call(
            "patch resourcequotas",
            lambda: self.core.patch_namespaced_resource_quota(
                name,
                namespace,
                body,
                field_manager=FIELD_MANAGER,
                force=False,
                _content_type="application/apply-patch+yaml",
                _preload_content=False,  # nothing in the answer is needed: skip the client's slow model building
            ),
        )

    def delete(self, namespace: str, name: str) -> None:
        with contextlib.suppress(errors.NotFound):  # already gone: what a delete wanted
            # The answer is the deleted object or a Status, as the server chooses: nothing in it is needed.
            call(
                "delete resourcequotas",
                lambda: self.core.delete_namespaced_resource_quota(name, namespace, _preload_content=False),
            )


class QuotaEvents:
    """Kubernetes Events on the ResourceQuotas the job changes (``kubectl describe quota`` shows them)."""

    def __init__(self, api: client.ApiClient, component: str = "quotas") -> None:
        self.core = client.CoreV1Api(api)
        self.component = component

    def emit(self, namespace: str, name: str, reason: str, message: str, *, warning: bool = False) -> None:
        emit_event(self.core, self.component, "ResourceQuota", name, namespace, reason, message, warning=warning)
