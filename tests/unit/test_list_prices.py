"""The shipped list prices: every row says where and when its price was read, and the example policy's groups that
name an instance type are priced from the table."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

from jobs import savings
from jobs.core.list_prices import CURRENCY, LIST_PRICES, SOURCES
from jobs.policy_file import parse_policy

ROOT = Path(__file__).resolve().parents[2]


def test_every_price_names_its_dated_source_region_and_address() -> None:
    for kind, price in LIST_PRICES.items():
        where = SOURCES[price.cloud]
        assert date.fromisoformat(price.as_of) <= datetime.now(UTC).date(), kind
        assert price.source.startswith(f"{price.cloud} list price {kind} as of {where.as_of}, {where.region}, "), kind
        assert price.source.endswith(where.address), kind
        assert where.address.startswith("https://"), kind


def test_a_gpu_hour_is_the_instance_hour_shared_by_its_gpus() -> None:
    assert LIST_PRICES["a3-highgpu-8g"].gpu_hour == 88.49 / 8
    assert LIST_PRICES["Standard_NC24ads_A100_v4"].gpu_hour == LIST_PRICES["Standard_NC24ads_A100_v4"].hourly


def test_the_example_policy_groups_priced_by_instance_type_are_in_the_table() -> None:
    policy = parse_policy((ROOT / "gitops/policy.yaml").read_text(), "gitops/policy.yaml")
    by_type = {
        group: given.instance_type
        for group, given in policy.pricing.node_groups.items()
        if given.gpu_hour is None and given.instance_type not in policy.pricing.instance_types
    }
    assert by_type, "the example policy prices no group from the table"
    for group, kind in by_type.items():
        assert kind in LIST_PRICES, f"{group}: {kind} has no list price"
        assert savings.price_of(policy, group) == savings.Price(
            LIST_PRICES[kind].gpu_hour, CURRENCY, LIST_PRICES[kind].source
        )
