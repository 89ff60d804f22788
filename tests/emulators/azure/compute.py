"""Microsoft.Compute virtual machines: list (subscription / resource group, ``statusOnly``), get, instance view,
tag PATCH (the tags object replaced as a whole, as ARM does), VMSS Flex membership (``virtualMachineScaleSet``),
and deallocate / powerOff / start / delete as long-running operations that finish with time.

Deallocate, start and delete answer 202 with ``Azure-AsyncOperation`` (status monitor) and ``Location``
(``...?monitor=true``, the result URL azure-core GETs at the end of a POST), as Compute does. The power state
is ``deallocating``/``starting`` while the operation runs and ``deallocated``/``running`` after it; a deleted VM
is ``Deleting`` until the operation succeeds, then 404. Any operation on a VM that already has one running is
refused with 409 ``OperationNotAllowed`` (Compute would sometimes preempt instead; refusing is the stricter
contract for the code under test).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from werkzeug.wrappers import Response

from tests.emulators.azure.arm import (
    ArmError,
    AsyncOperation,
    Host,
    RequestContext,
    Route,
    empty_response,
    json_response,
    paged,
    retry_after_headers,
)

PowerState = Literal["running", "starting", "stopping", "stopped", "deallocating", "deallocated"]

_SUB = r"/subscriptions/(?P<sub>[^/]+)"
_RG = _SUB + r"/resourceGroups/(?P<rg>[^/]+)"
_VM = _RG + r"/providers/Microsoft\.Compute/virtualMachines/(?P<vm>[^/]+)"

_DISPLAY = {
    "running": "VM running",
    "starting": "VM starting",
    "stopping": "VM stopping",
    "stopped": "VM stopped",
    "deallocating": "VM deallocating",
    "deallocated": "VM deallocated",
}


@dataclass
class VmState:
    subscription: str
    resource_group: str
    name: str
    vm_size: str
    location: str
    tags: dict[str, str] = field(default_factory=dict)
    power_state: PowerState = "running"
    provisioning_state: str = "Succeeded"
    spot: bool = False
    vm_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    #: The resource id of the VMSS (Flex orchestration) the VM belongs to, if any.
    scale_set: str | None = None

    @property
    def id(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group.upper()}"
            f"/providers/Microsoft.Compute/virtualMachines/{self.name}"
        )


def instance_view(vm: VmState) -> dict[str, Any]:
    return {
        "statuses": [
            {
                "code": f"ProvisioningState/{vm.provisioning_state.lower()}",
                "level": "Info",
                "displayStatus": f"Provisioning {vm.provisioning_state.lower()}",
            },
            {"code": f"PowerState/{vm.power_state}", "level": "Info", "displayStatus": _DISPLAY[vm.power_state]},
        ]
    }


def vm_body(vm: VmState, with_instance_view: bool = False) -> dict[str, Any]:
    props: dict[str, Any] = {
        "vmId": vm.vm_id,
        "hardwareProfile": {"vmSize": vm.vm_size},
        "provisioningState": vm.provisioning_state,
        "priority": "Spot" if vm.spot else "Regular",
    }
    if vm.spot:
        props["evictionPolicy"] = "Deallocate"
        props["billingProfile"] = {"maxPrice": -1}
    if vm.scale_set:
        props["virtualMachineScaleSet"] = {"id": vm.scale_set}
    if with_instance_view:
        props["instanceView"] = instance_view(vm)
    return {
        "id": vm.id,
        "name": vm.name,
        "type": "Microsoft.Compute/virtualMachines",
        "location": vm.location,
        "tags": dict(vm.tags),
        "properties": props,
    }


class ComputeService:
    """VM state and routes. Every method runs under the emulator's lock."""

    def __init__(self, host: Host, lock: threading.RLock) -> None:
        self._host = host
        self._lock = lock
        self.vms: dict[tuple[str, str, str], VmState] = {}
        self._busy: dict[tuple[str, str, str], AsyncOperation] = {}

    def add_vm(self, vm: VmState) -> VmState:
        with self._lock:
            self.vms[_key(vm.subscription, vm.resource_group, vm.name)] = vm
            return vm

    def vm(self, subscription: str, resource_group: str, name: str) -> VmState | None:
        with self._lock:
            return self.vms.get(_key(subscription, resource_group, name))

    def routes(self) -> list[Route]:
        return [
            Route(
                "GET",
                _SUB + r"/providers/Microsoft\.Compute/virtualMachines",
                "virtualMachines.listAll",
                self._list_all,
            ),
            Route("GET", _RG + r"/providers/Microsoft\.Compute/virtualMachines", "virtualMachines.list", self._list_rg),
            Route("GET", _VM, "virtualMachines.get", self._get),
            Route("GET", _VM + "/instanceView", "virtualMachines.instanceView", self._instance_view),
            Route("PATCH", _VM, "virtualMachines.update", self._update),
            Route("DELETE", _VM, "virtualMachines.delete", self._delete),
            Route("POST", _VM + "/deallocate", "virtualMachines.deallocate", self._deallocate),
            Route("POST", _VM + "/start", "virtualMachines.start", self._start),
            Route("POST", _VM + "/powerOff", "virtualMachines.powerOff", self._power_off),
            Route(
                "GET",
                _SUB + r"/providers/Microsoft\.Compute/locations/(?P<loc>[^/]+)/operations/(?P<op>[^/]+)",
                "compute.operationStatus",
                self._operation_status,
            ),
        ]

    # -- internals ----------------------------------------------------------------------------------------------

    def _find(self, m: dict[str, str]) -> VmState:
        vm = self.vms.get(_key(m["sub"], m["rg"], m["vm"]))
        if vm is None:
            raise ArmError(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.Compute/virtualMachines/{m['vm']}' under resource group '{m['rg']}' "
                "was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
            )
        return vm

    def _list_all(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        expand = ctx.request.args.get("statusOnly", "").lower() == "true"
        with self._lock:
            items = [vm_body(v, expand) for v in self.vms.values() if v.subscription.lower() == m["sub"].lower()]
        return json_response(paged(ctx, items, self._host.page_size))

    def _list_rg(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        expand = ctx.request.args.get("$expand", "").lower() == "instanceview"
        with self._lock:
            items = [vm_body(v, expand) for k, v in self.vms.items() if k[:2] == (m["sub"].lower(), m["rg"].lower())]
        return json_response(paged(ctx, items, self._host.page_size))

    def _get(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        expand = ctx.request.args.get("$expand", "").lower() == "instanceview"
        with self._lock:
            return json_response(vm_body(self._find(m), expand))

    def _instance_view(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            return json_response(instance_view(self._find(m)))

    def _update(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        body = ctx.json()
        with self._lock:
            vm = self._find(m)
            self._refuse_if_busy(vm, "update")
            tags = body.get("tags")
            if tags is not None:
                if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
                    raise ArmError(400, "InvalidParameter", "The value of parameter tags is invalid.", target="tags")
                # PATCH replaces the tags object as a whole, as ARM does.
                vm.tags = dict(tags)
            return json_response(vm_body(vm))

    def _delete(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            vm = self._find(m)
            self._refuse_if_busy(vm, "delete")
            key = _key(vm.subscription, vm.resource_group, vm.name)
            before = vm.provisioning_state
            vm.provisioning_state = "Deleting"

            def succeeded() -> None:
                self.vms.pop(key, None)

            def failed() -> None:
                vm.provisioning_state = before

            operation = self._begin(vm, "virtualMachines.delete", succeeded, failed)
        return self._accepted(ctx, vm, operation)

    def _deallocate(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        return self._power(ctx, m, "deallocate", "deallocating", "deallocated")

    def _power_off(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        # powerOff stops the guest but keeps the hardware allocated (and billed): "stopped", not "deallocated".
        return self._power(ctx, m, "powerOff", "stopping", "stopped")

    def _start(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        return self._power(ctx, m, "start", "starting", "running")

    def _power(
        self, ctx: RequestContext, m: dict[str, str], action: str, during: PowerState, after: PowerState
    ) -> Response:
        with self._lock:
            vm = self._find(m)
            self._refuse_if_busy(vm, action)
            before = vm.power_state
            vm.power_state = during

            def succeeded() -> None:
                vm.power_state = after

            def failed() -> None:
                vm.power_state = before

            operation = self._begin(vm, f"virtualMachines.{action}", succeeded, failed)
        return self._accepted(ctx, vm, operation)

    def _refuse_if_busy(self, vm: VmState, action: str) -> None:
        running = self._busy.get(_key(vm.subscription, vm.resource_group, vm.name))
        if running is None or not running.running:
            return
        if vm.provisioning_state == "Deleting":
            message = (
                f"Operation '{action}' is not allowed on VM '{vm.name}' since the VM is marked for deletion. "
                "You can only retry the Delete operation (or wait for an ongoing one to complete)."
            )
        else:
            message = f"Operation '{action}' is not allowed on VM '{vm.name}' while '{running.kind}' is in progress."
        raise ArmError(409, "OperationNotAllowed", message)

    def _begin(
        self, vm: VmState, kind: str, succeeded: Callable[[], None], failed: Callable[[], None]
    ) -> AsyncOperation:
        operation = self._host.operations.start(
            kind, vm.id, self._host.operation_polls, succeeded, failed, self._host.operation_seconds
        )
        self._busy[_key(vm.subscription, vm.resource_group, vm.name)] = operation
        return operation

    def _accepted(self, ctx: RequestContext, vm: VmState, operation: AsyncOperation) -> Response:
        path = f"/subscriptions/{vm.subscription}/providers/Microsoft.Compute/locations/{vm.location}/operations/{operation.id}"
        status_url = ctx.absolute(path)
        headers = {
            "Azure-AsyncOperation": status_url,
            "Location": f"{status_url}&monitor=true",
            **retry_after_headers(self._host.retry_after_s),
        }
        return empty_response(202, headers)

    def _operation_status(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        with self._lock:
            operation = self._host.operations.get(m["op"])
            if operation is None:
                raise ArmError(404, "NotFound", f"Operation '{m['op']}' was not found.")
            monitor = ctx.request.args.get("monitor", "").lower() == "true"
            if not monitor:
                operation.poll()
            running = operation.running
            body = operation.status_body()
            error = operation.error
        if not monitor:
            headers = retry_after_headers(self._host.retry_after_s) if running else {}
            return json_response(body, 200, headers)
        # The result URL: 202 while running, 204 (no result body for these actions) when done, the error if failed.
        if running:
            return empty_response(202, {"Location": ctx.request.url, **retry_after_headers(self._host.retry_after_s)})
        if error is not None:
            return json_response(error.body(), error.status)
        return empty_response(204)


def _key(subscription: str, resource_group: str, name: str) -> tuple[str, str, str]:
    return (subscription.lower(), resource_group.lower(), name.lower())
