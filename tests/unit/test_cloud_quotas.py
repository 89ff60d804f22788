"""The pure cloud-quotas planner: effective target (conversion, headroom, max), and the one action per quota."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobs.core.cloud_quotas import (
    Asked,
    CloudRequest,
    Demand,
    DemandPart,
    GroupSize,
    QuotaFacts,
    Shape,
    Unreadable,
    asked,
    demand_of,
    effective_target,
    plan_quota,
)
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.policy_file import parse_policy

# A weekday morning run (Wednesday 2 December 2026, 06:00 UTC); the record below is from the day before.
NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
YESTERDAY = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
POLICY = """\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
nodeGroups:
  - {name: train, cloud: aws, aws: {region: eu-west-1, cluster: c, nodegroup: a100}, up: {min: 0, desired: 2, max: 8}}
  - {name: infer, cloud: aws, aws: {region: eu-west-1, cluster: c, nodegroup: l4}}
cloudQuotas:
  - {name: p-spot, cloud: aws, region: eu-west-1, quota: {family: P, capacity: spot}, target: {nodeGroups: [train]}}
  - {name: g-od, cloud: aws, region: eu-west-1, quota: L-DB2E81BA, target: {instances: 4, instanceType: g6.xlarge}}
  - name: nc
    cloud: azure
    subscription: s
    location: westeurope
    family: standardNCADSA100v4Family
    target: 96
    headroom: {whenUsageAbove: 80%, raiseBy: 50%}
    max: 200
