"""The GKE node pool adapter against the GCP emulator, through the real container_v1 / compute_v1 REST clients."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions

from jobs.adapters.gcp.nodegroups import PERMISSIONS, GkeNodePools
from jobs.adapters.settings import AdapterSettings
from jobs.commands.nodegroup_clouds import nodegroup_cloud
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetAutoscaling, SetPower, SetSize, Step, down_config, steps_between
from jobs.core.policy import NodeGroup
from jobs.core.providers import rules_for
from jobs.errors import Busy, CloudError, Conflict, Denied, Invalid, NotDelivered, NotFound, Throttled, Unavailable
from tests.emulators.base import FaultKind, start
from tests.emulators.gcp import GcpEmulator, clients

pytestmark = pytest.mark.integration

PROJECT, REGION, CLUSTER = "proj", "us-central1", "ml"
ZONES = ("us-central1-a", "us-central1-b")
LOC = f"projects/{PROJECT}/locations/{REGION}"


def _settings(url: str, **overrides: float) -> AdapterSettings:
    values: dict[str, Any] = {"poll_interval_s": 0.01, "operation_timeout_s": 5.0, "request_timeout_s": 2.0}
    values.update(overrides)
    return AdapterSettings(gcp_endpoint=url, emulator_credentials=True, **values)


@pytest.fixture
def adapter(gcp: GcpEmulator) -> GkeNodePools:
    return GkeNodePools(_settings(gcp.url))


def _group(pool: str, cluster: str = CLUSTER, name: str | None = None) -> NodeGroup:
    locator = {"project": PROJECT, "location": REGION, "cluster": cluster, "nodePool": pool}
    return NodeGroup.model_validate({"name": name or f"{cluster}-{pool}", "cloud": "gcp", "gcp": locator})


def _path(pool: str, cluster: str = CLUSTER) -> str:
    return f"{LOC}/clusters/{cluster}/nodePools/{pool}"


def _seed(
    gcp: GcpEmulator,
    pool: str = "a100",
    *,
    cluster: str = CLUSTER,
    per_zone: int = 2,
    autoscaling: tuple[int, int] | None = (1, 3),
    zones: Iterable[str] = ZONES,
    accelerator_count: int = 1,
) -> NodeGroup:
    gcp.add_node_pool(
        PROJECT,
        REGION,
        cluster,
        pool,
        zones=zones,
        per_zone_count=per_zone,
        machine_type="a2-highgpu-1g",
        accelerator_type="nvidia-tesla-a100" if accelerator_count else "",
        accelerator_count=accelerator_count,
        autoscaling=autoscaling,
    )
    return _group(pool, cluster)


def _writes(gcp: GcpEmulator) -> list[str]:
    return [r.operation for r in gcp.log.writes()]


def _apply_all(adapter: GkeNodePools, group: NodeGroup, steps: list[Step]) -> None:
    for step in steps:
        adapter.apply(group, step)


# ----- wiring ------------------------------------------------------------------------------------------------


def test_registry_builds_the_adapter_and_the_permissions_cover_its_calls(gcp: GcpEmulator) -> None:
    built = nodegroup_cloud("gke", _settings(gcp.url))
    group = _seed(gcp)

    assert isinstance(built, GkeNodePools)
    # The provider kind and the node label are the resolved policy's, from the locator.
    rules = rules_for(group.cloud, group.locator)
    assert rules.kind == "gke"
    assert (rules.node_label, getattr(group.locator, rules.group_field)) == ("cloud.google.com/gke-nodepool", "a100")
    assert set(PERMISSIONS.actions) == {
        "container.clusters.get",
        "container.clusters.update",
        "container.operations.get",
        "compute.instanceGroupManagers.get",
    }


# ----- describe ----------------------------------------------------------------------------------------------


def test_describe_reads_autoscaling_bounds_per_zone_in_one_read(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, autoscaling=(1, 3))

    got = adapter.describe(group)

    assert got == GroupConfig(min=1, desired=None, max=3, autoscaling=True, autoscaler_profile="BALANCED", zones=2)
    assert gcp.log.operations() == ["nodePools.get"]  # one read: a pool reports no live count, none is fetched


def test_describe_of_a_fixed_size_pool(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, autoscaling=None, zones=ZONES[:1], per_zone=4)

    assert adapter.describe(group) == GroupConfig(min=0, desired=None, max=0, autoscaling=False, zones=1)
    assert adapter.describe(group, live_size=True).desired == 4


def test_live_size_reads_the_instance_group_managers(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, per_zone=3, autoscaling=(1, 5))

    got = adapter.describe(group, live_size=True)

    # Per zone: 6 nodes in all.
    assert got == GroupConfig(min=1, desired=3, max=5, autoscaling=True, autoscaler_profile="BALANCED", zones=2)
    assert gcp.log.operations() == ["nodePools.get", "instanceGroupManagers.get", "instanceGroupManagers.get"]


def test_zero_values_omitted_on_the_wire_read_back_as_zero(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, per_zone=0, autoscaling=(0, 2))
    raw = clients.gke(gcp.url).get_node_pool(name=_path("a100"))
    assert "initial_node_count" not in raw  # proto3 JSON sent no 0 (and no minNodeCount either)

    got = adapter.describe(group, live_size=True)

    assert (got.min, got.desired, got.max) == (0, 0, 2)


def test_total_limits_map_to_the_per_zone_bounds_inside_them(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, autoscaling=None)
    total = {"enabled": True, "total_min_node_count": 3, "total_max_node_count": 7}
    clients.gke(gcp.url).set_node_pool_autoscaling(request={"name": _path("a100"), "autoscaling": total})
    gcp.finish_operations()

    got = adapter.describe(group)

    # 2 zones: at least 2 per zone keeps >= 3 in all, at most 3 per zone keeps <= 7 (GroupConfig has no totals).
    assert (got.autoscaling, got.min, got.max) == (True, 2, 3)


def test_describe_reports_a_running_operation_as_busy(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp)
    assert not adapter.describe(group).busy
    clients.gke(gcp.url).set_node_pool_size(request={"name": _path("a100"), "node_count": 1})

    assert adapter.describe(group).busy  # RECONCILING until the operation is DONE


def test_describe_of_a_missing_pool_is_not_found(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    _seed(gcp)

    with pytest.raises(NotFound) as caught:
        adapter.describe(_group("gone"))

    assert caught.value.operation == "nodePools.get"
    assert caught.value.code == "NOT_FOUND"


# ----- apply -------------------------------------------------------------------------------------------------


def test_set_size_returns_only_when_the_operation_is_done(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, per_zone=2)
    gcp.operation_polls, gcp.operation_seconds = 3, None  # DONE on the third poll, not before

    adapter.apply(group, SetSize(0, 0, 0))

    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0  # the change lands only at DONE
    assert gcp.log.count("operations.get") == 3
    sent = next(r for r in gcp.log.all() if r.operation == "nodePools.setSize")
    assert json.loads(sent.body) == {}  # node_count 0 per zone, omitted by proto3 JSON
    assert adapter.describe(group, live_size=True).desired == 0


def test_set_size_is_per_zone(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, per_zone=0, autoscaling=None)

    adapter.apply(group, SetSize(0, 3, 0))

    sent = next(r for r in gcp.log.all() if r.operation == "nodePools.setSize")
    assert json.loads(sent.body) == {"nodeCount": 3}
    assert adapter.describe(group, live_size=True) == GroupConfig(min=0, desired=3, max=0, zones=2)


def test_set_autoscaling_off_then_on_with_bounds(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, autoscaling=(1, 3))

    adapter.apply(group, SetAutoscaling(False))
    assert gcp.node_pool(PROJECT, REGION, CLUSTER, "a100").autoscaling is None
    assert not adapter.describe(group).autoscaling

    adapter.apply(group, SetAutoscaling(True, 0, 4, profile="ANY"))
    assert adapter.describe(group) == GroupConfig(
        min=0, desired=None, max=4, autoscaling=True, autoscaler_profile="ANY", zones=2
    )
    assert _writes(gcp) == ["nodePools.setAutoscaling", "nodePools.setAutoscaling"]


def test_operation_that_never_finishes_times_out(gcp: GcpEmulator) -> None:
    group = _seed(gcp)
    gcp.operation_polls, gcp.operation_seconds = 1_000_000, None  # an operation that never finishes
    adapter = GkeNodePools(_settings(gcp.url, operation_timeout_s=0.1))

    with pytest.raises(Unavailable, match=r"not DONE after 0\.1s") as caught:
        adapter.apply(group, SetSize(0, 0, 0))

    assert caught.value.code == "OPERATION_TIMEOUT"
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 2


def test_transient_poll_failures_do_not_fail_the_step(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp)
    gcp.faults.inject("operations.get", "server_error")
    gcp.faults.inject("operations.get", "throttle")

    adapter.apply(group, SetSize(0, 1, 0))

    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 1
    assert _writes(gcp) == ["nodePools.setSize"]  # a failed poll is a read: the write is not repeated


def _failing_operations(app: GcpEmulator) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    """The emulator, except that a DONE operation carries an error, as GKE reports a failed resize."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if "/operations/" not in environ["PATH_INFO"]:
            return app(environ, start_response)
        captured: list[Any] = []
        body = json.loads(b"".join(app(environ, lambda *args: captured.append(args))))
        if body.get("status") in ("DONE", 3):
            message = "Insufficient regional quota to satisfy request: resource NVIDIA_A100_GPUS."
            body.update(statusMessage=message, error={"code": 8, "message": message})
        data = json.dumps(body).encode()
        status, headers = captured[0][:2]
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response(status, [*headers, ("Content-Length", str(len(data)))])
        return [data]

    return wrapped


