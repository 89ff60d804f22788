"""Microsoft.Compute resource SKUs (``ComputeManagementClient.resource_skus.list``): what a VM size is made of.

``GET /subscriptions/{sub}/providers/Microsoft.Compute/skus`` lists one ``virtualMachines`` SKU per VM size and
location, with the ``family`` that names its vCPU quota and ``capabilities`` (``vCPUs``, ``GPUs``, ``MemoryGB``...)
as strings, as the service does. ``$filter=location eq '<location>'`` is the only filter the service supports.
The sizes are :data:`tests.emulators.azure.capacity.VM_SIZES`, offered in :data:`LOCATIONS`.
"""

from __future__ import annotations

import re
from typing import Any

from werkzeug.wrappers import Response

from tests.emulators.azure.arm import ArmError, RequestContext, Route, json_response
from tests.emulators.azure.capacity import VM_SIZES, VmSize

#: Where the emulated sizes are offered (zones 1-3 each).
LOCATIONS = ("westeurope", "northeurope", "eastus", "westus2", "swedencentral")
_FILTER = re.compile(r"^\s*location\s+eq\s+'(?P<location>[^']+)'\s*$", re.IGNORECASE)


def sku_body(size: VmSize, location: str) -> dict[str, Any]:
    tier, _, short = size.name.partition("_")
    capabilities = {
        "vCPUs": str(size.vcpus),
        "vCPUsAvailable": str(size.vcpus),
        "MemoryGB": f"{size.memory_gb:g}",
        "LowPriorityCapable": "True",
        "HyperVGenerations": "V1,V2",
    }
    if size.gpus:
        capabilities["GPUs"] = str(size.gpus)  # as Compute does: a CPU size has no GPUs capability at all
    return {
        "resourceType": "virtualMachines",
        "name": size.name,
        "tier": tier,
        "size": short,
        "family": size.family,
        "locations": [location],
        "locationInfo": [{"location": location, "zones": ["1", "2", "3"], "zoneDetails": []}],
        "capabilities": [{"name": key, "value": value} for key, value in capabilities.items()],
        "restrictions": [],
    }


class SkuService:
    """The resource SKU list; stateless."""

    def routes(self) -> list[Route]:
        return [
            Route(
                "GET",
                r"/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/skus",
                "resourceSkus.list",
                self._list,
            )
        ]

    def _list(self, ctx: RequestContext, m: dict[str, str]) -> Response:
        text = ctx.request.args.get("$filter", "")
        locations: tuple[str, ...] = LOCATIONS
        if text:
            matched = _FILTER.match(text)
            if matched is None:
                raise ArmError(400, "InvalidFilter", f"Unsupported $filter '{text}': only location eq '...' is.")
            wanted = matched["location"].lower()
            locations = tuple(location for location in LOCATIONS if location == wanted)
        items = [sku_body(size, location) for location in locations for size in VM_SIZES.values()]
        return json_response({"value": items})
