"""GKE node pools through the real container_v1 REST client against the GCP emulator."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from google.api_core import exceptions
from google.cloud import container_v1

from tests.emulators.gcp import GcpEmulator, clients
from tests.emulators.gcp.wire import GoogleError

pytestmark = pytest.mark.integration

PROJECT, REGION, CLUSTER = "proj", "us-central1", "ml"
ZONES = ("us-central1-a", "us-central1-b")
LOC = f"projects/{PROJECT}/locations/{REGION}"
POOL = f"{LOC}/clusters/{CLUSTER}/nodePools/a100"
Status = container_v1.Operation.Status


@pytest.fixture
def pool(gcp: GcpEmulator) -> str:
    gcp.add_node_pool(
        PROJECT,
        REGION,
        CLUSTER,
        "a100",
        zones=ZONES,
        per_zone_count=2,
        machine_type="a2-highgpu-1g",
        accelerator_type="nvidia-tesla-a100",
        accelerator_count=1,
        labels={"team": "vision"},
    )
    return POOL


def _poll(client: container_v1.ClusterManagerClient, op: container_v1.Operation) -> container_v1.Operation:
    return client.get_operation(name=f"{LOC}/operations/{op.name}")


def _resize(client: container_v1.ClusterManagerClient, name: str, count: int) -> container_v1.Operation:
    return client.set_node_pool_size(request={"name": name, "node_count": count})


def _autoscale(
    client: container_v1.ClusterManagerClient, name: str, **autoscaling: int | bool
) -> container_v1.Operation:
    return client.set_node_pool_autoscaling(request={"name": name, "autoscaling": autoscaling})


def _target_sizes(gcp: GcpEmulator, node_pool: container_v1.NodePool) -> list[int]:
    """Read the live size the way the real API exposes it: the pool's per-zone instance group managers."""
    igms = clients.instance_group_managers(gcp.url)
    sizes = []
    for url in node_pool.instance_group_urls:
        parts = url.split("/")
        sizes.append(igms.get(project=parts[-5], zone=parts[-3], instance_group_manager=parts[-1]).target_size)
    return sizes


def test_node_pool_shape(gcp: GcpEmulator, pool: str) -> None:
    got = clients.gke(gcp.url).get_node_pool(name=pool)

    assert got.config.machine_type == "a2-highgpu-1g"
    assert [(a.accelerator_type, a.accelerator_count) for a in got.config.accelerators] == [("nvidia-tesla-a100", 1)]
    assert dict(got.config.labels) == {"team": "vision"}
    assert [(t.key, t.effect) for t in got.config.taints] == [
        ("nvidia.com/gpu", container_v1.NodeTaint.Effect.NO_SCHEDULE)
    ]
    assert list(got.locations) == list(ZONES)
    assert got.initial_node_count == 2
    assert got.status == container_v1.NodePool.Status.RUNNING
    assert "autoscaling" not in got


def test_set_size_changes_the_pool_only_when_its_operation_is_done(gcp: GcpEmulator, pool: str) -> None:
    client = clients.gke(gcp.url)
    gcp.operation_seconds = 0.3

    op = _resize(client, pool, 0)

    assert op.operation_type == container_v1.Operation.Type.SET_NODE_POOL_SIZE
    assert op.status == Status.PENDING
    assert op.target_link.endswith(f"/clusters/{CLUSTER}/nodePools/a100")
    assert client.get_node_pool(name=pool).status == container_v1.NodePool.Status.RECONCILING
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 2

    for _ in range(5):  # polling does not hurry it
        assert _poll(client, op).status == Status.RUNNING
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 2

    time.sleep(0.35)
    done = _poll(client, op)
    assert done.status == Status.DONE
    assert done.end_time
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0
    after = client.get_node_pool(name=pool)
    assert after.status == container_v1.NodePool.Status.RUNNING
    assert after.initial_node_count == 2  # the creation value: a pool reports no live node count
    assert _target_sizes(gcp, after) == [0, 0]


def test_node_count_is_per_zone(gcp: GcpEmulator, pool: str) -> None:
    client = clients.gke(gcp.url)
    gcp.operation_polls = 0

    op = _resize(client, pool, 3)

    assert op.status == Status.DONE
    assert _target_sizes(gcp, client.get_node_pool(name=pool)) == [3, 3]  # 6 nodes in all


