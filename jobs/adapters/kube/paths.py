"""Object paths of the Kubernetes API, escaped."""

from __future__ import annotations

from urllib.parse import quote


def object_path(group: str, resource: str, namespace: str, name: str) -> str:
    """``/api/v1/namespaces/N/pods/P`` for the core group, ``/apis/G/v1/...`` for the others (all v1 here)."""
    root = f"/apis/{group}/v1" if group else "/api/v1"
    return f"{root}/namespaces/{quote(namespace, safe='')}/{resource}/{quote(name, safe='')}"
