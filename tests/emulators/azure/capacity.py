"""Azure capacity behind an AKS agent pool's scale set: allocation failures per VM size and region, and the
regional vCPU quota of each VM family.

AKS accepts the PUT, and its long-running operation ends ``Failed`` with the allocation or quota error of the
scale set: ``AllocationFailed`` ("Allocation failed. We do not have sufficient capacity for the requested VM size in
this region...", Azure/AKS#1272), ``OverconstrainedAllocationRequest`` / ``OverconstrainedZonalAllocationRequest``
("Allocation failed. VM(s) with the following constraints cannot be allocated...", Azure-Samples/aks-store-demo#115)
or ``ZonalAllocationFailed``; ``QuotaExceeded`` ("Operation could not be completed as it results in exceeding
approved <family> Cores quota. Additional details - ...", Azure/AKS#5808). The pool keeps its old count and reads
provisioningState ``Failed``.

A quota is checked only where a test set one (``set_quota``); usage is the seeded usage plus the pools' running
vCPUs of that family in that location.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.emulators.azure.arm import ArmError


@dataclass(frozen=True)
class VmSize:
    vcpus: int
    family: str  # the Microsoft.Compute quota resource name
    name: str = ""  # as Azure spells it (Standard_NC24ads_A100_v4)
    gpus: int = 0
    memory_gb: float = 0.0


_SIZES = (
    VmSize(24, "standardNCADSA100v4Family", "Standard_NC24ads_A100_v4", 1, 220),
    VmSize(48, "standardNCADSA100v4Family", "Standard_NC48ads_A100_v4", 2, 440),
    VmSize(96, "standardNCADSA100v4Family", "Standard_NC96ads_A100_v4", 4, 880),
    VmSize(4, "standardNCASv3_T4Family", "Standard_NC4as_T4_v3", 1, 28),
    VmSize(8, "standardNCASv3_T4Family", "Standard_NC8as_T4_v3", 1, 56),
    VmSize(16, "standardNCASv3_T4Family", "Standard_NC16as_T4_v3", 1, 110),
    VmSize(64, "standardNCASv3_T4Family", "Standard_NC64as_T4_v3", 4, 440),
    VmSize(96, "standardNDAMSv4_A100Family", "Standard_ND96amsr_A100_v4", 8, 1900),
    VmSize(96, "standardNDASv4_A100Family", "Standard_ND96asr_v4", 8, 900),
    VmSize(36, "standardNVADSA10v5Family", "Standard_NV36ads_A10_v5", 1, 440),
    VmSize(4, "standardDSv5Family", "Standard_D4s_v5", 0, 16),
)
#: The VM sizes the tests seed (vCPUs, quota family, GPUs and memory as Azure's resource SKUs list them), by
#: lower-case name.
VM_SIZES: dict[str, VmSize] = {size.name.lower(): size for size in _SIZES}

ALLOCATION_MESSAGES = {
    "AllocationFailed": (
        "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read more"
        " about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
    ),
    "ZonalAllocationFailed": (
        "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone. Read more"
        " about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
    ),
    "OverconstrainedAllocationRequest": (
        "Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition is too"
        " restrictive. Please remove some constraints and try again. Constraints applied are:\n"
        " - Networking Constraints (such as Accelerated Networking or IPv6)\n - VM Size\n"
    ),
    "OverconstrainedZonalAllocationRequest": (
        "Allocation failed. VM(s) with the following constraints cannot be allocated, because the condition is too"
        " restrictive. Please remove some constraints and try again. Constraints applied are:\n"
        " - Availability Zone\n - Networking Constraints (such as Accelerated Networking or IPv6)\n - VM Size\n"
    ),
}


def allocation_error(code: str) -> ArmError:
    return ArmError(400, code, ALLOCATION_MESSAGES[code])


def quota_error(family: str, location: str, limit: int, usage: int, required: int) -> ArmError:
    return ArmError(
        400,
        "QuotaExceeded",
        f"Operation could not be completed as it results in exceeding approved {family} Cores quota. Additional"
        f" details - Deployment Model: Resource Manager, Location: {location}, Current Limit: {limit}, Current"
        f" Usage: {usage}, Additional Required: {required}, (Minimum) New Limit Required: {usage + required}."
        " Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/"
        "UsageAndQuota.ReactView by specifying parameters listed in the 'Details' section for deployment to succeed.",
    )
