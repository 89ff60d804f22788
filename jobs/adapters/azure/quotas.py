"""Azure compute quotas (VM families, ``lowPriorityCores``) through ``azure-mgmt-quota`` 3.x (``QuotaMgmtClient``),
and the resource SKUs (``azure-mgmt-compute``) that convert VM sizes into vCPUs.

Microsoft.Quota facts this module is shaped by:
- Scope ``subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}``, counted in vCPUs.
- A PUT of ``quotas/{family}`` opens a quota request that support may take days to decide: the long-running
  operation is not waited for; the request is read back from ``quotaRequests`` (its id is the request's name).
- Requests ``Accepted``, ``InProgress`` or ``Escalated`` are open; a second PUT for the family is refused then.
  ``Succeeded`` raised the limit; ``Failed``/``Invalid`` (e.g. ``ContactSupport``) did not.
- The PUT has no idempotency token: a lost answer is never resent, the caller looks at the requests again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from azure.core.exceptions import AzureError
from azure.mgmt.quota import QuotaMgmtClient
from azure.mgmt.quota.models import CurrentQuotaLimitBase, LimitObject, QuotaProperties, ResourceName

from jobs.adapters.azure.auth import ArmAuth
from jobs.adapters.azure.errors import translate
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.cloud_quotas import Asked, CloudRequest, GroupSize, Outcome, QuotaFacts, Shape
from jobs.core.policy import AzureLocator, NodeGroup
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.errors import CloudError, NotFound

#: Exactly the ARM actions this module calls.
PERMISSIONS = Permissions(
    "azure",
    (
        "Microsoft.Quota/quotas/read",
        "Microsoft.Quota/quotas/write",
        "Microsoft.Quota/quotaRequests/read",
        "Microsoft.Quota/usages/read",
        "Microsoft.Compute/skus/read",
        "Microsoft.ContainerService/managedClusters/agentPools/read",
    ),
)

UNIT = "vCPU"
_OUTCOMES: dict[str, Outcome] = {
    "Accepted": "open",
    "InProgress": "open",
    "Escalated": "open",
    "Succeeded": "approved",
    "Failed": "denied",
    "Invalid": "denied",
}
T = TypeVar("T")


def scope_of(entry: CloudQuota) -> str:
    return f"subscriptions/{entry.subscription}/providers/Microsoft.Compute/locations/{entry.location}"


class AzureQuotas:
    """``QuotaCloud`` for Azure; one client per subscription and SDK, built on first use; SDK retries off."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._auth = ArmAuth(settings)  # the same credential and client options as every ARM client
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], Any] = {}

    # --- QuotaCloud ---------------------------------------------------------------------------------------------

    def read(self, entry: CloudQuota, remembered: Asked | None) -> QuotaFacts:
        scope, family = scope_of(entry), str(entry.family)
        quota = self._client(str(entry.subscription))
        try:
            found = self._call(scope, "quota.get", lambda: quota.quota.get(family, scope))
        except NotFound as exc:
            return QuotaFacts(UNIT, None, error=f"{family}: no such VM family in {entry.location} ({exc})")
        props = found.properties
        limit = _number(props.limit) if props is not None else 0
        fixed = None if props is None or props.is_quota_applicable in (None, True) else f"{family} is not adjustable"
        usage = None
        if entry.headroom is not None:
            used = self._call(scope, "usages.get", lambda: quota.usages.get(family, scope))
            usage = int(used.properties.usages.value) if used.properties and used.properties.usages else None
        requests = [r for r in self._requests(entry) if r[1] == family.lower()]
        open_request = next((r[0] for r in requests if r[0].outcome == "open"), None)
        followed = None
        if remembered is not None and remembered.request_id:
            followed = next((r[0] for r in requests if r[0].id == remembered.request_id), None)
        return QuotaFacts(UNIT, limit, usage=usage, fixed=fixed, open_request=open_request, followed=followed)

    def shapes(self, entry: CloudQuota, names: Sequence[str]) -> Mapping[str, Shape | str]:
        from azure.mgmt.compute import ComputeManagementClient  # noqa: PLC0415

        compute = self._client(str(entry.subscription), ComputeManagementClient)
        where = f"subscriptions/{entry.subscription}/locations/{entry.location}"
        wanted = {n.lower(): n for n in names}
        out: dict[str, Shape | str] = {}
        skus = self._call(
            where,
            "resourceSkus.list",
            lambda: list(compute.resource_skus.list(filter=f"location eq '{entry.location}'")),
        )
        for sku in skus:
            if sku.resource_type != "virtualMachines" or str(sku.name).lower() not in wanted:
                continue
            caps = {c.name: c.value for c in sku.capabilities or []}
            name = wanted[str(sku.name).lower()]
            out[name] = Shape(name, int(caps.get("vCPUs", 0)), UNIT, family=sku.family)
        for name in names:
            out.setdefault(name, f"{name}: not a VM size in {entry.location}")
        return out

    def group(self, group: NodeGroup) -> GroupSize | str:
        from azure.mgmt.containerservice import ContainerServiceClient  # noqa: PLC0415

        loc = group.locator
        if not isinstance(loc, AzureLocator):
            return f"node group {group.name} is not an AKS agent pool"
        aks = self._client(loc.subscription, ContainerServiceClient)
        pool = self._call(
            f"{loc.resource_group}/{loc.cluster}/{loc.agent_pool}",
            "agentPools.get",
            lambda: aks.agent_pools.get(loc.resource_group, loc.cluster, loc.agent_pool),
        )
        size = int(pool.max_count if pool.enable_auto_scaling and pool.max_count else pool.count or 0)
        spot = str(pool.scale_set_priority or "").lower() == "spot"
        return GroupSize(group.name, str(pool.vm_size), size, "spot" if spot else "on-demand")

    def file(self, entry: CloudQuota, value: int) -> CloudRequest:
        scope, family = scope_of(entry), str(entry.family)
        quota = self._client(str(entry.subscription))
        body = CurrentQuotaLimitBase(
            properties=QuotaProperties(limit=LimitObject(value=value), name=ResourceName(value=family))
        )
        # Not waited for: support decides on its own timeline; later runs follow the request.
        self._call(scope, "quota.createOrUpdate", lambda: quota.quota.begin_create_or_update(family, scope, body))
        mine = [r for r, f in self._requests(entry) if f == family.lower() and r.outcome == "open"]
        if not mine:
            raise CloudError(f"{scope}: the request for {family} is not listed after it was filed", code="NotListed")
        return mine[0]

    # --- internals ----------------------------------------------------------------------------------------------

    def _requests(self, entry: CloudQuota) -> list[tuple[CloudRequest, str]]:
        """Every quota request of the scope, newest first, each with its family (lowercase)."""
        scope = scope_of(entry)
        quota = self._client(str(entry.subscription))
        found = self._call(scope, "quotaRequestStatus.list", lambda: list(quota.quota_request_status.list(scope)))
        out: list[tuple[str, CloudRequest, str]] = []
        for item in found:
            props = item.properties
            if props is None:
                continue
            sub = (props.value or [None])[0]
            family = str(sub.name.value).lower() if sub is not None and sub.name else ""
            asked = _number(sub.limit) if sub is not None else 0
            state = _text(props.provisioning_state)
            error = props.error.code if props.error is not None and props.error.code else None
            status = f"{state}: {error}" if error else state
            request = CloudRequest(str(item.name), status, _OUTCOMES.get(state, "open"), asked)
            out.append((str(props.request_submit_time or ""), request, family))
        out.sort(key=lambda r: r[0], reverse=True)
        return [(r, f) for _, r, f in out]

    def _client(self, subscription: str, kind: Any = QuotaMgmtClient) -> Any:
        key = (subscription, str(kind.__name__))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = kind(
                    credential=self._auth.credential(), subscription_id=subscription, **self._auth.client_options()
                )
            return client

    @staticmethod
    def _call(where: str, operation: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except AzureError as error:
            raise translate(error, operation, where) from error


def _number(limit: Any) -> int:
    """A limit object's value: a model with ``value`` or, for an untyped limit, the mapping itself."""
    if limit is None:
        return 0
    value = getattr(limit, "value", None)
    if value is None and isinstance(limit, Mapping):
        value = limit.get("value")
    return int(value or 0)


def _text(state: Any) -> str:
    """An SDK enum (QuotaRequestState.SUCCEEDED) as the service spells it (Succeeded)."""
    return str(getattr(state, "value", state) or "")
