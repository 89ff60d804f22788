"""GKE resizes Compute cannot serve, through the real container_v1 and compute_v1 REST clients: zone stockouts and
regional GPU quotas. The operation ends DONE with an ``error``, the pool reads RUNNING_WITH_ERROR with GKE's
"Not all instances running in IGM" statusMessage, and the instance groups keep creating until capacity is back."""

from __future__ import annotations

import pytest
from google.cloud import container_v1

from tests.emulators.gcp import GcpEmulator, clients

pytestmark = pytest.mark.integration

PROJECT, REGION, CLUSTER = "proj", "us-central1", "ml"
ZONES = ("us-central1-a", "us-central1-b")
POOL = f"projects/{PROJECT}/locations/{REGION}/clusters/{CLUSTER}/nodePools/h100"
RUNNING_WITH_ERROR = container_v1.NodePool.Status.RUNNING_WITH_ERROR


@pytest.fixture
def gcp_pool(gcp: GcpEmulator) -> GcpEmulator:
    gcp.operation_polls = 1
    gcp.add_node_pool(
        PROJECT,
        REGION,
        CLUSTER,
        "h100",
        zones=ZONES,
        per_zone_count=0,
        machine_type="a3-highgpu-8g",
        accelerator_type="nvidia-h100-80gb",
        accelerator_count=8,
    )
    return gcp


def _resize_and_wait(gcp: GcpEmulator, count: int) -> container_v1.Operation:
    gke = clients.gke(gcp.url)
    op = gke.set_node_pool_size(request={"name": POOL, "node_count": count})
    while op.status != container_v1.Operation.Status.DONE:
        op = gke.get_operation(name=f"projects/{PROJECT}/locations/{REGION}/operations/{op.name}")
    return op


def _creating(gcp: GcpEmulator, zone: str) -> int:
    pool = clients.gke(gcp.url).get_node_pool(name=POOL)
    url = next(u for u in pool.instance_group_urls if f"/zones/{zone}/" in u)
    igm = clients.instance_group_managers(gcp.url).get(
        project=PROJECT, zone=zone, instance_group_manager=url.rsplit("/", 1)[-1]
    )
    return int(igm.current_actions.creating)


def test_a_zone_stockout_ends_the_resize_done_with_an_error(gcp_pool: GcpEmulator) -> None:
    gcp_pool.stock_out("a3-highgpu-8g", ZONES[:1])

    op = _resize_and_wait(gcp_pool, 1)
    pool = clients.gke(gcp_pool.url).get_node_pool(name=POOL)

    assert op.error.code == 8  # RESOURCE_EXHAUSTED
    assert op.status_message == op.error.message
    assert op.error.message.startswith("us-central1-a: Deploy error: Not all instances running in IGM")
    assert "[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]" in op.error.message
    assert pool.status == RUNNING_WITH_ERROR
    assert "us-central1-a" in pool.status_message
    assert "us-central1-b" not in pool.status_message
    assert (_creating(gcp_pool, "us-central1-a"), _creating(gcp_pool, "us-central1-b")) == (1, 0)
    assert gcp_pool.running_nodes(PROJECT, REGION, CLUSTER, "h100") == 1


def test_the_instance_groups_keep_trying_and_deliver_when_capacity_is_back(gcp_pool: GcpEmulator) -> None:
    gcp_pool.stock_out("a3-highgpu-8g", ZONES)
    _resize_and_wait(gcp_pool, 1)

    gcp_pool.restock()
    pool = clients.gke(gcp_pool.url).get_node_pool(name=POOL)

    assert pool.status == container_v1.NodePool.Status.RUNNING
    assert pool.status_message == ""
    assert _creating(gcp_pool, "us-central1-a") == 0
    assert gcp_pool.running_nodes(PROJECT, REGION, CLUSTER, "h100") == 2


def test_the_regional_gpu_quota_is_counted_in_gpus(gcp_pool: GcpEmulator) -> None:
    gcp_pool.set_quota(PROJECT, "NVIDIA-H100-GPUS-per-project-region", REGION, 8)  # one a3-highgpu-8g

    op = _resize_and_wait(gcp_pool, 1)

    assert "[QUOTA_EXCEEDED]" in op.error.message
    assert "Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 8.0 in region us-central1." in op.error.message
    assert gcp_pool.running_nodes(PROJECT, REGION, CLUSTER, "h100") == 1


def test_scaling_down_clears_the_error(gcp_pool: GcpEmulator) -> None:
    gcp_pool.stock_out("a3-highgpu-8g", ZONES)
    _resize_and_wait(gcp_pool, 2)

    op = _resize_and_wait(gcp_pool, 0)
    pool = clients.gke(gcp_pool.url).get_node_pool(name=POOL)

    assert "error" not in op
    assert pool.status == container_v1.NodePool.Status.RUNNING