"""
POLICY_ENTRIES = {q.name: q for q in parse_policy(POLICY, "policy.yaml").cloud_quotas}
P4D = Shape("p4d.24xlarge", 96, "vCPU", family="P")
G6 = Shape("g6.xlarge", 4, "vCPU", family="G")


def entry(name: str) -> CloudQuota:
    return POLICY_ENTRIES[name]


def remembered(outcome: str = "open", target: int = 768, status: str = "PENDING", max_: int | None = None) -> Asked:
    return Asked(768, target, max_, "req-1", status, outcome, YESTERDAY)  # type: ignore[arg-type]


def request(status: str, outcome: str, value: int = 768, granted: int | None = None) -> CloudRequest:
    return CloudRequest("req-1", status, outcome, value, granted)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "groups", "shapes", "value", "text", "error"),
    [
        pytest.param(
            "p-spot",
            {"train": GroupSize("train", "p4d.24xlarge", 8, "spot")},
            {"p4d.24xlarge": P4D},
            768,
            "train: 8 x p4d.24xlarge x 96 vCPU = 768",
            None,
            id="a node group at its working max",
        ),
        pytest.param(
            "p-spot",
            {"train": GroupSize("train", "p4d.24xlarge", 8, "on-demand")},
            {"p4d.24xlarge": P4D},
            0,
            None,
            "node group train (p4d.24xlarge: family P, on-demand) does not count against quota p-spot (family P, spot)",
            id="an on-demand group against a spot quota",
        ),
        pytest.param(
            "p-spot",
            {"train": GroupSize("train", "g6.xlarge", 8, "spot")},
            {"g6.xlarge": G6},
            0,
            None,
            "node group train (g6.xlarge: family G, spot) does not count against quota p-spot (family P, spot)",
            id="a group of another family",
        ),
        pytest.param(
            "g-od",
            {},
            {"g6.xlarge": G6},
            16,
            "instances: 4 x g6.xlarge x 4 vCPU = 16",
            None,
            id="instances",
        ),
        pytest.param(
            "g-od",
            {},
            {"g6.xlarge": "g6.xlarge: unknown instance type"},
            0,
            None,
            "g6.xlarge: unknown instance type",
            id="an unknown instance type",
        ),
        pytest.param("nc", {}, {}, 0, None, None, id="a number needs no conversion"),
    ],
)
def test_demand_is_converted_with_the_clouds_data(
    name: str,
    groups: dict[str, GroupSize | str],
    shapes: dict[str, Shape | str],
    value: int,
    text: str | None,
    error: str | None,
) -> None:
    demand = demand_of(entry(name), groups, shapes)
    assert (demand.value, demand.text(), demand.error) == (value, text, error)


@pytest.mark.parametrize(
    ("base", "limit", "usage", "expected"),
    [
        pytest.param(96, 100, 50, (96, ""), id="usage below 80%: the target as written"),
        pytest.param(96, 100, 81, (150, "headroom: usage 81 above 80% of 100, +50%"), id="usage above 80%: +50%"),
        pytest.param(
            96,
            160,
            150,
            (200, "capped at max 200 (headroom: usage 150 above 80% of 160, +50%)"),
            id="headroom capped at max",
        ),
        pytest.param(96, 0, 0, (96, ""), id="no limit yet: no headroom"),
    ],
)
def test_effective_target_adds_headroom_and_never_exceeds_max(
    base: int, limit: int, usage: int, expected: tuple[int, str]
) -> None:
    assert effective_target(entry("nc"), base, limit, usage) == expected


TRAIN = Demand((DemandPart("train", 8, P4D),))


@pytest.mark.parametrize(
    ("facts", "memory", "action", "file", "record_status"),
    [
        pytest.param(QuotaFacts("vCPU", 96), None, "request", 768, None, id="first request"),
        pytest.param(QuotaFacts("vCPU", 768), None, "none", None, None, id="limit enough"),
        pytest.param(
            QuotaFacts("vCPU", 1024, followed=request("PENDING", "open")),
            remembered(),
            "pending",
            None,
            None,
            id="a person raised it while ours is open: still open, never a second one",
        ),
        pytest.param(
            QuotaFacts("vCPU", 1024),
            remembered(outcome="denied", status="DENIED"),
            "none",
            None,
            None,
            id="raised by hand since a denial: no request",
        ),
        pytest.param(
            QuotaFacts("vCPU", 96, open_request=CloudRequest("other", "CASE_OPENED", "open", 500)),
            None,
            "pending",
            None,
            None,
            id="someone else's open request: no duplicate",
        ),
        pytest.param(
            QuotaFacts("vCPU", 96, followed=request("CASE_OPENED", "open")),
            remembered(),
            "pending",
            None,
            "CASE_OPENED",
            id="ours moved to case opened: remembered",
        ),
        pytest.param(
            QuotaFacts("vCPU", 768, followed=request("APPROVED", "approved")),
            remembered(),
            "none",
            None,
            "APPROVED",
            id="approved: remembered, nothing to file",
        ),
        pytest.param(
            QuotaFacts("vCPU", 96, followed=request("DENIED", "denied")),
            remembered(),
            "denied",
            None,
            "DENIED",
            id="denied: remembered, not filed again",
        ),
        pytest.param(
            QuotaFacts("vCPU", 96, followed=request("DENIED", "denied")),
            remembered(outcome="denied", status="DENIED"),
            "denied",
            None,
            None,
            id="denied and already remembered: nothing to write",
        ),
        pytest.param(
            QuotaFacts("vCPU", 512, followed=request("APPROVED", "partial", granted=512)),
            remembered(outcome="partial", status="APPROVED"),
            "partial",
            None,
            None,
            id="partial: not filed again",
        ),
        pytest.param(
            QuotaFacts("vCPU", 96, followed=request("DENIED", "denied")),
            remembered(outcome="denied", status="DENIED", target=384),
            "request",
            768,
            None,
            id="denied for another target (up.max raised): filed for the new one",
        ),
        pytest.param(
            QuotaFacts("vCPU", 96),
            remembered(outcome="denied", status="DENIED", max_=500),
            "request",
            768,
            None,
            id="denied under another max: filed again",
        ),
        pytest.param(
            QuotaFacts("vCPU", 96, fixed="the quota is not Adjustable"), None, "error", None, None, id="not adjustable"
        ),
        pytest.param(
            QuotaFacts("vCPU", None, error="L-00000000: no such quota"), None, "error", None, None, id="unknown quota"
        ),
        pytest.param(QuotaFacts("vCPU", 96), Unreadable("bad json"), "error", None, None, id="unreadable record"),
    ],
)
def test_one_action_per_quota(
    facts: QuotaFacts, memory: Asked | Unreadable | None, action: str, file: int | None, record_status: str | None
) -> None:
    plan = plan_quota(entry("p-spot"), facts, TRAIN, memory, NOW)
    assert (plan.action, plan.file) == (action, file), plan.reason
    assert (plan.remember.status if plan.remember else None) == record_status
    assert plan.failed == (action in ("denied", "partial", "error"))
    if plan.action != "error":
        assert (plan.target, plan.demand) == (768, "train: 8 x p4d.24xlarge x 96 vCPU = 768")


def test_a_request_filed_is_remembered_with_its_target_and_max() -> None:
    plan = plan_quota(entry("p-spot"), QuotaFacts("vCPU", 96), TRAIN, None, NOW)
    assert asked(plan, CloudRequest("r-9", "PENDING", "open", 768), NOW) == Asked(
        768, 768, None, "r-9", "PENDING", "open", NOW
    )
    assert asked(plan, None, NOW).request_id is None  # a lost answer: found again on the next run


def test_a_headroom_target_is_a_request_above_the_written_target() -> None:
    plan = plan_quota(entry("nc"), QuotaFacts("vCPU", 100, usage=90), Demand(), None, NOW)
    assert (plan.action, plan.file, plan.target) == ("request", 150, 150)
    assert "headroom" in plan.reason
