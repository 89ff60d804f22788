"""A Karpenter NodePool through the pure planner: the zero limit, then its claims per ``onBusy``; the limits back
in the morning; prewarm placeholders; and the policy's locator. Mon-Fri 08:00-20:00 Europe/Berlin."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import Record
from jobs.core.nodegroup_plan import GpuPod, GroupAction, GroupSkip, ObservedGroup, plan_nodegroups
from jobs.core.nodegroups import ZERO_LIMITS, RemoveClaims, SetLimits, SetPlaceholders
from jobs.core.policy import Policy
from jobs.core.resolved import view_of
from jobs.policy_file import PolicyError
from tests.unit.policies import policy_from

NIGHT = datetime.fromisoformat("2026-12-01T21:00:00+01:00")
WARMING = datetime.fromisoformat("2026-12-02T07:50:00+01:00")
OPEN = datetime.fromisoformat("2026-12-02T08:05:00+01:00")
LIMITS = {"cpu": "1000", "nvidia.com/gpu": "64"}
UP = GroupConfig(min=0, desired=2, max=0, autoscaling=True, limits=LIMITS)
DOWN = GroupConfig(min=0, desired=0, max=0, limits=dict(ZERO_LIMITS))
TRAIN = GpuPod("ml", "train-0", "node-1", 8, True, "u1")


def policy(extra: str = "", cloud: str = "aws") -> Policy:
    locator = {
        "aws": "aws: {region: eu-west-1, cluster: ml}",
        "azure": "azure: {subscription: s, resourceGroup: rg, cluster: ml}",
    }
    fields = "".join(f"    {line}\n" for line in extra.splitlines() if line.strip())
    return policy_from(
        f"clusters:\n  - {{name: ml, cloud: {cloud}, {locator[cloud]}}}\n"
        'defaults:\n  timezone: Europe/Berlin\n  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]\n'
        "  warmUp: 15m\n"
        f"nodeGroups:\n  - name: g\n    karpenter: {{cluster: ml, nodePool: gpu}}\n{fields}"
    )


def plan_one(
    config: GroupConfig,
    at: datetime,
    *,
    record: Record | None = None,
    pods: tuple[GpuPod, ...] = (),
    extra: str = "",
    nodes: tuple[str, ...] = ("node-1", "node-2"),
) -> GroupAction | GroupSkip | None:
    p = policy(extra)
    observed = ObservedGroup(p.node_groups[0], "karpenter", config, record, pods, nodes, cluster="ml")
    plan = plan_nodegroups(p, (observed,), at)
    assert len(plan.actions) + len(plan.skips) <= 1
    return (plan.actions or plan.skips or (None,))[0]


def down_record(busy_since: datetime | None = None) -> Record:
    return Record(UP, "down", NIGHT - timedelta(hours=1), busy_since)


def test_the_locator_gives_the_kind_the_clusters_cloud_and_the_claims_label() -> None:
    for cloud in ("aws", "azure"):
        group = view_of(policy(cloud=cloud)).group("g")
        assert (group.kind, group.group.cloud, group.cluster) == ("karpenter", cloud, "ml")
        assert dict(group.node_selector or {}) == {"karpenter.sh/nodepool": "gpu"}
        assert dict(group.identity.locator) == {"cluster": "ml", "nodePool": "gpu"}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("up: {min: 0, desired: 1, max: 2}", r"test.yaml:10: nodeGroups\[0\]: `up:` sizes a group"),
        ("prewarm: {nodes: 0}", r"test.yaml:12: nodeGroups\[0\].prewarm.nodes: 0"),
    ],
)
def test_a_pool_takes_no_size(extra: str, says: str) -> None:
    with pytest.raises(PolicyError, match=says):
        policy(extra)


def test_a_pool_needs_a_declared_cluster() -> None:
    body = "nodeGroups:\n  - name: g\n    karpenter: {cluster: ml, nodePool: gpu}\n"
    with pytest.raises(PolicyError, match=r'test.yaml:\d+: nodeGroups\[0\]: karpenter: cluster "ml" is not declared'):
        policy_from(body)


def test_the_night_sets_the_zero_limit_before_any_claim_goes() -> None:
    action = plan_one(UP, NIGHT)
    assert isinstance(action, GroupAction)
    assert action.take_record
    assert action.steps == (SetLimits(dict(ZERO_LIMITS)), RemoveClaims("keep", ()))
    assert action.busy_since is None


def test_wait_keeps_the_busy_node_and_remembers_since_when() -> None:
    action = plan_one(UP, NIGHT, pods=(TRAIN,))
    assert isinstance(action, GroupAction)
    assert action.steps[-1] == RemoveClaims("keep", ("node-1",))
    assert action.busy_since == NIGHT
    assert "kept until" in action.reason


def test_only_busy_claims_left_behind_the_zero_limit_is_a_quiet_postponement() -> None:
    left = GroupConfig(min=0, desired=1, max=0, limits=dict(ZERO_LIMITS))
    skip = plan_one(left, NIGHT, pods=(TRAIN,), record=down_record(NIGHT - timedelta(minutes=30)), nodes=("node-1",))
    assert isinstance(skip, GroupSkip)
    assert "postponed" in skip.reason
    assert skip.save_record is None


def test_drain_keeps_a_busy_node_whose_claim_would_force_its_pods() -> None:
    graced = GroupConfig(min=0, desired=2, max=0, limits=LIMITS, grace_nodes=frozenset({"node-1"}))
    action = plan_one(graced, NIGHT, pods=(TRAIN,), extra="onBusy: drain")
    assert isinstance(action, GroupAction)
    assert action.steps[-1] == RemoveClaims("drain", ("node-1",))
    assert action.evict == ()  # Karpenter drains, not the job
    plain = plan_one(UP, NIGHT, pods=(TRAIN,), extra="onBusy: drain")
    assert isinstance(plain, GroupAction)
    assert plain.steps[-1] == RemoveClaims("drain", ())


def test_force_lets_busy_nodes_go_but_never_pods_that_must_not_be_evicted() -> None:
    kept = GpuPod("ml", "serve-0", "node-2", 1, False, "u2")
    action = plan_one(UP, NIGHT, pods=(TRAIN, kept), extra="onBusy: force")
    assert isinstance(action, GroupAction)
    assert action.steps[-1] == RemoveClaims("force", ("node-2",))
    assert action.doomed == (TRAIN,)


def test_a_do_not_disrupt_node_is_running_work() -> None:
    config = GroupConfig(min=0, desired=2, max=0, limits=LIMITS, do_not_disrupt_nodes=frozenset({"node-2"}))
    action = plan_one(config, NIGHT, extra="onBusy: drain")
    assert isinstance(action, GroupAction)
    assert action.steps[-1] == RemoveClaims("drain", ("node-2",))


def test_karpenter_on_its_own_pool_is_refused() -> None:
    skip = plan_one(GroupConfig(min=0, desired=2, max=0, limits=LIMITS, refused="controller here"), NIGHT)
    assert isinstance(skip, GroupSkip)
    assert skip.failed
    assert "controller here" in skip.reason


def test_the_morning_writes_the_recorded_limits_back() -> None:
    action = plan_one(DOWN, OPEN, record=down_record())
    assert isinstance(action, GroupAction)
    assert action.steps == (SetLimits(LIMITS),)


def test_no_record_no_guess() -> None:
    skip = plan_one(DOWN, OPEN)
    assert isinstance(skip, GroupSkip)
    assert skip.failed
    assert "no record of its NodePool limits" in skip.reason


def test_prewarm_places_placeholders_while_warming_up_and_removes_them_once_open() -> None:
    action = plan_one(DOWN, WARMING, record=down_record(), extra="prewarm: {nodes: 2}")
    assert isinstance(action, GroupAction)
    assert action.steps == (SetLimits(LIMITS), SetPlaceholders(2))
    warm = GroupConfig(min=0, desired=2, max=0, autoscaling=True, limits=LIMITS, placeholders=2)
    restored = Record(UP, "up", NIGHT)
    assert plan_one(warm, WARMING, record=restored, extra="prewarm: {nodes: 2}") is None
    opened = plan_one(warm, OPEN, record=restored, extra="prewarm: {nodes: 2}")
    assert isinstance(opened, GroupAction)
    assert opened.steps == (SetPlaceholders(0),)