def test_an_operation_that_ends_in_error_raises() -> None:
    emulator = GcpEmulator(operation_polls=1)
    running = start(_failing_operations(emulator))
    try:
        group = _seed(emulator, autoscaling=None, per_zone=0)
        adapter = GkeNodePools(_settings(running.url))

        with pytest.raises(CloudError, match="Insufficient regional quota") as caught:
            adapter.apply(group, SetSize(0, 2, 0))

        # RESOURCE_EXHAUSTED: the size is set and the instance groups keep trying; resending it would change nothing.
        assert isinstance(caught.value, NotDelivered)
        assert caught.value.code == "8"
    finally:
        running.stop()


# ----- the job's sequences -----------------------------------------------------------------------------------


def test_down_then_up_restores_the_exact_autoscaling_config(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, per_zone=2, autoscaling=(1, 3))
    original = adapter.describe(group, live_size=True)
    down = down_config("gke", original)

    going_down = steps_between("gke", original, down)
    assert going_down == [SetAutoscaling(False), SetSize(1, 0, 3)]  # autoscaler off first, then 0 per zone
    _apply_all(adapter, group, going_down)
    at_night = adapter.describe(group, live_size=True)
    assert not steps_between("gke", at_night, down)
    assert (at_night.autoscaling, at_night.desired) == (False, 0)

    going_up = steps_between("gke", at_night, original)
    # Size first, autoscaler last, with its location policy as it was.
    assert going_up == [SetSize(1, 2, 3), SetAutoscaling(True, 1, 3, profile="BALANCED")]
    _apply_all(adapter, group, going_up)

    assert adapter.describe(group, live_size=True) == original  # bounds, autoscaling, zones and size all back
    assert not steps_between("gke", adapter.describe(group), original)  # a second run plans nothing
    assert _writes(gcp) == [
        "nodePools.setAutoscaling",
        "nodePools.setSize",
        "nodePools.setSize",
        "nodePools.setAutoscaling",
    ]
    bodies = [json.loads(r.body) for r in gcp.log.writes()]
    # The REST transport sends enums as numbers: 1 is BALANCED.
    assert bodies[-1] == {"autoscaling": {"enabled": True, "minNodeCount": 1, "maxNodeCount": 3, "locationPolicy": 1}}


