"""The real SDK clients, built the way product code should build them against an emulator base URL."""

from __future__ import annotations

from google.auth.credentials import AnonymousCredentials
from google.cloud import cloudquotas_v1, compute_v1, container_v1

_CREDENTIALS = AnonymousCredentials()  # type: ignore[no-untyped-call]  # the emulator checks no auth


def _opts(url: str) -> dict[str, str]:
    # An "http://" api_endpoint is kept as is by the REST transports (they only add https:// to a bare host).
    return {"api_endpoint": url}


def gke(url: str) -> container_v1.ClusterManagerClient:
    return container_v1.ClusterManagerClient(transport="rest", credentials=_CREDENTIALS, client_options=_opts(url))


def quotas(url: str) -> cloudquotas_v1.CloudQuotasClient:
    return cloudquotas_v1.CloudQuotasClient(transport="rest", credentials=_CREDENTIALS, client_options=_opts(url))


def instances(url: str) -> compute_v1.InstancesClient:
    return compute_v1.InstancesClient(transport="rest", credentials=_CREDENTIALS, client_options=_opts(url))


def zone_operations(url: str) -> compute_v1.ZoneOperationsClient:
    return compute_v1.ZoneOperationsClient(transport="rest", credentials=_CREDENTIALS, client_options=_opts(url))


def instance_group_managers(url: str) -> compute_v1.InstanceGroupManagersClient:
    return compute_v1.InstanceGroupManagersClient(transport="rest", credentials=_CREDENTIALS, client_options=_opts(url))