def test_zero_is_omitted_on_the_wire_and_reads_back_as_zero(gcp: GcpEmulator) -> None:
    gcp.add_node_pool(PROJECT, REGION, CLUSTER, "a100", zones=ZONES, per_zone_count=0, autoscaling=(0, 2))
    client = clients.gke(gcp.url)
    gcp.operation_polls = 0

    _resize(client, POOL, 0)

    sent = next(r for r in gcp.log.all() if r.operation == "nodePools.setSize")
    assert json.loads(sent.body) == {}  # proto3 JSON: node_count 0 is the default, so it is not sent
    with urllib.request.urlopen(f"{gcp.url}/v1/{POOL}") as response:
        raw = json.load(response)
    assert "initialNodeCount" not in raw
    assert raw["autoscaling"] == {"enabled": True, "maxNodeCount": 2, "locationPolicy": "BALANCED"}
    got = client.get_node_pool(name=POOL)
    assert (got.initial_node_count, got.autoscaling.min_node_count) == (0, 0)
    # Compute is not proto3-on-the-wire in that respect: its optional fields are sent even when zero.
    igm_url = got.instance_group_urls[0].replace("https://www.googleapis.com", gcp.url)
    with urllib.request.urlopen(igm_url) as response:
        assert json.load(response)["targetSize"] == 0
    assert _target_sizes(gcp, got) == [0, 0]


def test_a_second_write_to_the_same_pool_is_refused(gcp: GcpEmulator, pool: str) -> None:
    gcp.add_node_pool(PROJECT, REGION, "other", "a100", zones=ZONES, per_zone_count=1)
    client = clients.gke(gcp.url)
    first = _resize(client, pool, 0)

    with pytest.raises(exceptions.BadRequest) as refused:
        _autoscale(client, pool, enabled=False)

    # Over REST the class follows the HTTP status (400 -> BadRequest, not FailedPrecondition); the gRPC
    # status and the reason travel in the body.
    assert refused.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
    assert refused.value.domain == "container.googleapis.com"
    assert refused.value.response.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert first.name in refused.value.message
    _resize(client, f"{LOC}/clusters/other/nodePools/a100", 0)  # another cluster is not blocked

    while _poll(client, first).status != Status.DONE:
        pass
    assert _resize(client, pool, 1).status == Status.PENDING


def test_writes_to_different_pools_of_one_cluster_run_concurrently(gcp: GcpEmulator, pool: str) -> None:
    # GKE docs (Troubleshoot concurrent operations): "GKE only allows one cluster-level operation at a time or
    # one operation per node pool".
    gcp.add_node_pool(PROJECT, REGION, CLUSTER, "l4", zones=ZONES, per_zone_count=1)
    client = clients.gke(gcp.url)
    l4 = f"{LOC}/clusters/{CLUSTER}/nodePools/l4"

    first = _resize(client, pool, 0)
    second = _autoscale(client, l4, enabled=False)

    assert first.status == second.status == Status.PENDING
    assert second.target_link.endswith("/nodePools/l4")
    gcp.finish_operations()
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0
    assert gcp.node_pool(PROJECT, REGION, CLUSTER, "l4").autoscaling is None


def test_a_cluster_level_operation_blocks_every_pool_and_waits_for_them(gcp: GcpEmulator, pool: str) -> None:
    gcp.add_node_pool(PROJECT, REGION, CLUSTER, "l4", zones=ZONES, per_zone_count=1)
    client = clients.gke(gcp.url)
    upgrade = gcp.start_cluster_operation(PROJECT, REGION, CLUSTER)

    for name in (pool, f"{LOC}/clusters/{CLUSTER}/nodePools/l4"):
        with pytest.raises(exceptions.BadRequest, match=upgrade) as refused:
            _resize(client, name, 0)
        assert refused.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"

    gcp.finish_operations()
    _resize(client, pool, 0)
    with pytest.raises(GoogleError, match="incompatible operation"):
        gcp.start_cluster_operation(PROJECT, REGION, CLUSTER)  # nor may a cluster-level one start meanwhile


def test_the_concurrent_operations_quota_is_five_per_cluster(gcp: GcpEmulator) -> None:
    client = clients.gke(gcp.url)
    for index in range(6):
        gcp.add_node_pool(PROJECT, REGION, CLUSTER, f"p{index}", zones=ZONES, per_zone_count=1)
    for index in range(5):
        _resize(client, f"{LOC}/clusters/{CLUSTER}/nodePools/p{index}", 0)

    with pytest.raises(exceptions.TooManyRequests, match="concurrent operations quota 5"):
        _resize(client, f"{LOC}/clusters/{CLUSTER}/nodePools/p5", 0)


