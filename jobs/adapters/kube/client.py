"""One Kubernetes API client per cluster, through the official ``kubernetes`` client, and the translation of its
errors into ``jobs.errors``.

In a pod the client uses the in-cluster service account; elsewhere the kubeconfig (``KUBECONFIG``), which is
also how the local emulator is reached. Calls nothing itself, so it needs no RBAC.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from jobs import errors

__all__ = [
    "PAGE",
    "ConfigException",
    "api_client",
    "call",
    "job_namespace",
    "json_pages",
    "pages",
    "request",
    "translate",
]

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
PAGE = 500
T = TypeVar("T")


def job_namespace() -> str:
    if ns := os.environ.get("GPU_JOBS_NAMESPACE"):
        return ns
    if SA_NAMESPACE_FILE.exists():
        return SA_NAMESPACE_FILE.read_text().strip()
    return "gpu-jobs"


def api_client(timeout_s: float = 30.0, context: str | None = None) -> client.ApiClient:
    """A client for one cluster: the kubeconfig ``context`` when given (a central install reaching a fleet), else the
    in-cluster service account, else the kubeconfig's current context. Each client has its own Configuration: the
    process-wide default would be shared (and raced on) by the clients of several clusters."""
    configuration = client.Configuration()
    if context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        # The client reads KUBECONFIG once, at import; read it now so the current environment counts.
        config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped in the client
            config_file=os.environ.get("KUBECONFIG"), context=context, client_configuration=configuration
        )
    configuration.connection_pool_maxsize = 32  # the job works on many groups at once
    configuration.retries = False  # the job retries what is worth retrying
    api = client.ApiClient(configuration)
    api.rest_client.pool_manager.connection_pool_kw["timeout"] = urllib3.Timeout(total=timeout_s)
    return api


def translate(exc: Exception, operation: str) -> errors.CloudError:
    if isinstance(exc, ApiException):
        status = exc.status or 0
        reason = exc.reason or ""
        try:
            message = json.loads(exc.body or "{}").get("message", reason)
        except ValueError:
            message = reason
        kind: type[errors.CloudError] = {
            404: errors.NotFound,
            409: errors.Conflict,
            403: errors.Denied,
            401: errors.Denied,
            422: errors.Invalid,
            400: errors.Invalid,
            429: errors.Throttled,
        }.get(status, errors.Unavailable if status >= 500 else errors.CloudError)
        return kind(f"{operation}: {status} {message}", operation=operation, code=str(status))
    return errors.Unavailable(f"{operation}: {exc}", operation=operation, code=type(exc).__name__)


def call(operation: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise translate(exc, operation) from exc


def pages(operation: str, list_fn: Callable[..., Any], **kwargs: Any) -> Iterator[Any]:
    token = None
    while True:
        page = call(operation, partial(list_fn, limit=PAGE, _continue=token, **kwargs))
        yield from page.items
        token = page.metadata._continue
        if not token:
            return


def request(
    api: client.ApiClient,
    operation: str,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = "application/json",
) -> Any:
    """One call as plain JSON, without the generated API classes: importing ``CoreV1Api`` builds some 280 pydantic
    models, about a second of every run that needs only a few calls. ``path`` is quoted by the caller."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    method, url, headers, serialized, post = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=list(query),
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )

    def send() -> Any:
        response = api.call_api(method, url, headers, serialized, post)
        data: bytes = response.read() or b""  # type: ignore[no-untyped-call]  # untyped in the client
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=data.decode(errors="replace"), data=None)
        return json.loads(data) if data else None

    return call(operation, send)


def json_pages(api: client.ApiClient, operation: str, path: str, **query: str) -> Iterator[dict[str, Any]]:
    """A paginated list as plain JSON: building the client's models for thousands of objects costs seconds."""
    token = None
    while True:
        params = [("limit", str(PAGE)), *query.items(), *([("continue", token)] if token else [])]
        page = request(api, operation, "GET", path, query=params)
        yield from page.get("items") or ()
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return
