"""The AKS agent-pool adapter through the real azure-mgmt-containerservice client over HTTP against the emulator.

Every test drives ``AksAgentPools`` exactly as the job does (``describe``/``apply``/``discover``) and checks the
result in the emulator's stored state and request log, so both the adapter's own rule checks (no write sent)
and the emulator's AKS rules (what Azure would refuse) are exercised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from jobs.adapters.azure.nodegroups import PERMISSIONS, AksAgentPools
from jobs.adapters.settings import AdapterSettings
from jobs.commands.nodegroup_clouds import nodegroup_cloud
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetAutoscaling, SetPower, SetSize, Step, down_config, steps_between
from jobs.core.policy import AzureLocator, NodeGroup
from jobs.core.providers import rules_for
from jobs.errors import Busy, CloudError, Conflict, Denied, Invalid, NotFound, Throttled, Unavailable
from jobs.labels import AKS_AGENTPOOL_LABEL as NODE_LABEL
from tests.emulators.azure import AzureEmulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.base import FaultKind

pytestmark = pytest.mark.integration

RG, CLUSTER = "ml-rg", "ml-aks"
A100 = "Standard_NC24ads_A100_v4"
T4 = "Standard_NC4as_T4_v3"
GET, PUT, LIST = "agentPools.get", "agentPools.createOrUpdate", "agentPools.list"
STATUS = "containerService.operationStatus"


def group(pool: str, *, cluster: str = CLUSTER, rg: str = RG, subscription: str = SUBSCRIPTION) -> NodeGroup:
    locator = AzureLocator(subscription=subscription, resource_group=rg, cluster=cluster, agent_pool=pool)
    return NodeGroup(name=f"{cluster}-{pool}".lower(), cloud="azure", azure=locator)


def seed(azure: AzureEmulator) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "system", "Standard_D4s_v5", 1, "System")
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100", A100, 2, autoscaling=(1, 4), node_labels={"gpu": "a100"})
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4", T4, 3, tags={"team": "ml"})
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "idle", T4, 0)


def settings_for(
    azure: AzureEmulator, *, operation_timeout_s: float = 5.0, request_timeout_s: float = 2.0
) -> AdapterSettings:
    return AdapterSettings(
        poll_interval_s=0.01,
        operation_timeout_s=operation_timeout_s,
        request_timeout_s=request_timeout_s,
        azure_endpoint=azure.url,
        emulator_credentials=True,
    )


@pytest.fixture
def adapter(azure: AzureEmulator) -> Iterator[AksAgentPools]:
    seed(azure)
    aks = AksAgentPools(settings_for(azure))
    yield aks
    aks.close()


def pool_config(azure: AzureEmulator, pool: str) -> tuple[int, bool, int | None, int | None, str]:
    """(count, autoscaler, min, max, power) as the emulator stores the pool."""
    state = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, pool)
    return state.count, state.enable_auto_scaling, state.min_count, state.max_count, state.power_state


def run(adapter: AksAgentPools, target: NodeGroup, steps: list[Step]) -> None:
    for step in steps:
        adapter.apply(target, step)


# -- wiring ---------------------------------------------------------------------------------------------------


def test_registry_builds_the_adapter_and_it_names_its_provider_and_node_label(azure: AzureEmulator) -> None:
    adapter = nodegroup_cloud("aks", settings_for(azure))

    assert isinstance(adapter, AksAgentPools)
    # The provider kind and the node label are the resolved policy's, from the locator.
    rules = rules_for("azure", group("a100").locator)
    assert rules.kind == "aks"
    assert (rules.node_label, group("a100").locator.agent_pool) == ("kubernetes.azure.com/agentpool", "a100")
    assert NODE_LABEL == "kubernetes.azure.com/agentpool"
    assert "Microsoft.ContainerService/managedClusters/agentPools/write" in PERMISSIONS.actions


# -- describe -------------------------------------------------------------------------------------------------


def test_describe_reads_each_pool_in_one_request(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "stopped", T4, 2, stopped=True)
    azure.log.clear()

    configs = {name: adapter.describe(group(name)) for name in ("a100", "t4", "idle", "system", "stopped")}

    assert configs == {
        "a100": GroupConfig(min=1, desired=2, max=4, autoscaling=True),
        "t4": GroupConfig(min=0, desired=3, max=0),
        "idle": GroupConfig(min=0, desired=0, max=0),  # zero is a value, not a missing field
        "system": GroupConfig(min=0, desired=1, max=0, system=True),
        "stopped": GroupConfig(min=0, desired=2, max=0, stopped=True),
    }
    assert azure.log.operations() == [GET] * 5
    # AKS reports the live count on the pool: live_size costs no extra read.
    assert adapter.describe(group("t4"), live_size=True).desired == 3
    assert azure.log.count(GET) == 6


def test_describe_reports_busy_while_an_operation_runs_on_the_pool(
    azure: AzureEmulator, adapter: AksAgentPools
) -> None:
    azure.operation_seconds = None  # hold the operation until the test finishes it
    worker = threading.Thread(target=adapter.apply, args=(group("t4"), SetSize(0, 1, 0)))
    worker.start()
    _wait_for(lambda: bool(azure.running_operations()))

    during = adapter.describe(group("t4"))
    azure.finish_operations()
    worker.join(timeout=5)

    assert (during.desired, during.busy) == (3, True)  # the old count until the operation succeeds
    assert adapter.describe(group("t4")) == GroupConfig(min=0, desired=1, max=0)


def test_describe_of_a_missing_pool_or_cluster_is_not_found(adapter: AksAgentPools) -> None:
    with pytest.raises(NotFound) as pool:
        adapter.describe(group("nope"))
    with pytest.raises(NotFound) as cluster:
        adapter.describe(group("a100", cluster="other-aks"))

    assert (pool.value.operation, pool.value.code) == (GET, "NotFound")
    assert cluster.value.code == "ResourceNotFound"
    assert "other-aks" in str(cluster.value)


# -- each step ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "step", "expected"),
    [
        ("a100", SetAutoscaling(False), (2, False, None, None, "Running")),
        ("t4", SetSize(0, 0, 0), (0, False, None, None, "Running")),
        ("idle", SetSize(0, 5, 0), (5, False, None, None, "Running")),
        ("t4", SetAutoscaling(True, 1, 5), (3, True, 1, 5, "Running")),
        ("t4", SetPower(True), (3, False, None, None, "Stopped")),
    ],
)
def test_each_step_returns_only_when_the_operation_succeeded(
    azure: AzureEmulator,
    adapter: AksAgentPools,
    pool: str,
    step: Step,
    expected: tuple[int, bool, int | None, int | None, str],
) -> None:
    azure.operation_polls = 3
    azure.operation_seconds = None  # done after the 3 polls only: on a loaded machine the clock could end it sooner
    azure.log.clear()

    adapter.apply(group(pool), step)

    assert pool_config(azure, pool) == expected
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, pool).provisioning_state == "Succeeded"
    assert not azure.running_operations()
    # read, write, then the status monitor until Succeeded (3 x InProgress + 1) and ARMPolling's final GET.
    assert azure.log.operations() == [GET, PUT, STATUS, STATUS, STATUS, STATUS, GET]


def test_a_write_sends_back_the_rest_of_the_pool_unchanged(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    adapter.apply(group("t4"), SetSize(0, 1, 0))
    adapter.apply(group("a100"), SetAutoscaling(False))

    t4 = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4")
    a100 = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100")
    assert (t4.count, dict(t4.tags), t4.vm_size) == (1, {"team": "ml"}, T4)
    assert (a100.count, dict(a100.node_labels)) == (2, {"gpu": "a100"})


def test_power_on_starts_a_stopped_pool(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "stopped", T4, 2, stopped=True)

    adapter.apply(group("stopped"), SetPower(False))

    assert adapter.describe(group("stopped")) == GroupConfig(min=0, desired=2, max=0)


# -- down and up ----------------------------------------------------------------------------------------------


def test_manual_pool_down_then_up_restores_the_exact_configuration(
    azure: AzureEmulator, adapter: AksAgentPools
) -> None:
    target = group("t4")
    original = adapter.describe(target)

    down_steps = steps_between("aks", original, down_config("aks", original))
    run(adapter, target, down_steps)
    at_night = adapter.describe(target)
    up_steps = steps_between("aks", at_night, original)
    run(adapter, target, up_steps)

    assert down_steps == [SetSize(0, 0, 0)]
    assert at_night == GroupConfig(min=0, desired=0, max=0)
    assert up_steps == [SetSize(0, 3, 0)]
    assert adapter.describe(target) == original
    assert pool_config(azure, "t4") == (3, False, None, None, "Running")


def test_autoscaled_pool_goes_down_autoscaler_first_and_up_count_first(
    azure: AzureEmulator, adapter: AksAgentPools
) -> None:
    target = group("a100")
    original = adapter.describe(target)

    down_steps = steps_between("aks", original, down_config("aks", original))
    run(adapter, target, down_steps)
    at_night = adapter.describe(target)
    azure.log.clear()
    # Up as AKS requires it: the recorded count first, then the autoscaler with its bounds in a second update.
    run(adapter, target, [SetSize(original.min, original.desired or 0, original.max), SetAutoscaling(True, 1, 4)])

    assert down_steps == [SetAutoscaling(False), SetSize(1, 0, 4)]
    assert at_night == GroupConfig(min=0, desired=0, max=0)
    assert adapter.describe(target) == original
    assert pool_config(azure, "a100") == (2, True, 1, 4, "Running")
    assert [r.operation for r in azure.log.writes()] == [PUT, PUT]


def test_autoscaled_pool_down_then_up_through_the_core_planner_restores_the_exact_configuration(
    azure: AzureEmulator, adapter: AksAgentPools
) -> None:
    target = group("a100")
    original = adapter.describe(target)
    run(adapter, target, steps_between("aks", original, down_config("aks", original)))

    up_steps = steps_between("aks", adapter.describe(target), original)
    run(adapter, target, up_steps)

    # The count comes back before the autoscaler: AKS refuses to enable it at count 0 (< minCount 1).
    assert up_steps == [SetSize(1, 2, 4), SetAutoscaling(True, 1, 4)]
    assert adapter.describe(target) == original
    assert pool_config(azure, "a100") == (2, True, 1, 4, "Running")


def test_strategy_stop_and_back_restores_the_exact_configuration(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    target = group("a100")
    original = adapter.describe(target)

    down_steps = steps_between("aks", original, down_config("aks", original, stop=True))
    run(adapter, target, down_steps)
    at_night = adapter.describe(target)
    night_pool = pool_config(azure, "a100")
    up_steps = steps_between("aks", at_night, original)
    run(adapter, target, up_steps)

    assert down_steps == [SetPower(True)]  # stopping stops the autoscaler too: it is not switched off first
    assert at_night == replace(original, stopped=True)
    assert night_pool == (2, True, 1, 4, "Stopped")
    assert up_steps == [SetPower(False)]  # starting restarts the autoscaler with its bounds
    assert adapter.describe(target) == original
    assert pool_config(azure, "a100") == (2, True, 1, 4, "Running")


# -- provider rules, refused before any write -----------------------------------------------------------------


@pytest.mark.parametrize(
    "step", [SetSize(0, 0, 0), SetAutoscaling(False), SetAutoscaling(True, 1, 3), SetPower(True)], ids=str
)
def test_system_pool_is_refused_without_a_write(azure: AzureEmulator, adapter: AksAgentPools, step: Step) -> None:
    azure.log.clear()

    with pytest.raises(Denied) as refused:
        adapter.apply(group("system"), step)

    assert refused.value.code == "SystemPool"
    assert "system pools need at least 1 node and cannot be stopped" in str(refused.value)
    assert azure.log.writes() == []
    assert pool_config(azure, "system") == (1, False, None, None, "Running")


@pytest.mark.parametrize(
    ("pool", "step", "code"),
    [
        ("a100", SetSize(0, 0, 0), "AutoscalerEnabled"),  # the autoscaler owns the count
        ("idle", SetAutoscaling(True, 1, 4), "CountOutsideBounds"),  # cannot scale and enable in one update
        ("t4", SetAutoscaling(True, 4, 2), "AutoscalerBounds"),
        ("t4", SetSize(0, 1001, 0), "Count"),
    ],
)
def test_aks_rules_are_refused_without_a_write(
    azure: AzureEmulator, adapter: AksAgentPools, pool: str, step: Step, code: str
) -> None:
    before = pool_config(azure, pool)
    azure.log.clear()

    with pytest.raises(Invalid) as refused:
        adapter.apply(group(pool), step)

    assert (refused.value.code, refused.value.operation) == (code, PUT)
    assert azure.log.operations() == [GET]
    assert pool_config(azure, pool) == before


# -- busy -----------------------------------------------------------------------------------------------------


def test_busy_409_is_busy(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    azure.faults.inject(PUT, "busy")

    with pytest.raises(Busy) as busy:
        adapter.apply(group("t4"), SetSize(0, 0, 0))

    assert (busy.value.code, busy.value.operation, busy.value.retryable) == ("OperationNotAllowed", PUT, True)
    assert pool_config(azure, "t4")[0] == 3


def test_a_put_while_another_pool_of_the_cluster_is_updating_is_busy(
    azure: AzureEmulator, adapter: AksAgentPools
) -> None:
    azure.operation_seconds = None
    worker = threading.Thread(target=adapter.apply, args=(group("t4"), SetSize(0, 1, 0)))
    worker.start()
    _wait_for(lambda: bool(azure.running_operations()))

    with pytest.raises(Busy) as busy:
        adapter.apply(group("idle"), SetSize(0, 2, 0))
    azure.finish_operations()
    worker.join(timeout=5)

    assert busy.value.code == "OperationNotAllowed"
    assert "(t4 - Updating)" in str(busy.value)  # AKS's own 409, sent by the emulator
    assert pool_config(azure, "idle")[0] == 0
    assert pool_config(azure, "t4")[0] == 1


def test_a_pool_with_its_own_operation_running_is_busy_without_a_write(
    azure: AzureEmulator, adapter: AksAgentPools
) -> None:
    azure.operation_seconds = None
    worker = threading.Thread(target=adapter.apply, args=(group("t4"), SetSize(0, 1, 0)))
    worker.start()
    _wait_for(lambda: bool(azure.running_operations()))
    writes = len(azure.log.writes())

    with pytest.raises(Busy) as busy:
        adapter.apply(group("t4"), SetSize(0, 2, 0))
    azure.finish_operations()
    worker.join(timeout=5)

    assert "provisioningState Updating" in str(busy.value)
    assert len(azure.log.writes()) == writes
    assert pool_config(azure, "t4")[0] == 1


# -- faults ---------------------------------------------------------------------------------------------------

FAULTS: list[tuple[FaultKind, type[CloudError], str]] = [
    ("throttle", Throttled, "TooManyRequests"),
    ("server_error", Unavailable, "InternalServerError"),
    ("busy", Busy, "OperationNotAllowed"),
    ("conflict", Conflict, "Conflict"),
    ("timeout", Unavailable, "ServiceResponseTimeoutError"),  # the client's read timeout
]


@pytest.fixture
def quick_timeouts(azure: AzureEmulator) -> Iterator[AksAgentPools]:
    """An adapter whose HTTP read timeout (0.3 s) expires well before a held ``timeout`` fault answers."""
    seed(azure)
    azure.timeout_hold_s = 0.8
    aks = AksAgentPools(settings_for(azure, request_timeout_s=0.3))
    yield aks
    aks.close()


@pytest.mark.parametrize(("kind", "error", "code"), FAULTS, ids=[f[0] for f in FAULTS])
@pytest.mark.parametrize("operation", [GET, PUT, STATUS, LIST])
def test_each_fault_kind_raises_the_matching_error(
    azure: AzureEmulator,
    quick_timeouts: AksAgentPools,
    operation: str,
    kind: FaultKind,
    error: type[CloudError],
    code: str,
) -> None:
    azure.faults.inject(operation, kind)

    def call() -> None:
        if operation == LIST:
            quick_timeouts.discover([group("a100")])
        else:
            quick_timeouts.apply(group("t4"), SetSize(0, 1, 0))

    with pytest.raises(error) as raised:
        call()

    # The LRO poll belongs to the PUT: its failure is reported as the PUT's.
    assert raised.value.operation == (PUT if operation == STATUS else operation)
    assert raised.value.code == code
    assert type(raised.value) is error
    assert azure.log.count(operation) == 1  # the SDK's own retries are off


@pytest.mark.parametrize(("wait_s", "kept_s"), [(0.01, 0.01), (2.0, 2.0)])  # retry-after-ms, Retry-After
def test_a_throttled_call_keeps_how_long_arm_asked_to_wait(
    azure: AzureEmulator, adapter: AksAgentPools, wait_s: float, kept_s: float
) -> None:
    azure.retry_after_s = wait_s
    azure.faults.inject(GET, "throttle")

    with pytest.raises(Throttled) as raised:
        adapter.describe(group("t4"))

    assert (raised.value.status, raised.value.retry_after_s) == (429, kept_s)


def test_operation_that_ends_failed_is_unavailable(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    azure.operation_seconds = None
    worker_error: list[BaseException] = []

    def apply() -> None:
        try:
            adapter.apply(group("t4"), SetSize(0, 0, 0))
        except CloudError as exc:
            worker_error.append(exc)

    worker = threading.Thread(target=apply)
    worker.start()
    _wait_for(lambda: bool(azure.running_operations()))
    azure.finish_operations("Failed")
    worker.join(timeout=5)

    assert len(worker_error) == 1
    assert isinstance(worker_error[0], Unavailable)
    assert worker_error[0].code == "OperationFailed"
    assert pool_config(azure, "t4")[0] == 3


def test_operation_that_outlasts_the_timeout_is_unavailable(azure: AzureEmulator) -> None:
    seed(azure)
    azure.operation_seconds = None
    aks = AksAgentPools(settings_for(azure, operation_timeout_s=0.2))

    with pytest.raises(Unavailable) as late:
        aks.apply(group("t4"), SetSize(0, 0, 0))
    azure.finish_operations()  # lets the SDK's background polling thread end
    # ...and waits for it: a poll it sent after this test would land in the next test's request log.
    for poller in [t for t in threading.enumerate() if t.name.startswith("LROPoller(")]:
        poller.join(timeout=5)
    aks.close()

    assert late.value.code == "OperationTimeout"
    assert "did not complete within 0.2s" in str(late.value)


def test_unreachable_endpoint_is_unavailable() -> None:
    aks = AksAgentPools(
        AdapterSettings(azure_endpoint="http://127.0.0.1:9", request_timeout_s=0.5, emulator_credentials=True)
    )

    with pytest.raises(Unavailable) as down:
        aks.describe(group("a100"))
    aks.close()

    assert (down.value.operation, down.value.code) == (GET, "ServiceRequestError")


# -- discover -------------------------------------------------------------------------------------------------


def test_discover_lists_gpu_pools_of_each_cluster_once(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, "cv-aks", "sys", "Standard_D4s_v5", 1, "System")
    azure.add_agent_pool(SUBSCRIPTION, RG, "cv-aks", "h100", "Standard_ND96isr_H100_v5", 0)
    azure.add_agent_pool(SUBSCRIPTION, RG, "cv-aks", "cpu", "Standard_D16s_v5", 2)
    azure.add_agent_pool(SUBSCRIPTION, "other-rg", "not-in-policy", "a10", "Standard_NV36ads_A10_v5", 1)
    azure.log.clear()
    # Two groups in ml-aks (one spelled in another case: ARM names are case-insensitive), one in cv-aks.
    listed = [group("a100"), group("t4", cluster="ML-AKS"), group("cpu", cluster="cv-aks")]

    found = adapter.discover(listed)

    def cloud_group(cluster: str, pool: str, vm_size: str) -> CloudGroup:
        locator = {"subscription": SUBSCRIPTION, "resourceGroup": RG, "cluster": cluster, "agentPool": pool}
        return CloudGroup(cloud="azure", locator=locator, instance_type=vm_size)

    assert found == [
        cloud_group(CLUSTER, "a100", A100),
        cloud_group(CLUSTER, "t4", T4),
        cloud_group(CLUSTER, "idle", T4),  # not in the policy, still reported
        cloud_group("cv-aks", "h100", "Standard_ND96isr_H100_v5"),
    ]
    assert azure.log.operations() == [LIST, LIST]


def test_discover_follows_next_links(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    azure.page_size = 2

    found = adapter.discover([group("a100")])

    assert [g.locator["agentPool"] for g in found] == ["a100", "t4", "idle"]
    assert azure.log.count(LIST) == 2


# -- concurrency ----------------------------------------------------------------------------------------------


def test_concurrent_calls_share_one_client_per_subscription(azure: AzureEmulator, adapter: AksAgentPools) -> None:
    other = "00000000-0000-0000-0000-000000000002"
    clusters = [(SUBSCRIPTION, f"aks-{i}") for i in range(4)] + [(other, f"aks-{i}") for i in range(4)]
    for subscription, cluster in clusters:
        azure.add_agent_pool(subscription, RG, cluster, "gpu", T4, 2)
    targets = [group("gpu", cluster=cluster, subscription=subscription) for subscription, cluster in clusters]
    errors: list[BaseException] = []

    def scale_down(target: NodeGroup) -> None:
        try:
            adapter.apply(target, SetSize(0, 0, 0))
        except BaseException as exc:  # report it to the test thread instead of losing it
            errors.append(exc)

    threads = [threading.Thread(target=scale_down, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert errors == []
    assert [adapter.describe(t).desired for t in targets] == [0] * len(targets)
    assert sorted(adapter._clients) == sorted({SUBSCRIPTION, other})


def _wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_a_custom_endpoint_keeps_the_real_credentials(azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    # A private ARM endpoint or a proxy must not lose authentication: without the loudly named emulator setting
    # the client asks DefaultAzureCredential (which finds nothing here), and no request goes out with a fake token.
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    seed(azure)
    aks = AksAgentPools(AdapterSettings(azure_endpoint=azure.url, request_timeout_s=2.0))
    try:
        with pytest.raises(CloudError):
            aks.describe(group("a100"))
    finally:
        aks.close()
    assert [r for r in azure.log.all() if "agentPools" in r.operation] == []
