"""The Azure emulator: one WSGI app on 127.0.0.1 speaking ARM REST for AKS, Microsoft.Quota and Compute VMs.

Every request is logged under an operation name (``agentPools.createOrUpdate``, ``quota.get``,
``virtualMachines.listAll``, ``containerService.operationStatus``...), may be delayed (``latency_s``) or
failed (``faults``), then must carry ``Authorization: Bearer <anything>`` (401 ``AuthenticationFailed``
otherwise, as ARM) and an ``api-version`` query parameter (400 ``MissingApiVersionParameter``; any value is
accepted, so every SDK version works).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from tests.emulators.azure.aks import AksService, ClusterState
from tests.emulators.azure.aks_rules import AgentPoolState, Mode
from tests.emulators.azure.arm import (
    ArmError,
    AsyncOperation,
    AsyncOperations,
    OperationStatus,
    RequestContext,
    Route,
    error_response,
    fault_error,
)
from tests.emulators.azure.compute import ComputeService, VmState
from tests.emulators.azure.quota import QuotaEntry, QuotaOutcome, QuotaRequest, QuotaService
from tests.emulators.azure.skus import SkuService
from tests.emulators.base import Emulator, RunningServer, start

if TYPE_CHECKING:
    from tests.emulators.azure.sdk import AzureClients

#: How long an AKS / VM operation and an undecided quota request run by default: real ones take minutes; a tenth of a
#: second keeps the sandbox and tests quick while every "still InProgress" moment stays observable.
DEFAULT_OPERATION_SECONDS = 0.1
#: The variable the product reads to point its Azure SDK clients at a non-Azure endpoint (see :mod:`sdk`).
ENDPOINT_ENV = "GPU_JOBS_AZURE_ENDPOINT"


class AzureEmulator(Emulator):
    """State, seeding API and WSGI app. Serve it with :func:`start_azure_emulator` (or the ``azure`` fixture)."""

    def __init__(
        self,
        *,
        operation_polls: int | None = None,
        operation_seconds: float | None = DEFAULT_OPERATION_SECONDS,
        quota_request_seconds: float | None = DEFAULT_OPERATION_SECONDS,
        retry_after_s: float = 0.01,
        page_size: int | None = None,
    ) -> None:
        super().__init__()
        #: Test-only: status polls that answer InProgress before an AKS / VM operation completes (``None``, the
        #: default: polls do not count).
        self.operation_polls = operation_polls
        #: An AKS / VM operation completes this long after it started, polled or not (``None``: held until
        #: :meth:`finish_operations`).
        self.operation_seconds = operation_seconds
        #: Delay announced by retry-after headers on LRO and 429 responses (see ``arm.retry_after_headers``).
        self.retry_after_s = retry_after_s
        #: Items per page of list responses (``nextLink`` paging); ``None`` = one page.
        self.page_size = page_size
        self.operations = AsyncOperations(wake_at=self.wake_at)
        self.url = ""
        self._lock = threading.RLock()
        self.quotas = QuotaService(self, self._lock)
        self.aks = AksService(self, self._lock, self._quota_entry)
        self.quotas.request_seconds = quota_request_seconds
        self.compute = ComputeService(self, self._lock)
        self._routes = [
            (re.compile(route.pattern + "$", re.IGNORECASE), route)
            for route in (*self.aks.routes(), *self.quotas.routes(), *self.compute.routes(), *SkuService().routes())
        ]
        self._server: RunningServer | None = None

    # -- configuration ------------------------------------------------------------------------------------------

    @property
    def quota_request_seconds(self) -> float | None:
        """How long an undecided quota request runs before it is approved on its own; ``None``: until decided."""
        return self.quotas.request_seconds

    @quota_request_seconds.setter
    def quota_request_seconds(self, value: float | None) -> None:
        self.quotas.request_seconds = value

    def tick(self) -> None:
        """Complete the operations and apply the quota decisions whose time is up."""
        with self._lock:
            self.operations.settle()
            self.quotas.tick()

    # -- seeding ------------------------------------------------------------------------------------------------

    def add_cluster(
        self,
        subscription: str,
        resource_group: str,
        name: str,
        location: str = "westeurope",
        tags: Mapping[str, str] | None = None,
    ) -> ClusterState:
        return self.aks.add_cluster(subscription, resource_group, name, location, dict(tags or {}))

    def add_agent_pool(
        self,
        subscription: str,
        resource_group: str,
        cluster: str,
        name: str,
        vm_size: str,
        count: int,
        mode: Mode = "User",
        autoscaling: tuple[int, int] | None = None,
        spot: bool = False,
        node_labels: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        *,
        stopped: bool = False,
        location: str = "westeurope",
    ) -> AgentPoolState:
        """Seed a pool (its cluster is created on first use). The AKS rules apply: a bad seed raises ArmError."""
        pool = AgentPoolState(
            subscription=subscription,
            resource_group=resource_group,
            cluster=cluster,
            name=name,
            vm_size=vm_size,
            count=count,
            mode=mode,
            enable_auto_scaling=autoscaling is not None,
            min_count=autoscaling[0] if autoscaling else None,
            max_count=autoscaling[1] if autoscaling else None,
            power_state="Stopped" if stopped else "Running",
            scale_set_priority="Spot" if spot else "Regular",
            node_labels=dict(node_labels or {}),
            tags=dict(tags or {}),
        )
        return self.aks.add_pool(pool, location)

    def add_vm(
        self,
        subscription: str,
        resource_group: str,
        name: str,
        vm_size: str,
        location: str = "westeurope",
        tags: Mapping[str, str] | None = None,
        *,
        spot: bool = False,
        deallocated: bool = False,
        scale_set: str | None = None,
    ) -> VmState:
        vm = VmState(
            subscription,
            resource_group,
            name,
            vm_size,
            location,
            dict(tags or {}),
            power_state="deallocated" if deallocated else "running",
            spot=spot,
            scale_set=scale_set,
        )
        return self.compute.add_vm(vm)

    def set_quota(self, subscription: str, location: str, family: str, limit: int, usage: int = 0) -> QuotaEntry:
        """Seed (or overwrite) a VM family's vCPU limit and usage at ``Microsoft.Compute/locations/{location}``."""
        return self.quotas.set_quota(subscription, location, family, limit, usage)

    def fail_allocations(self, vm_size: str, code: str = "AllocationFailed") -> None:
        """Azure has no ``vm_size`` capacity until :meth:`restock`: scale-ups of such pools end Failed with
        ``code`` (AllocationFailed, ZonalAllocationFailed, OverconstrainedAllocationRequest...)."""
        self.aks.fail_allocations(vm_size, code)

    def restock(self) -> None:
        self.aks.restock()

    def _quota_entry(self, subscription: str, location: str, family: str) -> QuotaEntry | None:
        key = (subscription.lower(), "microsoft.compute", location.lower(), family.lower())
        return self.quotas.entries.get(key)

    # -- inspection and test hooks ------------------------------------------------------------------------------

    def agent_pool(self, subscription: str, resource_group: str, cluster: str, name: str) -> AgentPoolState:
        """The pool as AKS stores it right now (frozen snapshot)."""
        return self.aks.pool(subscription, resource_group, cluster, name)

    def autoscale(self, subscription: str, resource_group: str, cluster: str, name: str, count: int) -> None:
        """AKS's cluster autoscaler sets the pool's count, only while its autoscaler is on, the pool running and no
        operation in progress, and within its minCount..maxCount (a new etag, as any change of the pool)."""
        with self._lock:
            pool = self.aks.pool(subscription, resource_group, cluster, name)
            if not pool.enable_auto_scaling or pool.power_state != "Running" or pool.provisioning_state != "Succeeded":
                raise ValueError(f"agent pool {name}: its autoscaler is off or the pool is busy or stopped")
            if not (pool.min_count or 0) <= count <= (pool.max_count or 0):
                raise ValueError(f"agent pool {name}: count {count} is outside {pool.min_count}..{pool.max_count}")
            self.aks.replace_pool(dataclasses.replace(pool, count=count, etag=str(uuid.uuid4())))

    def vm(self, subscription: str, resource_group: str, name: str) -> VmState | None:
        return self.compute.vm(subscription, resource_group, name)

    def quota(self, subscription: str, location: str, family: str) -> QuotaEntry:
        return self.quotas.quota(subscription, location, family)

    def quota_requests(self) -> list[QuotaRequest]:
        with self._lock:
            return list(self.quotas.requests.values())

    def decide_quota_request(self, request_id: str, outcome: QuotaOutcome, after_s: float = 0.0) -> None:
        """Support decides a quota request now (or ``after_s`` later on the emulator's clock, looked at or not):
        ``Succeeded`` (the limit is raised), ``Failed`` (``ContactSupport``), ``Invalid``, or ``Escalated`` (still
        open, waiting for support)."""
        self.quotas.decide(request_id, outcome, after_s)

    def decide_next_quota_request(self, outcome: QuotaOutcome, after_s: float = 0.0, family: str | None = None) -> None:
        """The next quota request filed (for ``family``, or any) is decided ``after_s`` after it was filed."""
        self.quotas.decide_next(outcome, after_s, family)

    def running_operations(self) -> list[AsyncOperation]:
        with self._lock:
            return self.operations.running()

    def finish_operations(self, status: OperationStatus = "Succeeded") -> int:
        """Complete every running AKS/VM operation now (e.g. those held by ``operation_seconds=None``)."""
        with self._lock:
            held = [op for op in self.operations.running() if op.kind != "quota.createOrUpdate"]
            for operation in held:
                operation.finish(status)
            return len(held)

    # -- serving ------------------------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """Environment for a product subprocess: its Azure clients go to this emulator."""
        return {ENDPOINT_ENV: self.url, "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true"}

    def clients(self, subscription: str, **client_kwargs: Any) -> AzureClients:
        """The three real SDK clients against this emulator (see :class:`tests.emulators.azure.sdk.AzureClients`)."""
        from tests.emulators.azure.sdk import AzureClients  # imported on demand: the SDKs are slow to import

        return AzureClients.connect(self.url, subscription, **client_kwargs)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        response = self._dispatch(request)
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        self.tick()
        route, groups = self._match(request.method, request.path)
        operation = route.operation if route else f"unknown:{request.method} {request.path}"
        fault = self.begin(request.method, request.path, operation, request.query_string.decode(), request.get_data())
        try:
            if fault is not None and fault != "lost":
                raise fault_error(fault, operation, self.retry_after_s)
            _check_auth(request)
            if not request.args.get("api-version"):
                raise ArmError(
                    400,
                    "MissingApiVersionParameter",
                    "The api-version query parameter (?api-version=) is required for all requests.",
                )
            if route is None:
                raise ArmError(
                    404,
                    "InvalidResourceType",
                    f"The emulator has no route for {request.method} {request.path} (not an emulated ARM API).",
                )
            response = route.handler(RequestContext(request, request.host_url.rstrip("/")), groups)
            if fault == "lost":  # carried out; the answer never reaches the client
                raise fault_error("timeout", operation, self.retry_after_s)
            return response
        except ArmError as error:
            return error_response(error)

    def _match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        for pattern, route in self._routes:
            if route.method == method and (match := pattern.match(path)):
                return route, match.groupdict()
        return None, {}


def _check_auth(request: Request) -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ArmError(
            401,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing or not a Bearer token.",
        )


def start_azure_emulator(port: int = 0, *, retry_after_s: float = 1.0, **config: Any) -> AzureEmulator:
    """Serve a fresh emulator on 127.0.0.1 (for the demo sandbox); ``.stop()`` it when done.

    Defaults to ARM's own ``Retry-After: 1`` (whole seconds); the test fixture uses 10 ms instead.
    """
    emulator = AzureEmulator(retry_after_s=retry_after_s, **config)
    emulator._server = start(emulator, port)
    emulator.url = emulator._server.url
    return emulator