def test_down_then_up_of_a_fixed_size_pool_restores_its_size(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, per_zone=3, autoscaling=None)
    original = adapter.describe(group, live_size=True)

    _apply_all(adapter, group, steps_between("gke", original, down_config("gke", original)))
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0
    _apply_all(adapter, group, steps_between("gke", adapter.describe(group, live_size=True), original))

    assert adapter.describe(group, live_size=True) == original
    assert _writes(gcp) == ["nodePools.setSize", "nodePools.setSize"]


# ----- faults ------------------------------------------------------------------------------------------------

EXPECTED: dict[FaultKind, type[CloudError]] = {
    "throttle": Throttled,
    "server_error": Unavailable,
    "busy": Busy,
    "timeout": Unavailable,
    "conflict": Conflict,
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_faults_on_describe(gcp: GcpEmulator, kind: FaultKind) -> None:
    group = _seed(gcp)
    gcp.timeout_hold_s = 0.1  # shorter than the client timeout: the 504 itself arrives
    gcp.faults.inject("nodePools.get", kind)

    with pytest.raises(EXPECTED[kind]) as caught:
        GkeNodePools(_settings(gcp.url)).describe(group)

    assert caught.value.operation == "nodePools.get"
    assert caught.value.code
    assert gcp.log.count("nodePools.get") == 1  # the SDK's own retry is off


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_faults_on_apply(gcp: GcpEmulator, adapter: GkeNodePools, kind: FaultKind) -> None:
    group = _seed(gcp)
    gcp.timeout_hold_s = 0.1
    gcp.faults.inject("nodePools.setSize", kind)

    with pytest.raises(EXPECTED[kind]) as caught:
        adapter.apply(group, SetSize(0, 0, 0))

    assert caught.value.operation == "nodePools.setSize"
    assert gcp.log.count("nodePools.setSize") == 1
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 2


@pytest.mark.parametrize("reason", ["rateLimitExceeded", "userRateLimitExceeded"])
@pytest.mark.parametrize("operation", ["nodePools.setSize", "instanceGroupManagers.get"])
def test_a_rate_limit_403_is_throttled_not_denied(
    gcp: GcpEmulator, adapter: GkeNodePools, operation: str, reason: str
) -> None:
    group = _seed(gcp)
    gcp.inject_rate_limit_403(operation, reason)

    def call() -> object:
        if operation == "nodePools.setSize":
            return adapter.apply(group, SetSize(0, 0, 0))
        return adapter.describe(group, live_size=True)

    with pytest.raises(Throttled) as caught:  # retryable: the job backs off and tries again
        call()

    assert caught.value.code == reason
    assert caught.value.operation == operation
    assert caught.value.retryable


def test_a_permission_403_stays_denied(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp)
    gcp.inject_permission_denied("nodePools.setSize", "container.clusters.update")

    with pytest.raises(Denied) as caught:
        adapter.apply(group, SetSize(0, 0, 0))

    assert caught.value.code == "IAM_PERMISSION_DENIED"
    assert not caught.value.retryable
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 2


def test_a_client_side_timeout_is_unavailable(gcp: GcpEmulator) -> None:
    group = _seed(gcp)
    gcp.timeout_hold_s = 0.5  # the server holds longer than the client waits
    gcp.faults.inject("nodePools.get", "timeout")

    with pytest.raises(Unavailable) as caught:
        GkeNodePools(_settings(gcp.url, request_timeout_s=0.1)).describe(group)

    assert caught.value.code == "ReadTimeout"


def test_busy_codes_carry_the_gke_reason(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp)
    gcp.faults.inject("nodePools.setAutoscaling", "busy")

    with pytest.raises(Busy) as caught:
        adapter.apply(group, SetAutoscaling(False))

    assert caught.value.code == "CLUSTER_ALREADY_HAS_OPERATION"


def test_a_write_while_the_cluster_runs_a_cluster_operation_is_busy(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, "a100")
    upgrade = gcp.start_cluster_operation(PROJECT, REGION, CLUSTER)

    with pytest.raises(Busy, match=upgrade):
        adapter.apply(group, SetSize(0, 0, 0))

    assert len(gcp.gke.operations) == 1  # nothing was started; the job retries Busy with backoff
    gcp.finish_operations()
    adapter.apply(group, SetSize(0, 0, 0))  # once the other operation is DONE the same step goes through
    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0


def test_writes_to_two_pools_of_one_cluster_go_through_at_once(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp, "a100")
    _seed(gcp, "l4")
    gcp.operation_seconds = 60  # the l4 operation outlasts the test; the a100 one below is quick
    running = clients.gke(gcp.url).set_node_pool_size(request={"name": _path("l4"), "node_count": 0})
    gcp.operation_seconds = 0.05

    adapter.apply(group, SetSize(0, 0, 0))  # not Busy: one operation per node pool, not per cluster

    assert gcp.node_pool_size(PROJECT, REGION, CLUSTER, "a100") == 0
    assert running.name in {op.staged.name for op in gcp.gke.operations.values() if not op.staged.done}


# ----- provider rules, refused before any call -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (SetAutoscaling(True, 0, 0), "1 <= max"),
        (SetAutoscaling(True, 3, 2), "0 <= min <= max"),
        (SetAutoscaling(True, -1, 2), "0 <= min <= max"),
        (SetSize(0, -1, 0), "node count per zone"),
        (SetSize(0, 1001, 1001), "node count per zone"),
        (SetPower(True), "no power state"),
    ],
)
def test_provider_rules_are_refused_before_the_call(
    gcp: GcpEmulator, adapter: GkeNodePools, step: Step, message: str
) -> None:
    group = _seed(gcp)

    with pytest.raises(Invalid, match=message):
        adapter.apply(group, step)

    assert gcp.log.all() == []  # nothing was sent


