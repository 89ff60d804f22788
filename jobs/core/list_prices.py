"""Public on-demand list prices of common GPU instance types, per cloud, for ``gpu-jobs report`` when the policy's
``pricing:`` names a group's instance type but not its price. A list price is what an account without discounts
pays; savings plans, reservations and spot pay less, so the report prints the table's date and source beside every
figure it prices with it, and a team with a negotiated rate says it in the policy (``pricing.instanceTypes`` or a
group's ``gpuHour``).

One region per cloud (the cheapest common one), Linux, USD per instance-hour, as the clouds' pricing pages listed
them on :data:`AS_OF`. AWS prices are after AWS's cut of P4 and P5 on-demand prices of June 2025 (up to 45 %).
Regional prices differ by up to about 30 %: a fleet elsewhere should put its own prices in the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: The day the table's prices were taken from the pages below; printed with every figure priced from it.
AS_OF: Final = "2025-07-01"
SOURCES: Final = {
    "aws": "https://aws.amazon.com/ec2/pricing/on-demand/ (us-east-1, Linux)",
    "gcp": "https://cloud.google.com/compute/vm-instance-pricing (us-central1)",
    "azure": "https://azure.microsoft.com/pricing/details/virtual-machines/linux/ (East US)",
}


@dataclass(frozen=True)
class ListPrice:
    cloud: str
    instance_type: str
    gpus: int
    gpu: str
    hourly: float  # USD per instance-hour

    @property
    def gpu_hour(self) -> float:
        return self.hourly / self.gpus

    @property
    def source(self) -> str:
        return f"{self.cloud} list price {self.instance_type} as of {AS_OF}, {SOURCES[self.cloud]}"


CURRENCY: Final = "USD"

_TABLE = (
    # AWS (us-east-1)
    ListPrice("aws", "g4dn.xlarge", 1, "T4", 0.526),
    ListPrice("aws", "g4dn.12xlarge", 4, "T4", 3.912),
    ListPrice("aws", "g5.xlarge", 1, "A10G", 1.006),
    ListPrice("aws", "g5.12xlarge", 4, "A10G", 5.672),
    ListPrice("aws", "g5.48xlarge", 8, "A10G", 16.288),
    ListPrice("aws", "g6.xlarge", 1, "L4", 0.8048),
    ListPrice("aws", "g6.12xlarge", 4, "L4", 4.6016),
    ListPrice("aws", "p3.2xlarge", 1, "V100", 3.06),
    ListPrice("aws", "p3.8xlarge", 4, "V100", 12.24),
    ListPrice("aws", "p4d.24xlarge", 8, "A100 40GB", 21.96),
    ListPrice("aws", "p5.48xlarge", 8, "H100", 55.04),
    # GCP (us-central1): machine types with their GPUs attached
    ListPrice("gcp", "g2-standard-4", 1, "L4", 0.7068),
    ListPrice("gcp", "a2-highgpu-1g", 1, "A100 40GB", 3.6731),
    ListPrice("gcp", "a2-highgpu-8g", 8, "A100 40GB", 29.3878),
    ListPrice("gcp", "a3-highgpu-8g", 8, "H100", 88.2522),
    # Azure (East US)
    ListPrice("azure", "Standard_NC4as_T4_v3", 1, "T4", 0.526),
    ListPrice("azure", "Standard_NC6s_v3", 1, "V100", 3.06),
    ListPrice("azure", "Standard_NC24ads_A100_v4", 1, "A100 80GB", 3.673),
    ListPrice("azure", "Standard_ND96asr_v4", 8, "A100 40GB", 27.197),
    ListPrice("azure", "Standard_ND96isr_H100_v5", 8, "H100", 98.32),
)
LIST_PRICES: Final = {p.instance_type: p for p in _TABLE}