def test_autoscaling_disable_then_enable_round_trip(gcp: GcpEmulator) -> None:
    gcp.add_node_pool(PROJECT, REGION, CLUSTER, "a100", zones=ZONES, per_zone_count=2, autoscaling=(1, 3))
    client = clients.gke(gcp.url)
    gcp.operation_polls = 1
    before = client.get_node_pool(name=POOL).autoscaling
    assert (before.enabled, before.min_node_count, before.max_node_count) == (True, 1, 3)

    disable = _autoscale(client, POOL, enabled=False)
    assert disable.operation_type == container_v1.Operation.Type.UPDATE_CLUSTER
    assert client.get_node_pool(name=POOL).autoscaling.enabled  # not before DONE
    assert _poll(client, disable).status == Status.DONE
    assert not client.get_node_pool(name=POOL).autoscaling.enabled

    assert _poll(client, _resize(client, POOL, 0)).status == Status.DONE  # a separate operation
    enable = _autoscale(client, POOL, enabled=True, min_node_count=0, max_node_count=4)
    assert json.loads(gcp.log.writes()[-1].body) == {"autoscaling": {"enabled": True, "maxNodeCount": 4}}
    _poll(client, enable)

    after = client.get_node_pool(name=POOL).autoscaling
    assert (after.enabled, after.min_node_count, after.max_node_count) == (True, 0, 4)
    assert after.location_policy == container_v1.NodePoolAutoscaling.LocationPolicy.BALANCED
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0


def test_set_size_is_allowed_while_autoscaling_is_enabled(gcp: GcpEmulator) -> None:
    gcp.add_node_pool(PROJECT, REGION, CLUSTER, "a100", zones=ZONES, per_zone_count=2, autoscaling=(1, 3))
    gcp.operation_polls = 0

    clients.gke(gcp.url).set_node_pool_size(request={"name": POOL, "node_count": 0})

    # The autoscaler does not pull a pool back into [min, max] by itself; it only reacts to pods and idle nodes.
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0
    assert gcp.node_pool(PROJECT, REGION, CLUSTER, "a100").autoscaling is not None


@pytest.mark.parametrize(
    "autoscaling",
    [
        {"enabled": True, "min_node_count": 0, "max_node_count": 0},
        {"enabled": True, "min_node_count": 3, "max_node_count": 2},
        {"enabled": True, "max_node_count": 2, "total_max_node_count": 4},
    ],
    ids=["max-zero", "min-above-max", "per-zone-and-total"],
)
def test_invalid_autoscaling_limits_are_refused(
    gcp: GcpEmulator, pool: str, autoscaling: dict[str, int | bool]
) -> None:
    with pytest.raises(exceptions.BadRequest) as refused:
        _autoscale(clients.gke(gcp.url), pool, **autoscaling)

    assert refused.value.response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert gcp.log.count("nodePools.setAutoscaling") == 1
    assert not gcp.gke.operations


def test_spot_pool_defaults_to_location_policy_any(gcp: GcpEmulator) -> None:
    gcp.add_node_pool(PROJECT, REGION, CLUSTER, "a100", zones=ZONES, per_zone_count=0, spot=True)
    client = clients.gke(gcp.url)
    gcp.operation_polls = 0

    _autoscale(client, POOL, enabled=True, total_min_node_count=0, total_max_node_count=6)

    got = client.get_node_pool(name=POOL)
    assert got.config.spot
    assert got.autoscaling.total_max_node_count == 6
    assert got.autoscaling.location_policy == container_v1.NodePoolAutoscaling.LocationPolicy.ANY


def test_list_clusters_across_locations_and_pools(gcp: GcpEmulator, pool: str) -> None:
    gcp.add_node_pool(PROJECT, "europe-west4-a", "eu", "l4", zones=["europe-west4-a"], per_zone_count=1)
    gcp.add_node_pool("someone-else", REGION, "x", "l4", zones=ZONES, per_zone_count=1)
    client = clients.gke(gcp.url)

    everywhere = client.list_clusters(parent=f"projects/{PROJECT}/locations/-").clusters
    regional = client.list_clusters(parent=LOC).clusters
    pools = client.list_node_pools(parent=f"{LOC}/clusters/{CLUSTER}").node_pools

    assert sorted((c.location, c.name) for c in everywhere) == [("europe-west4-a", "eu"), (REGION, CLUSTER)]
    assert [c.name for c in regional] == [CLUSTER]
    assert [p.name for p in regional[0].node_pools] == ["a100"]
    assert [p.name for p in pools] == ["a100"]
    assert client.get_cluster(name=f"{LOC}/clusters/{CLUSTER}").locations == list(ZONES)


