"""Azure GPU VMs for the sweep (``Instances``): one subscription's VMs whose size has GPUs, their tags, and
deallocate / delete, through ``azure-mgmt-compute``.

Compute facts this module is shaped by:
- ``virtualMachines.listAll?statusOnly=true`` returns every VM of the subscription, paged, each with its
  ``instanceView`` (power state): one paged call for the whole subscription instead of one instance view per VM.
- GPUs come from the size's resource SKU capability ``GPUs`` (``resourceSkus.list`` once per location seen, cached
  for the adapter's life, i.e. one run), never from a table of size names.
- A VM in a scale set (VMSS Flex) carries ``virtualMachineScaleSet.id``; AKS nodes carry ``aks-managed-poolName``
  (or ``poolName``) tags. Both are group members: the group would replace a VM stopped on its own.
- A PATCH of ``tags`` replaces the whole tag object (ARM's semantics): removing a key means sending every other
  one, so the current tags are read first and the merged set is written.
- Stop is *deallocate*: it releases the hardware and ends compute billing. ``powerOff`` keeps the VM allocated and
  billed, so it is never used; a powered-off VM counts as running (still billed) and is deallocated when due.
- Deallocate and delete are long-running operations: the job returns once ARM accepted them (202), it does not
  wait; the next run sees the result (a deallocating or deleted VM is not acted on again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute.models import VirtualMachine, VirtualMachineUpdate

from jobs.adapters.azure.auth import ArmAuth
from jobs.adapters.azure.errors import call
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.untagged import GpuInstance, InstanceState
from jobs.errors import Invalid

#: Exactly the ARM actions this module calls.
PERMISSIONS = Permissions(
    "azure",
    (
        "Microsoft.Compute/virtualMachines/read",
        "Microsoft.Compute/virtualMachines/write",
        "Microsoft.Compute/virtualMachines/deallocate/action",
        "Microsoft.Compute/virtualMachines/delete",
        "Microsoft.Compute/skus/read",
    ),
)

#: AKS's tags on the VMs of a node pool (``aks-managed-poolName`` today, ``poolName`` on older clusters).
AKS_POOL_TAGS = ("aks-managed-poolName", "poolName")
T = TypeVar("T")


def power_state(vm: VirtualMachine) -> str | None:
    """``running``, ``deallocated``, ``stopped``... from the VM's instance view, None when it has none."""
    statuses = (vm.instance_view.statuses if vm.instance_view else None) or []
    for status in statuses:
        if status.code and status.code.startswith("PowerState/"):
            return str(status.code).partition("/")[2].lower()
    return None


def instance_state(vm: VirtualMachine) -> InstanceState:
    power = power_state(vm)
    if (vm.provisioning_state or "").lower() == "deleting":
        return "other"
    if power in ("running", "stopped"):
        # "stopped" is powerOff: still allocated and billed, so deallocating it still saves money.
        return "running"
    if power == "deallocated":
        return "stopped"
    return "other"  # starting, stopping, deallocating, unknown


def group_of(vm: VirtualMachine) -> str | None:
    scale_set = vm.virtual_machine_scale_set.id if vm.virtual_machine_scale_set else None
    if scale_set:
        return f"scale set {scale_set.rstrip('/').rpartition('/')[2]}"
    tags = vm.tags or {}
    pool = next((tags[t] for t in AKS_POOL_TAGS if tags.get(t)), None)
    if pool is not None:
        return f"AKS node pool {pool}"
    if any(key.startswith("aks-managed-") for key in tags):
        return "AKS node pool"
    return None


def resource_group_of(resource_id: str) -> str:
    parts = resource_id.strip("/").split("/")
    lowered = [p.lower() for p in parts]
    if "resourcegroups" not in lowered:
        raise Invalid(f"{resource_id}: not an Azure resource id", operation="parse", code="InvalidResourceId")
    return parts[lowered.index("resourcegroups") + 1]


