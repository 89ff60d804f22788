"""AKS agent pools through the real azure-mgmt-containerservice client over HTTP against the emulator."""

from __future__ import annotations

import time

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.mgmt.containerservice.models import AgentPool, AgentPoolManagedClusterAgentPoolProfileProperties

from tests.emulators.azure import AzureEmulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.azure.sdk import AzureClients
from tests.fakes import wait_until

pytestmark = pytest.mark.integration

RG, CLUSTER = "ml-rg", "ml-aks"
A100 = "Standard_NC24ads_A100_v4"


def seed(azure: AzureEmulator) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "system", "Standard_D4s_v5", 1, "System")
    azure.add_agent_pool(
        SUBSCRIPTION,
        RG,
        CLUSTER,
        "a100",
        A100,
        2,
        "User",
        autoscaling=(1, 4),
        node_labels={"gpu": "a100"},
        tags={"team": "ml"},
    )
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot", "Standard_NC4as_T4_v3", 3, "User", spot=True)


def put(clients: AzureClients, name: str, pool: AgentPool) -> AgentPool:
    return clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, name, pool).result()


def get(clients: AzureClients, name: str) -> AgentPool:
    return clients.containerservice.agent_pools.get(RG, CLUSTER, name)


def test_get_and_list_show_the_seeded_pools(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    pool = get(azure_clients, "a100")
    spot = get(azure_clients, "t4spot")
    names = [p.name for p in azure_clients.containerservice.agent_pools.list(RG, CLUSTER)]

    assert (pool.count, pool.vm_size, pool.mode) == (2, A100, "User")
    assert (pool.enable_auto_scaling, pool.min_count, pool.max_count) == (True, 1, 4)
    assert pool.power_state is not None
    assert pool.power_state.code == "Running"
    assert (pool.node_labels, pool.tags, pool.provisioning_state) == ({"gpu": "a100"}, {"team": "ml"}, "Succeeded")
    assert spot.scale_set_priority == "Spot"
    assert names == ["system", "a100", "t4spot"]


def test_managed_clusters_get_and_list(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.add_agent_pool(
        SUBSCRIPTION, "other-rg", "other-aks", "sys", "Standard_D4s_v5", 1, "System", location="eastus"
    )

    cluster = azure_clients.containerservice.managed_clusters.get(RG, CLUSTER)
    everywhere = azure_clients.containerservice.managed_clusters.list()
    in_rg = azure_clients.containerservice.managed_clusters.list_by_resource_group("other-rg")

    assert cluster.location == "westeurope"
    assert [p.name for p in cluster.agent_pool_profiles or []] == ["system", "a100", "t4spot"]
    assert sorted(str(c.name) for c in everywhere) == ["ml-aks", "other-aks"]
    assert [(c.name, c.location) for c in in_rg] == [("other-aks", "eastus")]


def test_put_is_a_long_running_operation_whose_change_applies_only_at_succeeded(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    azure.operation_seconds = None  # hold the operation until the test finishes it
    pool = get(azure_clients, "t4spot")
    pool.count = 1

    poller = azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "t4spot", pool)
    during = get(azure_clients, "t4spot")
    assert not poller.done()
    assert (during.count, during.provisioning_state) == (3, "Updating")

    assert azure.finish_operations() == 1
    result = poller.result()

    after = get(azure_clients, "t4spot")
    assert (result.count, result.provisioning_state) == (1, "Succeeded")
    assert (after.count, after.provisioning_state) == (1, "Succeeded")
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot").count == 1


def test_poller_polls_the_async_operation_the_configured_number_of_times(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    azure.operation_polls = 2
    pool = get(azure_clients, "t4spot")
    pool.count = 5

    put(azure_clients, "t4spot", pool)

    # Two InProgress answers, then Succeeded; then ARMPolling's final GET of the pool.
    assert azure.log.count("containerService.operationStatus") == 3
    assert azure.log.operations()[-1] == "agentPools.get"


def test_a_scale_nobody_polls_reaches_the_pool_after_its_duration(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    """A person's begin_create_or_update, and nobody polls: AKS still scales the pool, with time."""
    seed(azure)
    azure.operation_seconds = 0.2
    pool = get(azure_clients, "t4spot")
    pool.count = 5
    azure.log.clear()

    azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "t4spot", pool, polling=False)
    meanwhile = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot")
    time.sleep(0.4)  # no request reaches the emulator meanwhile
    after = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot")  # the stored pool, read without any settling

    assert (meanwhile.count, meanwhile.provisioning_state) == (3, "Updating")
    assert (after.count, after.provisioning_state) == (5, "Succeeded")
    assert azure.log.operations() == ["agentPools.createOrUpdate"]


def test_polls_do_not_finish_an_operation_by_default(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    assert azure.operation_polls is None
    azure.operation_seconds = 0.4
    pool = get(azure_clients, "t4spot")
    pool.count = 2

    poller = azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "t4spot", pool)
    # The SDK polls every 10 ms: three polls come long before the operation's 0.4 s have passed.
    wait_until(lambda: azure.log.count("containerService.operationStatus") >= 3, what="three polls")
    polls, running = azure.log.count("containerService.operationStatus"), not poller.done()
    result = poller.result()

    assert polls >= 3
    assert running
    assert (result.count, result.provisioning_state) == (2, "Succeeded")


def test_second_put_in_the_cluster_while_one_runs_is_refused_as_busy(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    azure.operation_seconds = None
    spot = get(azure_clients, "t4spot")
    spot.count = 1
    system = get(azure_clients, "system")
    system.count = 2
    poller = azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "t4spot", spot)

    with pytest.raises(ResourceExistsError) as same_pool:
        azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "t4spot", spot)
    with pytest.raises(ResourceExistsError) as other_pool:
        azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "system", system)

    azure.finish_operations()
    poller.result()
    assert same_pool.value.status_code == 409
    assert same_pool.value.error is not None
    assert same_pool.value.error.code == "OperationNotAllowed"
    assert "(t4spot - Updating)" in str(other_pool.value.error and other_pool.value.error.message)
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "system").count == 1


