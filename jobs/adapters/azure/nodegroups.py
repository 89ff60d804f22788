"""AKS agent pools as node groups, through ``azure-mgmt-containerservice`` (``ContainerServiceClient``).

One read (``agentPools.get``) describes a pool; every step is a read-modify-write of the whole pool with
``agentPools.begin_create_or_update`` (ARM PUT replaces the resource, so the PUT body must be the current pool
with one thing changed), followed until its long-running operation reports Succeeded.

AKS rules checked here, before any write, so a refusal names the rule instead of relaying a 400:

- System mode pools are never touched (they need >= 1 node and cannot be stopped): ``Denied``.
- A manual count change needs the pool autoscaler off; enabling the autoscaler cannot change the count in the
  same update, so the current count must already lie within the new bounds: ``Invalid``. A pool may be stopped
  with its autoscaler on: AKS stops the autoscaler with the pool and restarts it on start.
- A pool whose own operation is still running is ``Busy`` without sending a doomed PUT.

The SDK's retries are off (``retry_total=0``, see ``azure.auth``): the job retries Busy/Throttled/Unavailable
itself with backoff and a deadline.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import AzureError
from azure.mgmt.containerservice import ContainerServiceClient
from azure.mgmt.containerservice.models import AgentPool, PowerState

from jobs.adapters.azure import errors, operations
from jobs.adapters.azure.auth import ArmAuth
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetAutoscaling, SetSize, Step, cloud_step
from jobs.core.policy import AzureLocator, NodeGroup
from jobs.core.providers import PROVIDERS
from jobs.errors import Busy, CloudError, Denied, Invalid, NotDelivered

#: Exactly the ARM actions this module calls: the pool GET and list, the PUT, and the GETs of the PUT's
#: ``Azure-AsyncOperation`` status monitor (``/providers/Microsoft.ContainerService/locations/*/operations/*``).
PERMISSIONS = Permissions(
    "azure",
    (
        "Microsoft.ContainerService/managedClusters/agentPools/read",
        "Microsoft.ContainerService/managedClusters/agentPools/write",
        "Microsoft.ContainerService/locations/operations/read",
    ),
)

#: Azure's GPU VM families all start with N: NC (compute), ND (deep learning), NV (visualisation), NG.
GPU_VM_SIZE = re.compile(r"^Standard_N[A-Z]", re.IGNORECASE)

MAX_COUNT = PROVIDERS["aks"].node_limit  # per pool (VMSS pools)

#: provisioningState values after which no operation runs on the pool; anything else (Updating, Scaling,
#: Upgrading, Starting, Stopping, Creating, Deleting...) means an operation is in progress.
SETTLED_STATES = frozenset({"succeeded", "failed", "canceled"})

#: ARM error codes of a scale-up Azure accepted and could not carry out: no capacity for the VM size, or no quota.
NOT_DELIVERED_CODES = frozenset(
    {
        "AllocationFailed",
        "ZonalAllocationFailed",
        "OverconstrainedAllocationRequest",
        "OverconstrainedZonalAllocationRequest",
        "SkuNotAvailable",
        "QuotaExceeded",
    }
)

_OP_GET = "agentPools.get"
_OP_PUT = "agentPools.createOrUpdate"
_OP_LIST = "agentPools.list"

T = TypeVar("T")


class AksAgentPools:
    """``NodeGroupCloud`` for AKS agent pools. Thread-safe: one client per subscription, shared by all threads."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._settings = settings
        self._auth = ArmAuth(settings)
        self._lock = threading.Lock()
        self._clients: dict[str, ContainerServiceClient] = {}

    # -- NodeGroupCloud -----------------------------------------------------------------------------------------

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        # ``count`` is the pool's live size, so live_size needs no extra read.
        return _config(self._get(group))

    def apply(self, group: NodeGroup, step: Step) -> None:
        loc = _locator(group)
        pool = self._get(group)
        _check(group, pool, step)
        _change(pool, step)
        client = self._client(loc.subscription)
        # If AKS sent an eTag, the PUT only lands on the version just read: a concurrent change is a Conflict
        # instead of being overwritten by this read-modify-write.
        conditions: dict[str, Any] = (
            {"etag": pool.e_tag, "match_condition": MatchConditions.IfNotModified} if pool.e_tag else {}
        )
        poller = self._call(
            group,
            _OP_PUT,
            lambda: client.agent_pools.begin_create_or_update(
                loc.resource_group,
                loc.cluster,
                loc.agent_pool,
                pool,
                polling_interval=self._settings.poll_interval_s,
                **conditions,
            ),
        )
        operations.finish(poller, self._settings, _path(loc), _OP_PUT, step.describe(), translate=translate)

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        clusters: dict[tuple[str, str, str], AzureLocator] = {}
        for group in groups:
            if group.cloud == "azure":
                loc = _locator(group)
                # ARM names are case-insensitive: one list per cluster however the policy spells it.
                clusters.setdefault((loc.subscription.lower(), loc.resource_group.lower(), loc.cluster.lower()), loc)
        found: list[CloudGroup] = []
        for loc in clusters.values():
            pools = self._list(loc)
            found.extend(
                CloudGroup(
                    cloud="azure",
                    locator={
                        "subscription": loc.subscription,
                        "resourceGroup": loc.resource_group,
                        "cluster": loc.cluster,
                        "agentPool": pool.name or "",
                    },
                    instance_type=pool.vm_size or "",
                )
                for pool in pools
                if pool.vm_size and GPU_VM_SIZE.match(pool.vm_size)
            )
        return found

    def close(self) -> None:
        """Close the clients' HTTP sessions (not part of the Protocol: for a clean shutdown and for tests)."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    # -- internals ----------------------------------------------------------------------------------------------

    def _get(self, group: NodeGroup) -> AgentPool:
        loc = _locator(group)
        client = self._client(loc.subscription)
        return self._call(
            group, _OP_GET, lambda: client.agent_pools.get(loc.resource_group, loc.cluster, loc.agent_pool)
        )

    def _list(self, loc: AzureLocator) -> list[AgentPool]:
        client = self._client(loc.subscription)
        # The pager is lazy: materialise it inside the translation so paging errors are translated too.
        return self._call_at(
            _path(loc, pool=False), _OP_LIST, lambda: list(client.agent_pools.list(loc.resource_group, loc.cluster))
        )

    def _client(self, subscription: str) -> ContainerServiceClient:
        with self._lock:
            client = self._clients.get(subscription)
            if client is None:
                client = self._new_client(subscription)
                self._clients[subscription] = client
            return client

    def _new_client(self, subscription: str) -> ContainerServiceClient:
        # Built under the lock, once: the models' first use works out their fields here, in one thread (see
        # _power_code), before the threads of the run read pools at once.
        _power_code(AgentPool({"properties": {"powerState": {"code": "Running"}}}))
        return ContainerServiceClient(self._auth.credential(), subscription, **self._auth.client_options())

    def _call(self, group: NodeGroup, operation: str, call: Callable[[], T]) -> T:
        return self._call_at(_path(_locator(group)), operation, call)

    @staticmethod
    def _call_at(where: str, operation: str, call: Callable[[], T]) -> T:
        return errors.call(where, operation, call, translate=translate)


# -- pure helpers -------------------------------------------------------------------------------------------------


def _locator(group: NodeGroup) -> AzureLocator:
    if group.azure is None:
        raise Invalid(f"node group {group.name} is not an AKS agent pool (cloud {group.cloud})", code="NotAzure")
    return group.azure


def _path(loc: AzureLocator, *, pool: bool = True) -> str:
    cluster = f"{loc.subscription}/{loc.resource_group}/{loc.cluster}"
    return f"{cluster}/{loc.agent_pool}" if pool else cluster


def _text(value: object) -> str:
    """An SDK enum or plain string as its wire value (str() of a str-Enum is 'Cls.MEMBER' in Python 3.11)."""
    return str(value.value) if isinstance(value, Enum) else str(value or "")


def _power_code(pool: AgentPool) -> str:
    """The pool's power state code. The SDK's models work out their fields' types on first use, per class and not
    under a lock: a pool read by one thread while another first builds the class can keep ``powerState`` as the raw
    JSON mapping (seen once in about ten fleet runs as ``'dict' object has no attribute 'code'``). Either is read."""
    power: object = pool.power_state
    if isinstance(power, Mapping):
        return _text(power.get("code"))
    return _text(getattr(power, "code", None) if power else "")


def _config(pool: AgentPool) -> GroupConfig:
    power = _power_code(pool)
    return GroupConfig(
        min=pool.min_count or 0,
        desired=pool.count or 0,
        max=pool.max_count or 0,
        autoscaling=bool(pool.enable_auto_scaling),
        stopped=power.lower() == "stopped",
        system=_text(pool.mode).lower() == "system",
        busy=_text(pool.provisioning_state).lower() not in SETTLED_STATES,
    )


def _check(group: NodeGroup, pool: AgentPool, step: Step) -> None:
    """Refuse, before any write, what AKS would refuse or what the job must never do."""
    current = _config(pool)
    where = _path(_locator(group))
    if current.system:
        raise Denied(
            f"{where}: refusing to change a System mode agent pool ({step.describe()}): system pools need at "
            "least 1 node and cannot be stopped, so the job never scales them; use a User mode pool for GPUs",
            operation=_OP_PUT,
            code="SystemPool",
        )
    if current.busy:
        raise Busy(
            f"{where}: an operation is running on the pool (provisioningState {_text(pool.provisioning_state)})",
            operation=_OP_PUT,
            code="OperationNotAllowed",
        )
    if isinstance(step, SetSize):
        if current.autoscaling:
            raise Invalid(
                f"{where}: cannot set the count to {step.desired} while the pool autoscaler is on: disable it first",
                operation=_OP_PUT,
                code="AutoscalerEnabled",
            )
        if not 0 <= step.desired <= MAX_COUNT:
            raise Invalid(f"{where}: count {step.desired} outside 0..{MAX_COUNT}", operation=_OP_PUT, code="Count")
    elif isinstance(step, SetAutoscaling) and step.enabled:
        if not 0 <= step.min <= step.max <= MAX_COUNT:
            raise Invalid(
                f"{where}: autoscaler bounds {step.min}..{step.max} must satisfy 0 <= min <= max <= {MAX_COUNT}",
                operation=_OP_PUT,
                code="AutoscalerBounds",
            )
        if not step.min <= (current.desired or 0) <= step.max:
            raise Invalid(
                f"{where}: cannot enable the autoscaler ({step.min}..{step.max}) at count {current.desired}: AKS "
                "cannot scale and enable the autoscaler in one update, so set the count within the bounds first",
                operation=_OP_PUT,
                code="CountOutsideBounds",
            )


def _change(pool: AgentPool, step: Step) -> None:
    """Apply one step to the pool as read; everything else is sent back unchanged (PUT replaces the pool)."""
    step = cloud_step(step)
    if isinstance(step, SetAutoscaling):
        pool.enable_auto_scaling = step.enabled
        # AKS requires the bounds cleared when the autoscaler goes off; the count stays where it is.
        pool.min_count = step.min if step.enabled else None
        pool.max_count = step.max if step.enabled else None
    elif isinstance(step, SetSize):
        pool.count = step.desired
    else:
        pool.power_state = PowerState(code="Stopped" if step.stopped else "Running")


def translate(error: AzureError, operation: str, where: str) -> CloudError:
    """ARM's errors as ``jobs.errors``, with the node groups' own reading: a scale-up Azure accepted and could not
    carry out (no capacity, no quota) is ``NotDelivered``."""
    code = errors.arm_code(error)
    # Quota refusals also come as OperationNotAllowed ("... results in exceeding approved ... quota"): not busy.
    over_quota = code == "OperationNotAllowed" and "exceeding approved" in errors.message(error)
    if code in NOT_DELIVERED_CODES or over_quota:
        return NotDelivered(f"{where}: {operation}: {code}: {errors.message(error)}", operation=operation, code=code)
    return errors.translate(error, operation, where)