class AzureInstances:
    """``Instances`` for Azure: account = subscription id. One client per subscription; SDK retries off (the
    runner retries Throttled/Unavailable); the SKUs' GPU counts cached per (subscription, location)."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._auth = ArmAuth(settings)
        self._lock = threading.Lock()
        self._clients: dict[str, ComputeManagementClient] = {}
        self._gpus: dict[tuple[str, str], dict[str, int]] = {}

    # --- Instances ----------------------------------------------------------------------------------------------

    def gpu_instances(self, account: str) -> list[GpuInstance]:
        compute = self._client(account)
        where = f"subscriptions/{account}"
        vms: list[VirtualMachine] = call(
            where, "virtualMachines.listAll", lambda: list(compute.virtual_machines.list_all(status_only="true"))
        )
        out: list[GpuInstance] = []
        for vm in vms:
            size = str(vm.hardware_profile.vm_size) if vm.hardware_profile and vm.hardware_profile.vm_size else ""
            location = str(vm.location or "")
            gpus = self._sizes(account, location).get(size.lower(), 0) if size and location else 0
            if gpus <= 0:
                continue
            out.append(
                GpuInstance(
                    cloud="azure",
                    account=account,
                    id=str(vm.id),
                    name=str(vm.name),
                    zone=location,
                    type=size,
                    gpus=gpus,
                    state=instance_state(vm),
                    tags=dict(vm.tags or {}),
                    group=group_of(vm),
                )
            )
        return out

    def set_tags(self, instance: GpuInstance, changes: Mapping[str, str | None]) -> None:
        compute = self._client(instance.account)
        group, name = resource_group_of(instance.id), instance.name
        # The PATCH replaces the tag set: start from the tags as they are now, not as listed (a person may have
        # added one since), so no tag is lost and a removal really removes.
        current = call(instance.id, "virtualMachines.get", lambda: compute.virtual_machines.get(group, name))
        tags = dict(current.tags or {})
        for key, value in changes.items():
            if value is None:
                tags.pop(key, None)
            else:
                tags[key] = value
        update = VirtualMachineUpdate(tags=tags)
        poller = call(
            instance.id,
            "virtualMachines.update",
            lambda: compute.virtual_machines.begin_update(group, name, update, polling=False),
        )
        # A tags-only PATCH is applied when ARM answers (200 with the VM); ``polling=False``: nothing is followed.
        del poller

    def act(self, instance: GpuInstance, action: Literal["stop", "terminate"]) -> None:
        compute = self._client(instance.account)
        group, name = resource_group_of(instance.id), instance.name
        begin: Callable[[], Any]
        if action == "stop":
            begin = lambda: compute.virtual_machines.begin_deallocate(group, name, polling=False)  # noqa: E731
            operation = "virtualMachines.deallocate"
        else:
            begin = lambda: compute.virtual_machines.begin_delete(group, name, polling=False)  # noqa: E731
            operation = "virtualMachines.delete"
        # Accepted (202) is enough: the operation runs on ARM's side; the next run sees where it went.
        # ``polling=False``: the SDK keeps no thread polling after the job moved on.
        call(instance.id, operation, begin)

    # --- internals ----------------------------------------------------------------------------------------------

    def _sizes(self, subscription: str, location: str) -> dict[str, int]:
        """VM size (lower case) -> GPUs, for the virtualMachines SKUs offered in ``location``."""
        key = (subscription.lower(), location.lower())
        with self._lock:
            cached = self._gpus.get(key)
        if cached is not None:
            return cached
        compute = self._client(subscription)
        skus = call(
            f"subscriptions/{subscription}/locations/{location}",
            "resourceSkus.list",
            lambda: list(compute.resource_skus.list(filter=f"location eq '{location}'")),
        )
        found = {
            str(sku.name).lower(): _gpus(sku.capabilities or [])
            for sku in skus
            if sku.resource_type == "virtualMachines" and sku.name
        }
        with self._lock:
            self._gpus[key] = found
        return found

    def _client(self, subscription: str) -> ComputeManagementClient:
        with self._lock:
            client = self._clients.get(subscription)
            if client is None:
                client = ComputeManagementClient(self._auth.credential(), subscription, **self._auth.client_options())
                self._clients[subscription] = client
            return client


def _gpus(capabilities: Iterable[Any]) -> int:
    for capability in capabilities:
        if capability.name == "GPUs":
            try:
                return int(capability.value)
            except (TypeError, ValueError):
                return 0
    return 0
