"""A cluster's namespaces, one ``get`` each: the owner label of the namespaces a run's notifications name
(``jobs.notify``). A run reads only the namespaces of what it announced, and none when it announced nothing."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, request
from jobs.adapters.kube.rbac import Grant

RBAC = (Grant("", "namespaces", ("get",), "cluster"),)  # notify: who owns a namespace (its owner label)


class KubeNamespaces:
    """``jobs.notify.Namespaces`` through one cluster's API."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def labels(self, name: str) -> Mapping[str, str] | None:
        try:
            found = request(self.api, "get namespaces", "GET", f"/api/v1/namespaces/{quote(name, safe='')}")
        except errors.NotFound:
            return None
        return dict((found.get("metadata") or {}).get("labels") or {})