@pytest.mark.parametrize(
    "autoscaling", [{"enabled": True, "max_node_count": 0}, {"enabled": True, "min_node_count": 3, "max_node_count": 2}]
)
def test_the_emulator_refuses_the_same_autoscaling_bounds(gcp: GcpEmulator, autoscaling: dict[str, Any]) -> None:
    _seed(gcp)

    with pytest.raises(exceptions.BadRequest):
        clients.gke(gcp.url).set_node_pool_autoscaling(request={"name": _path("a100"), "autoscaling": autoscaling})


# ----- discover ----------------------------------------------------------------------------------------------


def test_discover_lists_gpu_pools_of_the_policy_clusters(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    a100 = _seed(gcp, "a100")
    h100 = _seed(gcp, "h100", accelerator_count=8)
    _seed(gcp, "cpu", accelerator_count=0)
    other = _seed(gcp, "l4", cluster="other")
    _seed(gcp, "t4", cluster="unlisted")

    found = adapter.discover([a100, h100, other])

    def cloud_group(cluster: str, pool: str, gpus: int) -> CloudGroup:
        locator = {"project": PROJECT, "location": REGION, "cluster": cluster, "nodePool": pool}
        return CloudGroup("gcp", locator, "a2-highgpu-1g", gpus)

    assert sorted(found, key=lambda g: (g.locator["cluster"], g.locator["nodePool"])) == [
        cloud_group("ml", "a100", 1),
        cloud_group("ml", "h100", 8),
        cloud_group("other", "l4", 1),
    ]
    assert gcp.log.operations() == ["nodePools.list", "nodePools.list"]  # one read per distinct cluster


def test_discover_translates_errors(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    group = _seed(gcp)
    gcp.faults.inject("nodePools.list", "throttle")

    with pytest.raises(Throttled):
        adapter.discover([group])


# ----- threads -----------------------------------------------------------------------------------------------


def test_concurrent_describe_and_apply_across_clusters(gcp: GcpEmulator, adapter: GkeNodePools) -> None:
    groups = [_seed(gcp, f"pool{i}", cluster=f"c{i}", per_zone=2) for i in range(8)]

    def cycle(group: NodeGroup) -> GroupConfig:
        adapter.apply(group, SetAutoscaling(False))
        adapter.apply(group, SetSize(0, 0, 0))
        return adapter.describe(group, live_size=True)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(cycle, groups))

    assert [(r.autoscaling, r.desired) for r in results] == [(False, 0)] * 8
    assert len(_writes(gcp)) == 16


def test_a_custom_endpoint_keeps_the_real_credentials(
    gcp: GcpEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A private endpoint or a proxy must not turn authentication off: without the loudly named emulator setting,
    # the clients use Application Default Credentials (none here), and nothing goes out unauthenticated.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    _seed(gcp)
    adapter = GkeNodePools(AdapterSettings(gcp_endpoint=gcp.url, request_timeout_s=2.0))
    with pytest.raises(Denied, match="credentials"):
        adapter.describe(_group("a100"))
    assert gcp.log.all() == []