def test_missing_pool_and_operation_are_not_found(gcp: GcpEmulator, pool: str) -> None:
    client = clients.gke(gcp.url)

    with pytest.raises(exceptions.NotFound):
        client.get_node_pool(name=f"{LOC}/clusters/{CLUSTER}/nodePools/nope")
    with pytest.raises(exceptions.NotFound):
        _resize(client, f"{LOC}/clusters/nope/nodePools/a100", 1)
    with pytest.raises(exceptions.NotFound):
        client.get_operation(name=f"{LOC}/operations/operation-1-deadbeef", retry=None)


def test_finish_operations_hook_completes_pending_work(gcp: GcpEmulator, pool: str) -> None:
    client = clients.gke(gcp.url)
    op = _resize(client, pool, 5)

    gcp.finish_operations()

    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 5
    assert _poll(client, op).status == Status.DONE


# ----- operations finish with time, polled or not -------------------------------------------------------------


def test_a_resize_nobody_polls_reaches_the_pool_after_its_duration(gcp: GcpEmulator, pool: str) -> None:
    """A person's set_node_pool_size over REST, then silence: GKE still resizes the pool, with time."""
    gcp.operation_seconds = 0.2
    client = clients.gke(gcp.url)
    stored = gcp.gke.find_pool(PROJECT, REGION, CLUSTER, "a100")
    assert stored is not None

    op = _resize(client, pool, 0)
    meanwhile = stored.size
    time.sleep(0.4)  # no request of any kind reaches the emulator meanwhile

    assert (meanwhile, stored.size) == (2, 0)  # the stored pool itself, read without any refresh
    assert stored.running == dict.fromkeys(ZONES, 0)
    assert gcp.log.operations() == ["nodePools.setSize"]
    assert _poll(client, op).status == Status.DONE


def test_an_operation_nobody_polls_finishes_once_its_time_is_up(gcp: GcpEmulator, pool: str) -> None:
    gcp.operation_polls = 1_000_000  # polls alone would never finish it
    gcp.operation_seconds = 0.05
    client = clients.gke(gcp.url)
    op = _resize(client, pool, 0)
    assert client.get_node_pool(name=pool).status == container_v1.NodePool.Status.RECONCILING

    time.sleep(0.1)

    # No operations.get in between: the pool reads resized and the cluster takes the next write.
    assert client.get_node_pool(name=pool).status == container_v1.NodePool.Status.RUNNING
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0
    assert _resize(client, pool, 1).status == Status.PENDING
    done = _poll(client, op)
    assert done.status == Status.DONE
    assert done.end_time
    assert "operations.get" not in gcp.log.operations()[:-1]


def test_polls_finish_an_operation_early_only_when_a_test_asks(gcp: GcpEmulator, pool: str) -> None:
    gcp.operation_polls = 1
    gcp.operation_seconds = 3600.0
    client = clients.gke(gcp.url)

    assert _poll(client, _resize(client, pool, 0)).status == Status.DONE
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0


def test_operations_finish_with_time_by_default(gcp: GcpEmulator, pool: str) -> None:
    assert gcp.operation_polls is None
    assert gcp.operation_seconds is not None
    assert 0 < gcp.operation_seconds <= 1
    client = clients.gke(gcp.url)

    op = _resize(client, pool, 1)
    polls = [_poll(client, op).status for _ in range(5)]

    assert polls == [Status.RUNNING] * 5  # five polls in a row do not finish it


def test_the_pools_own_autoscaler_resizes_it_within_its_bounds_and_only_while_on(gcp: GcpEmulator) -> None:
    """GKE's cluster autoscaler (the simulated week's model drives it): its size shows in the instance groups, as a
    setSize's does; it never leaves the per-zone bounds, and a pool whose autoscaling is off is not its to size."""
    gcp.add_node_pool(PROJECT, REGION, CLUSTER, "a100", zones=ZONES, per_zone_count=2, autoscaling=(1, 3))
    client = clients.gke(gcp.url)

    gcp.autoscale(PROJECT, REGION, CLUSTER, "a100", 1)
    assert _target_sizes(gcp, client.get_node_pool(name=POOL)) == [1, 1]
    for outside in (0, 4):
        with pytest.raises(ValueError, match=r"outside its autoscaling bounds 1\.\.3"):
            gcp.autoscale(PROJECT, REGION, CLUSTER, "a100", outside)

    gcp.operation_polls = 1
    _poll(client, _autoscale(client, POOL, enabled=False))
    with pytest.raises(ValueError, match="autoscaling is off"):
        gcp.autoscale(PROJECT, REGION, CLUSTER, "a100", 2)
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 1
