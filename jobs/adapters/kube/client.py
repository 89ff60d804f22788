"""The one way the jobs call a Kubernetes API: plain JSON over the official client's configuration and transport,
one paginator, one translation of failures into ``jobs.errors``.

The official ``kubernetes`` package is imported here and nowhere else, and only for what it does well: loading the
configuration (in a pod the in-cluster service account; elsewhere the kubeconfig, ``KUBECONFIG``, which is also
how the local emulator is reached), authentication and the HTTP connection pool. Its generated API classes and
models are not used: importing ``CoreV1Api`` builds some 280 pydantic models, about a second of every run that
needs a few calls, and objects are read as dicts and parsed once into the job's own dataclasses.

A failed call keeps what the API said: the HTTP status, the ``Status`` reason and causes, and ``Retry-After`` (so a
backoff can wait as long as the server asked). Calls nothing itself, so it needs no RBAC.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from jobs import errors
from jobs.settings import SettingsError

__all__ = [
    "PAGE",
    "ApiClient",
    "Kubeconfig",
    "api_client",
    "job_namespace",
    "json_pages",
    "request",
    "translate",
]

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
PAGE = 500

#: Patch content types (the API server picks the patch semantics by Content-Type).
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# HTTP status -> the project's error. 410 Gone is an expired list continue token (or a watch's resourceVersion):
# the list itself can be started again, so it is retryable like a 5xx.
_BY_STATUS: dict[int, type[errors.CloudError]] = {
    400: errors.Invalid,
    401: errors.Denied,
    403: errors.Denied,
    404: errors.NotFound,
    409: errors.Conflict,
    410: errors.Unavailable,
    422: errors.Invalid,
    429: errors.Throttled,
}


def job_namespace() -> str:
    if ns := os.environ.get("GPU_JOBS_NAMESPACE"):
        return ns
    if SA_NAMESPACE_FILE.exists():
        return SA_NAMESPACE_FILE.read_text().strip()
    return "gpu-jobs"


class Kubeconfig:
    """The run's Kubernetes configuration, read once: the kubeconfig (``KUBECONFIG``, or the default location) is
    parsed on the first client that needs it and every context's client is built from that parse. A central install
    reaching 99 clusters through one kubeconfig parsed it once per cluster before (its parse grows with the
    contexts: the run's start grew with their square).

    The one translation of a missing or broken configuration: ``SettingsError`` naming the cluster, the same from
    every command."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._merged: Any = None  # kube_config.KubeConfigMerger, once read
        self._lock = threading.Lock()

    def client(self, context: str | None = None, *, cluster: str = "") -> ApiClient:
        """A client for one cluster: the kubeconfig ``context`` when given (a central install reaching a fleet),
        else the in-cluster service account, else the kubeconfig's current context. Each client has its own
        Configuration: the process-wide default would be shared (and raced on) by the clients of several clusters.
        """
        configuration = client.Configuration()
        try:
            if context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                merged = self._kubeconfig()
                loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]  # untyped in the client
                    config_dict=merged.config, active_context=context, config_persister=merged.save_changes
                )
                loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        except ConfigException as exc:
            where = "in-cluster or KUBECONFIG" if context is None else f"context {context!r}"
            named = f"{where} for cluster {cluster}" if cluster else where
            raise SettingsError(f"no Kubernetes configuration ({named}): {exc}") from None
        configuration.connection_pool_maxsize = 32  # the job works on many groups at once
        configuration.retries = False  # the job retries what is worth retrying
        api = ApiClient(configuration)
        api.rest_client.pool_manager.connection_pool_kw["timeout"] = urllib3.Timeout(total=self.timeout_s)
        return api

    def _kubeconfig(self) -> Any:
        with self._lock:  # clients may be built from several threads; the file is read by one
            if self._merged is None:
                # The client reads KUBECONFIG once, at import; read it now so the current environment counts.
                path = os.environ.get("KUBECONFIG") or kube_config.KUBE_CONFIG_DEFAULT_LOCATION
                merged = kube_config.KubeConfigMerger(path)  # type: ignore[no-untyped-call]
                if merged.config is None:
                    raise ConfigException("Invalid kube-config file. No configuration found.")
                self._merged = merged
            return self._merged


def api_client(timeout_s: float = 30.0, context: str | None = None) -> ApiClient:
    """One client, its kubeconfig read for it alone (tests, one-off tools); a run uses one :class:`Kubeconfig`."""
    return Kubeconfig(timeout_s).client(context)


def translate(exc: Exception, operation: str) -> errors.CloudError:
    """The ``jobs.errors`` exception for a failed call: an API answer by its status (keeping the ``Status`` reason
    and causes and the ``Retry-After`` the server sent), no answer at all as ``Unavailable``."""
    if not isinstance(exc, ApiException):
        return errors.Unavailable(f"{operation}: {exc}", operation=operation, code=type(exc).__name__)
    status = exc.status or 0
    body = _status_body(exc.body)
    message = str(body.get("message") or exc.reason or "")
    details = body.get("details")
    details = details if isinstance(details, dict) else {}
    causes = [
        errors.Cause(str(c.get("reason", "")), str(c.get("field", "")), str(c.get("message", "")))
        for c in details.get("causes") or ()
        if isinstance(c, dict)
    ]
    kind = _BY_STATUS.get(status, errors.Unavailable if status >= 500 else errors.CloudError)
    return kind(
        f"{operation}: {status} {message}",
        operation=operation,
        code=str(status),
        status=status,
        reason=str(body.get("reason") or ""),
        causes=causes,
        retry_after_s=_retry_after(exc.headers or {}, details),
    )


def request(
    api: ApiClient,
    operation: str,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = "application/json",
) -> Any:
    """One call, its answer as plain JSON (None when empty). ``path`` is quoted by the caller; ``operation`` names
    the call in errors ("patch nodes")."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    try:
        method, url, headers, serialized, post = api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(method, url, headers, serialized, post)
        data: bytes = response.read() or b""  # type: ignore[no-untyped-call]  # untyped in the client
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=data.decode(errors="replace"), data=None)
        return json.loads(data) if data else None
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise translate(exc, operation) from exc


def json_pages(api: ApiClient, operation: str, path: str, **query: str) -> Iterator[dict[str, Any]]:
    """Every item of a list, page by page (``limit``/``continue``): one request per ``PAGE`` objects, so a list of
    thousands never arrives as one answer. ``query`` adds e.g. ``labelSelector`` or ``fieldSelector``."""
    token = None
    while True:
        params = [("limit", str(PAGE)), *query.items(), *([("continue", token)] if token else [])]
        page = request(api, operation, "GET", path, query=params)
        yield from page.get("items") or ()
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def _status_body(text: str | None) -> dict[str, Any]:
    """The ``Status`` object of a failed call, or {} when the body is not one (a proxy's HTML page, nothing)."""
    try:
        body = json.loads(text or "{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(headers: Mapping[str, str], details: Mapping[str, Any]) -> float | None:
    """Seconds the server asked to wait: the ``Retry-After`` header (the API server sends whole seconds), else the
    Status's ``details.retryAfterSeconds``; None when it asked nothing."""
    value = (headers.get("Retry-After") or "").strip()
    if value.isdigit():
        return float(value)
    seconds = details.get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, int | float) and seconds > 0 else None
