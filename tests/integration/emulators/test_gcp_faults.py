"""Injected faults, as each GCP API puts them on the wire, raised by the real clients as api_core exceptions.

Over REST, api_core picks the exception class from the HTTP status alone (400 -> BadRequest, 409 -> Conflict,
429 -> TooManyRequests, 503 -> ServiceUnavailable, 504 -> GatewayTimeout); the gRPC-style status and the
ErrorInfo reason are in the body (``exc.response.json()``, ``exc.reason``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from google.api_core import exceptions
from google.cloud import compute_v1

from tests.emulators.base import FaultKind
from tests.emulators.gcp import GcpEmulator, clients

pytestmark = pytest.mark.integration

PROJECT, REGION, ZONE = "proj", "us-central1", "us-central1-a"
LOC = f"projects/{PROJECT}/locations/{REGION}"
POOL = f"{LOC}/clusters/ml/nodePools/l4"
PARENT = f"projects/{PROJECT}/locations/global"
QUOTA = "NVIDIA-L4-GPUS-per-project-region"

Invoke = Callable[[GcpEmulator], Any]


def _seed(gcp: GcpEmulator) -> None:
    gcp.add_node_pool(PROJECT, REGION, "ml", "l4", zones=[ZONE], per_zone_count=2)
    gcp.add_instance(PROJECT, ZONE, "vm")
    gcp.set_quota(PROJECT, QUOTA, REGION, 4)


INVOKE: dict[str, Invoke] = {
    "nodePools.get": lambda g: clients.gke(g.url).get_node_pool(name=POOL, retry=None),
    "nodePools.setSize": lambda g: clients.gke(g.url).set_node_pool_size(
        request={"name": POOL, "node_count": 0}, retry=None
    ),
    "nodePools.setAutoscaling": lambda g: clients.gke(g.url).set_node_pool_autoscaling(
        request={"name": POOL, "autoscaling": {"enabled": False}}, retry=None
    ),
    "clusters.list": lambda g: clients.gke(g.url).list_clusters(parent=f"projects/{PROJECT}/locations/-", retry=None),
    "quotaInfos.get": lambda g: clients.quotas(g.url).get_quota_info(
        name=f"{PARENT}/services/compute.googleapis.com/quotaInfos/{QUOTA}", retry=None
    ),
    "quotaPreferences.create": lambda g: clients.quotas(g.url).create_quota_preference(
        request={
            "parent": PARENT,
            "quota_preference_id": "l4",
            "quota_preference": {
                "service": "compute.googleapis.com",
                "quota_id": QUOTA,
                "dimensions": {"region": REGION},
                "quota_config": {"preferred_value": 4},  # the current limit: neither increase nor decrease
            },
        },
        retry=None,
    ),
    "instances.aggregatedList": lambda g: list(clients.instances(g.url).aggregated_list(project=PROJECT, retry=None)),
    "instances.stop": lambda g: clients.instances(g.url).stop_unary(
        project=PROJECT, zone=ZONE, instance="vm", retry=None
    ),
    "instances.setLabels": lambda g: clients.instances(g.url).set_labels_unary(
        project=PROJECT,
        zone=ZONE,
        instance="vm",
        instances_set_labels_request_resource=compute_v1.InstancesSetLabelsRequest(
            labels={}, label_fingerprint="42WmSpB8rSM="
        ),
        retry=None,
    ),
}

# (operation, fault, exception class, what the body says: google.rpc status for GKE/Quotas, reason for Compute)
CASES: list[tuple[str, FaultKind, type[exceptions.GoogleAPICallError], str]] = [
    ("nodePools.get", "throttle", exceptions.TooManyRequests, "RESOURCE_EXHAUSTED"),
    ("nodePools.get", "server_error", exceptions.ServiceUnavailable, "UNAVAILABLE"),
    ("nodePools.setSize", "busy", exceptions.BadRequest, "FAILED_PRECONDITION"),
    ("nodePools.setSize", "conflict", exceptions.Conflict, "ABORTED"),
    ("nodePools.setAutoscaling", "throttle", exceptions.TooManyRequests, "RESOURCE_EXHAUSTED"),
    ("clusters.list", "server_error", exceptions.ServiceUnavailable, "UNAVAILABLE"),
    ("quotaInfos.get", "throttle", exceptions.TooManyRequests, "RESOURCE_EXHAUSTED"),
    ("quotaPreferences.create", "conflict", exceptions.Conflict, "ALREADY_EXISTS"),
    ("quotaPreferences.create", "busy", exceptions.Conflict, "ABORTED"),
    ("instances.aggregatedList", "throttle", exceptions.TooManyRequests, "rateLimitExceeded"),
    ("instances.aggregatedList", "server_error", exceptions.ServiceUnavailable, "backendError"),
    ("instances.stop", "busy", exceptions.BadRequest, "resourceNotReady"),
    ("instances.setLabels", "conflict", exceptions.Conflict, "conflict"),
]


@pytest.mark.parametrize(("operation", "kind", "raised", "said"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_fault_raises_the_api_core_exception(
    gcp: GcpEmulator, operation: str, kind: FaultKind, raised: type[Exception], said: str
) -> None:
    _seed(gcp)
    gcp.faults.inject(operation, kind)

    with pytest.raises(raised) as caught:
        INVOKE[operation](gcp)

    assert type(caught.value) is raised
    error = caught.value.response.json()["error"]  # type: ignore[attr-defined]
    assert said in (error.get("status"), error.get("errors", [{}])[0].get("reason"))
    assert gcp.log.count(operation) == 1
    INVOKE[operation](gcp)  # the fault was for one call only


def test_busy_fault_carries_the_gke_reason(gcp: GcpEmulator) -> None:
    _seed(gcp)
    gcp.faults.inject("nodePools.setSize", "busy")

    with pytest.raises(exceptions.BadRequest) as caught:
        INVOKE["nodePools.setSize"](gcp)

    assert caught.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
    assert not gcp.gke.operations  # nothing was started
    assert gcp.node_pool_size(PROJECT, REGION, "ml", "l4") == 2


@pytest.mark.parametrize("reason", ["rateLimitExceeded", "userRateLimitExceeded"])
@pytest.mark.parametrize("operation", ["instances.aggregatedList", "nodePools.setSize"])
def test_rate_limit_is_a_403_with_the_rate_limit_reason(gcp: GcpEmulator, operation: str, reason: str) -> None:
    # Compute Engine: "If your project exceeds a rate quota, you receive a 403 error with the reason
    # rateLimitExceeded" (cloud.google.com/compute/api-quota); api_core makes every 403 Forbidden.
    _seed(gcp)
    gcp.inject_rate_limit_403(operation, reason)

    with pytest.raises(exceptions.Forbidden) as caught:
        INVOKE[operation](gcp)

    assert [e["reason"] for e in caught.value.errors] == [reason]
    assert caught.value.errors[0]["domain"] == "usageLimits"
    assert gcp.log.count(operation) == 1
    assert not gcp.gke.operations  # a refused write started nothing
    INVOKE[operation](gcp)  # armed for one call only


def test_permission_denied_is_a_403_with_the_iam_reason(gcp: GcpEmulator) -> None:
    _seed(gcp)
    gcp.inject_permission_denied("nodePools.get", "container.clusters.get")

    with pytest.raises(exceptions.Forbidden) as caught:
        INVOKE["nodePools.get"](gcp)

    assert caught.value.reason == "IAM_PERMISSION_DENIED"
    assert caught.value.response.json()["error"]["status"] == "PERMISSION_DENIED"  # type: ignore[attr-defined]


@pytest.mark.parametrize("operation", ["nodePools.get", "instances.stop"])
def test_timeout_fault_answers_504_after_holding(gcp: GcpEmulator, operation: str) -> None:
    _seed(gcp)
    gcp.timeout_hold_s = 0.2
    gcp.faults.inject(operation, "timeout")

    with pytest.raises(exceptions.GatewayTimeout):
        INVOKE[operation](gcp)

    instance = gcp.instance(PROJECT, ZONE, "vm")
    assert instance is not None
    assert instance.status == "RUNNING"  # a timed-out write changed nothing


def test_timeout_fault_outlasts_a_short_client_timeout(gcp: GcpEmulator) -> None:
    _seed(gcp)
    gcp.timeout_hold_s = 1.0
    gcp.faults.inject("nodePools.get", "timeout")

    # The REST transport does not wrap transport errors: a client-side timeout surfaces from requests.
    with pytest.raises(requests.exceptions.Timeout):
        clients.gke(gcp.url).get_node_pool(name=POOL, retry=None, timeout=0.2)


def test_default_retry_rides_over_a_503_on_reads(gcp: GcpEmulator) -> None:
    _seed(gcp)
    gcp.faults.inject("nodePools.get", "server_error")

    got = clients.gke(gcp.url).get_node_pool(name=POOL)  # the SDK's default retry covers UNAVAILABLE

    assert got.name == "l4"
    assert gcp.log.count("nodePools.get") == 2


def test_operation_poll_fault_then_recovery(gcp: GcpEmulator) -> None:
    _seed(gcp)
    client = clients.gke(gcp.url)
    op = client.set_node_pool_size(request={"name": POOL, "node_count": 0})
    gcp.faults.inject("operations.get", "server_error")

    with pytest.raises(exceptions.ServiceUnavailable):
        client.get_operation(name=f"{LOC}/operations/{op.name}", retry=None)

    assert (
        client.get_operation(name=f"{LOC}/operations/{op.name}").status.name == "RUNNING"
    )  # a failed poll does not count


def test_latency_is_applied(gcp: GcpEmulator) -> None:
    _seed(gcp)
    gcp.latency_s = 0.1
    began = time.monotonic()

    INVOKE["nodePools.get"](gcp)

    assert time.monotonic() - began >= 0.1
