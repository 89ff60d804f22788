"""Microsoft.ContainerService: managed clusters (read) and agent pools (read, PUT as a long-running operation).

A PUT is validated by :mod:`aks_rules`, then answered 200 (update) or 201 (create) with the requested pool in
provisioningState ``Updating``/``Creating`` and an ``Azure-AsyncOperation`` status monitor. Until that
operation reaches Succeeded a GET shows the pool's old values with the transitional provisioningState; the new
values take effect at Succeeded (or the old ones come back with ``Failed``). A scale-up the region cannot serve
(:mod:`.capacity`: allocation failures, VM family vCPU quota) ends ``Failed`` with that error. While any agent-pool operation
runs in a cluster, another PUT in that cluster is refused with 409 ``OperationNotAllowed``.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Response

from tests.emulators.azure import aks_rules
from tests.emulators.azure.aks_rules import AgentPoolState
from tests.emulators.azure.arm import (
    ArmError,
    Host,
    RequestContext,
    Route,
    json_response,
    paged,
    retry_after_headers,
)
from tests.emulators.azure.capacity import VM_SIZES, allocation_error, quota_error
from tests.emulators.azure.quota import QuotaEntry

_SUB = r"/subscriptions/(?P<sub>[^/]+)"
_RG = _SUB + r"/resourceGroups/(?P<rg>[^/]+)"
_MC = _RG + r"/providers/Microsoft\.ContainerService/managedClusters/(?P<cluster>[^/]+)"
_PROVIDER = "Microsoft.ContainerService"


@dataclass
class ClusterState:
    subscription: str
    resource_group: str
    name: str
    location: str
    kubernetes_version: str = "1.30.6"
    tags: dict[str, str] = field(default_factory=dict)
    #: Keyed by lower-cased pool name: ARM names are case-insensitive.
    pools: dict[str, AgentPoolState] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourcegroups/{self.resource_group}"
            f"/providers/{_PROVIDER}/managedClusters/{self.name}"
        )


def _key(*parts: str) -> tuple[str, ...]:
    return tuple(p.lower() for p in parts)


def _running(pool: AgentPoolState) -> int:
    """VMs the pool runs: a stopped pool runs none, whatever its count."""
    return 0 if pool.power_state == "Stopped" else pool.count


def pool_properties(pool: AgentPoolState) -> dict[str, Any]:
    props: dict[str, Any] = {
        "count": pool.count,
        "vmSize": pool.vm_size,
        "osType": "Linux",
        "type": "VirtualMachineScaleSets",
        "mode": pool.mode,
        "enableAutoScaling": pool.enable_auto_scaling,
        "powerState": {"code": pool.power_state},
        "scaleSetPriority": pool.scale_set_priority,
        "nodeLabels": dict(pool.node_labels),
        "tags": dict(pool.tags),
        "provisioningState": pool.provisioning_state,
        "orchestratorVersion": pool.orchestrator_version,
        "currentOrchestratorVersion": pool.orchestrator_version,
        "eTag": pool.etag,
    }
    if pool.min_count is not None:
        props["minCount"] = pool.min_count
    if pool.max_count is not None:
        props["maxCount"] = pool.max_count
    if pool.scale_set_priority == "Spot":
        props["scaleSetEvictionPolicy"] = "Delete"
        props["spotMaxPrice"] = -1
    return props


def pool_body(cluster: ClusterState, pool: AgentPoolState) -> dict[str, Any]:
    return {
        "id": f"{cluster.id}/agentPools/{pool.name}",
        "name": pool.name,
        "type": f"{_PROVIDER}/managedClusters/agentPools",
        "properties": pool_properties(pool),
    }


def cluster_body(cluster: ClusterState) -> dict[str, Any]:
    profiles = [{"name": p.name, **pool_properties(p)} for p in cluster.pools.values()]
    return {
        "id": cluster.id,
        "name": cluster.name,
        "type": f"{_PROVIDER}/ManagedClusters",
        "location": cluster.location,
        "tags": dict(cluster.tags),
        "properties": {
            "provisioningState": "Succeeded",
            "powerState": {"code": "Running"},
            "kubernetesVersion": cluster.kubernetes_version,
            "currentKubernetesVersion": cluster.kubernetes_version,
            "dnsPrefix": cluster.name,
            "nodeResourceGroup": f"MC_{cluster.resource_group}_{cluster.name}_{cluster.location}",
            "agentPoolProfiles": profiles,
        },
    }


class AksService:
    """AKS state and routes. Every method runs under the emulator's lock."""

    def __init__(
        self,
        host: Host,
        lock: threading.RLock,
        quota: Callable[[str, str, str], QuotaEntry | None] = lambda sub, location, family: None,
    ) -> None:
        self._host = host
        self._lock = lock
        self._quota = quota
        self.clusters: dict[tuple[str, ...], ClusterState] = {}
        #: VM size (lower case) -> the allocation error code its scale sets answer (see :mod:`.capacity`).
        self.allocation_failures: dict[str, str] = {}

    # -- seeding and inspection (called by tests) -------------------------------------------------------------

    def add_cluster(
        self,
        subscription: str,
        resource_group: str,
        name: str,
        location: str = "westeurope",
        tags: dict[str, str] | None = None,
    ) -> ClusterState:
        with self._lock:
            key = _key(subscription, resource_group, name)
            if key not in self.clusters:
                self.clusters[key] = ClusterState(subscription, resource_group, name, location, tags=dict(tags or {}))
            return self.clusters[key]

    def add_pool(self, pool: AgentPoolState, location: str) -> AgentPoolState:
        aks_rules.validate(None, pool)
        with self._lock:
            cluster = self.add_cluster(pool.subscription, pool.resource_group, pool.cluster, location)
            cluster.pools[pool.name.lower()] = pool
            return pool

    def pool(self, subscription: str, resource_group: str, cluster: str, name: str) -> AgentPoolState:
        with self._lock:
            return self._pool(subscription, resource_group, cluster, name)

    def replace_pool(self, pool: AgentPoolState) -> None:
        """A pool changed by AKS itself (its autoscaler), stored in place: no operation, no validation of a PUT."""
        with self._lock:
            self._cluster(pool.subscription, pool.resource_group, pool.cluster).pools[pool.name.lower()] = pool

    # -- internals ----------------------------------------------------------------------------------------------

    def _cluster(self, subscription: str, resource_group: str, name: str) -> ClusterState:
        cluster = self.clusters.get(_key(subscription, resource_group, name))
        if cluster is None:
            raise ArmError(
                404,
                "ResourceNotFound",
                f"The Resource '{_PROVIDER}/managedClusters/{name}' under resource group '{resource_group}' "
                "was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
            )
        return cluster

    def _pool(self, subscription: str, resource_group: str, cluster: str, name: str) -> AgentPoolState:
        pool = self._cluster(subscription, resource_group, cluster).pools.get(name.lower())
        if pool is None:
            raise ArmError(
                404,
                "NotFound",
                f"Could not find agent pool '{name}' in managed cluster '{cluster}'.",
            )
        return pool

    def routes(self) -> list[Route]:
        return [
            Route("GET", _SUB + rf"/providers/{_PROVIDER}/managedClusters", "managedClusters.list", self._list_all),
            Route(
                "GET",
                _RG + rf"/providers/{_PROVIDER}/managedClusters",
                "managedClusters.listByResourceGroup",
                self._list_by_rg,
            ),
            Route("GET", _MC, "managedClusters.get", self._get_cluster),
            Route("GET", _MC + "/agentPools", "agentPools.list", self._list_pools),
            Route("GET", _MC + "/agentPools/(?P<pool>[^/]+)", "agentPools.get", self._get_pool),
            Route("PUT", _MC + "/agentPools/(?P<pool>[^/]+)", "agentPools.createOrUpdate", self._put_pool),
            Route(
                "GET",
                _SUB + rf"/providers/{_PROVIDER}/locations/(?P<loc>[^/]+)/operations/(?P<op>[^/]+)",
                "containerService.operationStatus",
                self._operation_status,
            ),
        ]

    def _list_all(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            items = [cluster_body(c) for c in self.clusters.values() if c.subscription.lower() == m["sub"].lower()]
        return json_response(paged(ctx, items, self._host.page_size))

    def _list_by_rg(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            items = [
                cluster_body(c)
                for c in self.clusters.values()
                if _key(c.subscription, c.resource_group) == _key(m["sub"], m["rg"])
            ]
        return json_response(paged(ctx, items, self._host.page_size))

    def _get_cluster(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            return json_response(cluster_body(self._cluster(m["sub"], m["rg"], m["cluster"])))

    def _list_pools(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            cluster = self._cluster(m["sub"], m["rg"], m["cluster"])
            items = [pool_body(cluster, p) for p in cluster.pools.values()]
        return json_response(paged(ctx, items, self._host.page_size))

    def _get_pool(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            cluster = self._cluster(m["sub"], m["rg"], m["cluster"])
            return json_response(pool_body(cluster, self._pool(m["sub"], m["rg"], m["cluster"], m["pool"])))

    def _put_pool(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        body = ctx.json()
        with self._lock:
            cluster = self._cluster(m["sub"], m["rg"], m["cluster"])
            for running in self._host.operations.running(cluster.id + "/"):
                busy = cluster.pools.get(running.target.rsplit("/", 1)[-1].lower())
                raise aks_rules.busy_error(
                    busy.name if busy else running.target, busy.provisioning_state if busy else "Updating"
                )
            old = cluster.pools.get(m["pool"].lower())
            request_headers = ctx.request.headers
            aks_rules.check_preconditions(old, request_headers.get("If-Match"), request_headers.get("If-None-Match"))
            new = aks_rules.parse_put(
                body,
                old,
                subscription=cluster.subscription,
                resource_group=cluster.resource_group,
                cluster=cluster.name,
                name=old.name if old else m["pool"],
            )
            aks_rules.validate(old, new)
            transitional = "Updating" if old else "Creating"
            key = new.name.lower()
            # What GET shows meanwhile: the old values (or, for a new pool, the requested ones) in transition.
            cluster.pools[key] = dataclasses.replace(old or new, provisioning_state=transitional)

            def succeeded() -> None:
                cluster.pools[key] = dataclasses.replace(new, provisioning_state="Succeeded", etag=str(uuid.uuid4()))

            def failed() -> None:
                cluster.pools[key] = dataclasses.replace(old or new, provisioning_state="Failed")

            operation = self._host.operations.start(
                "agentPools.createOrUpdate",
                f"{cluster.id}/agentPools/{new.name}",
                self._host.operation_polls,
                succeeded,
                failed,
                self._host.operation_seconds,
            )
            operation.outcome = lambda: self._capacity_error(cluster, old, new)
            echo = pool_body(cluster, dataclasses.replace(new, provisioning_state=transitional))
        status_url = ctx.absolute(
            f"/subscriptions/{cluster.subscription}/providers/{_PROVIDER}/locations/{cluster.location}"
            f"/operations/{operation.id}"
        )
        headers = {"Azure-AsyncOperation": status_url, **retry_after_headers(self._host.retry_after_s)}
        return json_response(echo, 200 if old else 201, headers)

    def fail_allocations(self, vm_size: str, code: str = "AllocationFailed") -> None:
        """Scale sets of ``vm_size`` cannot get VMs until :meth:`restock` (``code``: an allocation error)."""
        with self._lock:
            self.allocation_failures[vm_size.lower()] = code

    def restock(self) -> None:
        with self._lock:
            self.allocation_failures.clear()

    def _capacity_error(
        self, cluster: ClusterState, old: AgentPoolState | None, new: AgentPoolState
    ) -> ArmError | None:
        """Why the scale set cannot bring the VMs ``new`` adds over ``old``: an allocation failure, or the VM family's
        regional vCPU quota (checked only where a test set one)."""
        growth = _running(new) - (_running(old) if old else 0)
        if growth <= 0:
            return None
        code = self.allocation_failures.get(new.vm_size.lower())
        if code is not None:
            return allocation_error(code)
        size = VM_SIZES.get(new.vm_size.lower())
        entry = self._quota(cluster.subscription, cluster.location, size.family) if size else None
        if size is None or entry is None:
            return None
        # While the operation runs, the pool still holds its old values: every pool counts as it runs now.
        usage = entry.usage + sum(
            _running(p) * v.vcpus
            for c in self.clusters.values()
            if (c.subscription.lower(), c.location.lower()) == (cluster.subscription.lower(), cluster.location.lower())
            for p in c.pools.values()
            if (v := VM_SIZES.get(p.vm_size.lower())) is not None and v.family == size.family
        )
        required = growth * size.vcpus
        if usage + required > entry.limit:
            return quota_error(size.family, cluster.location, entry.limit, usage, required)
        return None

    def _operation_status(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            operation = self._host.operations.get(m["op"])
            if operation is None or not operation.target.lower().startswith(f"/subscriptions/{m['sub']}".lower()):
                raise ArmError(404, "NotFound", f"Operation '{m['op']}' was not found.")
            operation.poll()
            body = operation.status_body()
            headers = retry_after_headers(self._host.retry_after_s) if operation.running else {}
        return json_response(body, 200, headers)
