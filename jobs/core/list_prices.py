"""Public on-demand list prices of common GPU instance types, per cloud, for ``gpu-jobs report`` when the policy's
``pricing:`` names a group's instance type but not its price. A list price is what an account without discounts
pays; savings plans, reservations and spot pay less, so the report prints each price's date and source beside every
figure it prices with it, and a team with a negotiated rate says it in the policy (``pricing.instanceTypes`` or a
group's ``gpuHour``).

One region per cloud (the cheapest common one), Linux, USD per instance-hour. Every row was checked against its
cloud's own price API as a dated public snapshot (:data:`SOURCES`): the AWS Price List API and the Azure Retail
Prices API as the Karpenter providers generate them into their repositories, and the Google Cloud Billing Catalog
as google-cloud-pricing-cost-calculator sums it per machine type (GPUs, vCPUs, memory and the local SSD the machine
type bundles, which Google bills with it). Regional prices differ by up to about 30 %: a fleet elsewhere should put
its own prices in the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class PriceSource:
    """Where one cloud's rows were read: a snapshot anyone can open, and the day it states its prices were fetched."""

    as_of: str  # ISO date
    region: str
    terms: str
    address: str


SOURCES: Final = {
    "aws": PriceSource(
        "2026-07-20",
        "us-east-1",
        "Linux, shared tenancy, on-demand, AWS Price List API",
        "https://github.com/aws/karpenter-provider-aws/blob/6fc13b5236fd04fd16ff3f9dc7490d0813994099"
        "/pkg/providers/pricing/zz_generated.pricing_aws.go",
    ),
    "gcp": PriceSource(
        "2026-07-30",
        "us-central1",
        "on-demand, Cloud Billing Catalog",
        "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/fd66b26ff84fee5cdd94f341ea89206e76c06b99"
        "/pricing.yml",
    ),
    "azure": PriceSource(
        "2026-06-18",
        "eastus",
        "Linux, pay-as-you-go, Azure Retail Prices API",
        "https://github.com/Azure/karpenter-provider-azure/blob/2b431da153a6a92b705c18046512c60b1631b682"
        "/pkg/providers/pricing/zz_generated.pricing.go",
    ),
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
    def as_of(self) -> str:
        return SOURCES[self.cloud].as_of

    @property
    def source(self) -> str:
        where = SOURCES[self.cloud]
        return (
            f"{self.cloud} list price {self.instance_type} as of {where.as_of}, {where.region}, {where.terms}:"
            f" {where.address}"
        )


CURRENCY: Final = "USD"

_TABLE = (
    # AWS (us-east-1); P4d and P5 after AWS's cut of June 2025
    ListPrice("aws", "g4dn.xlarge", 1, "T4", 0.526),
    ListPrice("aws", "g4dn.12xlarge", 4, "T4", 3.912),
    ListPrice("aws", "g5.xlarge", 1, "A10G", 1.006),
    ListPrice("aws", "g5.12xlarge", 4, "A10G", 5.672),
    ListPrice("aws", "g5.48xlarge", 8, "A10G", 16.288),
    ListPrice("aws", "g6.xlarge", 1, "L4", 0.8048),
    ListPrice("aws", "g6.12xlarge", 4, "L4", 4.6016),
    ListPrice("aws", "p3.2xlarge", 1, "V100", 3.06),
    ListPrice("aws", "p3.8xlarge", 4, "V100", 12.24),
    ListPrice("aws", "p4d.24xlarge", 8, "A100 40GB", 21.957642),
    ListPrice("aws", "p5.48xlarge", 8, "H100", 55.04),
    # GCP (us-central1): machine types with their GPUs attached; A3 with its bundled 6 TiB of local SSD
    ListPrice("gcp", "g2-standard-4", 1, "L4", 0.706832),
    ListPrice("gcp", "a2-highgpu-1g", 1, "A100 40GB", 3.673385),
    ListPrice("gcp", "a2-highgpu-8g", 8, "A100 40GB", 29.38708),
    ListPrice("gcp", "a3-highgpu-8g", 8, "H100", 88.49),
    # Azure (East US). Standard_NC6s_v3 (V100) is not listed: Azure retired it on 2025-09-30.
    ListPrice("azure", "Standard_NC4as_T4_v3", 1, "T4", 0.526),
    ListPrice("azure", "Standard_NC24ads_A100_v4", 1, "A100 80GB", 3.673),
    ListPrice("azure", "Standard_ND96asr_v4", 8, "A100 40GB", 27.197),
    ListPrice("azure", "Standard_ND96isr_H100_v5", 8, "H100", 98.32),
)
LIST_PRICES: Final = {p.instance_type: p for p in _TABLE}