def _refused(azure_clients: AzureClients, name: str, pool: AgentPool) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as refused:
        azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, name, pool)
    assert refused.value.status_code == 400
    return refused.value


def test_system_pool_cannot_go_to_zero(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    pool = get(azure_clients, "system")
    pool.count = 0

    error = _refused(azure_clients, "system", pool)

    assert error.error is not None
    assert error.error.code == "InvalidParameter"
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "system").count == 1
    assert azure.log.count("agentPools.createOrUpdate") == 1
    assert not azure.running_operations()


def test_system_pool_autoscaler_needs_min_count_of_at_least_one(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    pool = get(azure_clients, "system")
    pool.enable_auto_scaling, pool.min_count, pool.max_count = True, 0, 3

    error = _refused(azure_clients, "system", pool)

    assert error.error is not None
    assert (error.error.code, error.error.target) == ("InvalidParameter", "agentPoolProfile.minCount")


def test_system_pool_cannot_be_stopped(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    pool = get(azure_clients, "system")
    pool.power_state = {"code": "Stopped"}

    error = _refused(azure_clients, "system", pool)

    assert "System mode agent pools cannot be stopped" in str(error.message)


def test_count_change_while_the_autoscaler_stays_on_is_refused(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    pool = get(azure_clients, "a100")
    pool.count = 3  # within [1, 4], but the autoscaler owns the count

    error = _refused(azure_clients, "a100", pool)

    assert "autoscaler" in str(error.message)
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100").count == 2


def test_enabling_the_autoscaler_and_scaling_in_one_update_is_refused(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    pool = get(azure_clients, "t4spot")
    pool.enable_auto_scaling, pool.min_count, pool.max_count, pool.count = True, 1, 5, 4

    error = _refused(azure_clients, "t4spot", pool)

    assert "Cannot manually scale and enable cluster autoscaler in the same update operation" in str(error.message)


@pytest.mark.parametrize(
    ("count", "min_count", "max_count", "target"),
    [
        (5, 1, 4, "agentPoolProfile.count"),  # above maxCount
        (2, 3, 4, "agentPoolProfile.count"),  # below minCount
        (2, 3, 1, "agentPoolProfile.maxCount"),  # min > max
        (2, None, 4, "properties.minCount"),  # bounds are required with the autoscaler
    ],
)
def test_autoscaler_bounds_must_hold_min_count_max(
    azure: AzureEmulator,
    azure_clients: AzureClients,
    count: int,
    min_count: int | None,
    max_count: int,
    target: str,
) -> None:
    seed(azure)
    pool = get(azure_clients, "a100")
    pool.count, pool.min_count, pool.max_count = count, min_count, max_count

    error = _refused(azure_clients, "a100", pool)

    assert error.error is not None
    assert (error.error.code, error.error.target) == ("InvalidParameter", target)


def test_user_pool_goes_to_zero_after_disabling_the_autoscaler_and_comes_back(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    pool = get(azure_clients, "a100")
    pool.enable_auto_scaling, pool.min_count, pool.max_count = False, None, None
    put(azure_clients, "a100", pool)
    pool = get(azure_clients, "a100")
    pool.count = 0
    put(azure_clients, "a100", pool)
    at_zero = get(azure_clients, "a100")
    seen_at_zero = (at_zero.count, at_zero.enable_auto_scaling, at_zero.provisioning_state)

    # Restore the safe way round: resize first, then re-enable the autoscaler in a separate update.
    at_zero.count = 2
    put(azure_clients, "a100", at_zero)
    restored = get(azure_clients, "a100")
    restored.enable_auto_scaling, restored.min_count, restored.max_count = True, 1, 4
    put(azure_clients, "a100", restored)

    final = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100")
    assert seen_at_zero == (0, False, "Succeeded")
    assert (final.count, final.enable_auto_scaling, final.min_count, final.max_count) == (2, True, 1, 4)
    assert final.node_labels == {"gpu": "a100"}


def test_user_pool_can_be_stopped_with_the_autoscaler_on_and_starts_with_it(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    # Azure: "Stopping the node pool stops its Cluster Autoscaler, and it restarts it when you start the node pool"
    # (learn.microsoft.com/azure/aks/start-stop-nodepools): no need to disable the autoscaler first.
    seed(azure)
    autoscaled = get(azure_clients, "a100")
    autoscaled.power_state = {"code": "Stopped"}

    put(azure_clients, "a100", autoscaled)
    night = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100")
    assert (night.power_state, night.enable_auto_scaling, night.min_count, night.max_count) == ("Stopped", True, 1, 4)

    started = get(azure_clients, "a100")
    started.power_state = {"code": "Running"}
    put(azure_clients, "a100", started)
    day = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100")
    assert (day.power_state, day.enable_auto_scaling, day.min_count, day.max_count) == ("Running", True, 1, 4)


def test_user_pool_without_autoscaler_can_be_stopped(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    manual = get(azure_clients, "t4spot")
    manual.power_state = {"code": "Stopped"}

    stopped = put(azure_clients, "t4spot", manual)

    assert stopped.power_state is not None
    assert stopped.power_state.code == "Stopped"
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot").power_state == "Stopped"


def test_vm_size_cannot_change(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    pool = get(azure_clients, "t4spot")
    pool.vm_size = A100

    error = _refused(azure_clients, "t4spot", pool)

    assert error.error is not None
    assert error.error.code == "PropertyChangeNotAllowed"


def test_put_with_a_stale_etag_is_refused(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    read = get(azure_clients, "t4spot")
    changed = get(azure_clients, "t4spot")
    changed.count = 2
    put(azure_clients, "t4spot", changed)  # someone else updated the pool since `read`
    read.count = 0

    with pytest.raises(ResourceModifiedError) as refused:
        azure_clients.containerservice.agent_pools.begin_create_or_update(
            RG, CLUSTER, "t4spot", read, etag=read.e_tag, match_condition=MatchConditions.IfNotModified
        )
    fresh = get(azure_clients, "t4spot")
    fresh.count = 0
    done = azure_clients.containerservice.agent_pools.begin_create_or_update(
        RG, CLUSTER, "t4spot", fresh, etag=fresh.e_tag, match_condition=MatchConditions.IfNotModified
    ).result()

    assert refused.value.status_code == 412
    assert (done.count, azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot").count) == (0, 0)


def test_failed_operation_keeps_the_old_values(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.operation_seconds = None
    pool = get(azure_clients, "t4spot")
    pool.count = 0
    poller = azure_clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "t4spot", pool)

    azure.finish_operations("Failed")

    with pytest.raises(HttpResponseError):
        poller.result()
    after = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot")
    assert (after.count, after.provisioning_state) == (3, "Failed")


def test_put_creates_a_new_pool(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    # The typed constructor: the flattened AgentPool(count=...) form works at runtime but is not in the stubs.
    new = AgentPool(
        properties=AgentPoolManagedClusterAgentPoolProfileProperties(
            count=0, vm_size=A100, mode="User", node_labels={"gpu": "a100"}
        )
    )

    created = put(azure_clients, "burst", new)

    assert (created.count, created.vm_size, created.provisioning_state) == (0, A100, "Succeeded")
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "burst").mode == "User"


def test_missing_pool_and_cluster_are_not_found(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    with pytest.raises(ResourceNotFoundError):
        get(azure_clients, "nope")
    with pytest.raises(ResourceNotFoundError):
        azure_clients.containerservice.managed_clusters.get(RG, "no-such-cluster")


def test_lists_follow_next_links(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.page_size = 1

    names = [p.name for p in azure_clients.containerservice.agent_pools.list(RG, CLUSTER)]

    assert names == ["system", "a100", "t4spot"]
    assert azure.log.count("agentPools.list") == 3


def test_the_pools_own_autoscaler_sets_its_count_within_its_bounds_and_only_while_on(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    """AKS's cluster autoscaler (the simulated week's model drives it): a new count and etag, as the API shows them;
    never outside minCount..maxCount, never on a pool whose autoscaler is off or that is stopped."""
    seed(azure)
    before = get(azure_clients, "a100")

    azure.autoscale(SUBSCRIPTION, RG, CLUSTER, "a100", 4)
    after = get(azure_clients, "a100")
    assert (after.count, after.e_tag != before.e_tag) == (4, True)
    for outside in (0, 5):
        with pytest.raises(ValueError, match=r"outside 1\.\.4"):
            azure.autoscale(SUBSCRIPTION, RG, CLUSTER, "a100", outside)
    with pytest.raises(ValueError, match="autoscaler is off"):
        azure.autoscale(SUBSCRIPTION, RG, CLUSTER, "t4spot", 1)  # seeded without one
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "t4spot").count == 3
