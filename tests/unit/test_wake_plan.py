"""Wake on demand and keep-up-until in the planner. Pure: observed groups, records and Pending pods in, actions,
skips and notices out.

Schedule: Mon-Fri 08:00-20:00 Europe/Berlin (CET in December). The group is EKS ``gpu`` in cluster ``ml``, down
since 20:05 (record: 1/3/8), with ``wake: {namespaces: [ml-*, nlp], for: 2h, maxNodes: 2}`` unless a case says
otherwise.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import Record
from jobs.core.nodegroup_plan import GpuPod, GroupAction, GroupSkip, NodeGroupPlan, ObservedGroup, plan_nodegroups
from jobs.core.nodegroups import SetSize
from jobs.core.policy import Policy
from jobs.core.wake import KeepUp, NodeShape, PendingPod, Requirement, Taint, Toleration, WakeRecord, fits
from jobs.policy_file import PolicyError
from tests.unit.policies import policy_from

LABEL = {"eks.amazonaws.com/nodegroup": "gpu"}
DOWN = GroupConfig(min=0, desired=0, max=1)
BEFORE = GroupConfig(
    min=1, desired=3, max=8, autoscaling=True, autoscaler_tags={"k8s.io/cluster-autoscaler/enabled": "true"}
)
EVENING = datetime.fromisoformat("2026-12-01T20:05:00+01:00")  # Tue
NIGHT = datetime.fromisoformat("2026-12-01T22:00:00+01:00")
RECORD = Record(BEFORE, "down", EVENING)
WAKE = "    wake: {namespaces: [ml-*, nlp], for: 2h, maxNodes: 2}\n"


def policy(group: str = WAKE) -> Policy:
    return policy_from(
        "defaults:\n  timezone: Europe/Berlin\n"
        '  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]\n'
        "nodeGroups:\n  - name: train\n    cloud: aws\n    aws: {region: eu-west-1, cluster: ml, nodegroup: gpu}\n"
        + group
    )


def pod(name: str = "job-0", ns: str = "ml-a", gpus: int = 1, **kw: Any) -> PendingPod:
    return replace(PendingPod(ns, name, f"uid-{name}", gpus, ("nvidia.com/gpu",), dict(LABEL)), **kw)


def plan(
    p: Policy,
    pending: tuple[PendingPod, ...],
    at: datetime = NIGHT,
    record: Record | None = RECORD,
    config: GroupConfig = DOWN,
    nodes: tuple[str, ...] = (),
    told: frozenset[str] = frozenset(),
    pods: tuple[GpuPod, ...] = (),
) -> NodeGroupPlan:
    observed = ObservedGroup(p.node_groups[0], "eks", config, record, pods, nodes, cluster="ml")
    return plan_nodegroups(p, (observed,), at, pending, told)


def test_a_pending_pod_in_an_allowed_namespace_wakes_the_group_with_the_nodes_it_needs() -> None:
    result = plan(policy(), (pod(),))
    (action,) = result.actions
    assert action.wake is not None
    assert action.steps == (SetSize(0, 1, 1),)
    assert (action.wake.by, action.wake.nodes, action.wake.until) == ("ml-a/job-0", 1, NIGHT + timedelta(hours=2))
    # The record keeps the pre-shutdown size; the wake and the pod that woke it are added.
    assert action.record is not None
    assert (action.record.config, action.record.phase, action.record.woke) == (BEFORE, "down", ("uid-job-0",))
    ((waker, _, message),) = action.wakers
    assert waker.name == "job-0"
    assert message == "waking train: 1 node, usually ready in ~5 min, up until 00:00 (policy wake.for)"
    assert result.notices == ()


@pytest.mark.parametrize(
    ("pods", "group", "nodes"),
    [
        ((pod(gpus=16),), "    gpusPerNode: 8\n", 2),
        ((pod("a", gpus=16), pod("b", gpus=8)), "    gpusPerNode: 8\n", 2),  # 3 wanted, maxNodes 2
        ((pod("a"), pod("b")), "", 2),  # without gpusPerNode: a node per pod
        ((pod(gpus=16),), "    gpusPerNode: 8\n    up: {min: 0, desired: 1, max: 1}\n", 1),  # up.max 1
    ],
)
def test_the_wake_is_capped_by_max_nodes_and_up_max(pods: tuple[PendingPod, ...], group: str, nodes: int) -> None:
    (action,) = plan(policy(WAKE + group), pods).actions
    assert action.wake is not None
    assert action.wake.nodes == nodes
    assert action.steps == (SetSize(0, nodes, nodes),)


@pytest.mark.parametrize(
    ("candidate", "group", "says"),
    [
        (pod(ns="team-b"), WAKE, "not waking train: namespace team-b may not wake it (wake.namespaces: ml-*, nlp)"),
        (pod(node_selector={"gpu": "b200"}), WAKE, "not waking any node group: no node group of the policy"),
        (pod(), "    wake: {namespaces: [other], onPendingPods: false}\n", "not waking train: it has no wake policy;"),
        (pod(owner="rs-1"), WAKE, "not waking train: this pod replaces one this job evicted"),
    ],
)
def test_a_pod_that_wakes_nothing_is_told_why_once(candidate: PendingPod, group: str, says: str) -> None:
    record = Record(BEFORE, "down", EVENING, displaced=("rs-1",))
    result = plan(policy(group), (candidate,), record=record)
    assert result.actions == ()
    (notice,) = result.notices
    assert notice.message.startswith(says)
    # Told already (its Event is there): nothing to write.
    again = plan(policy(group), (candidate,), record=record, told=frozenset({f"{candidate.namespace}/{notice.event}"}))
    assert (again.actions, again.notices) == ((), ())


def test_no_wake_in_working_hours_nor_for_a_group_that_is_up() -> None:
    midday = datetime.fromisoformat("2026-12-01T12:00:00+01:00")
    assert plan(policy(), (pod(),), at=midday, record=Record(BEFORE, "up", EVENING), config=BEFORE).actions == ()
    up_at_night = plan(policy(), (pod(),), config=GroupConfig(1, 1, 1), nodes=("n1",), record=None)
    assert all(a.wake is None for a in up_at_night.actions)
    assert up_at_night.notices == ()


def test_a_group_without_wake_sees_no_pending_pods_at_all() -> None:
    assert plan(policy(""), (pod(),)) == plan(policy(""), ())


def test_a_pod_wakes_the_group_once_per_night() -> None:
    record = Record(BEFORE, "down", EVENING, woke=("uid-job-0",))
    result = plan(policy(), (pod(),), record=record)
    assert (result.actions, result.notices) == ((), ())


def test_no_wake_without_a_record_of_the_working_size() -> None:
    result = plan(policy(), (pod(),), record=None)
    (skip,) = result.skips
    assert skip.reason.startswith("not woken for ml-a/job-0: no record of its working size")


def test_a_wake_in_force_keeps_the_group_up_then_the_shutdown_path_applies() -> None:
    wake = WakeRecord("ml-a/job-0", "uid-job-0", "wake: ml-a/job-0", NIGHT, NIGHT + timedelta(hours=2), 1)
    record = Record(BEFORE, "down", EVENING, wake=wake, woke=("uid-job-0",))
    woken = GroupConfig(0, 1, 1)
    during = plan(policy(), (), at=NIGHT + timedelta(hours=1), record=record, config=woken, nodes=("n1",))
    (skip,) = during.skips
    assert skip.reason.startswith("woken until 2026-12-02T00:00:00+01:00")
    assert (during.actions, skip.save_record) == ((), None)
    # A crash between the record and the resize: the next run sends the resize.
    (resend,) = plan(policy(), (), at=NIGHT + timedelta(minutes=1), record=record).actions
    assert resend.steps == (SetSize(0, 1, 1),)
    # Over: the shutdown path, back to the down size, from the pre-shutdown record.
    (down,) = plan(policy(), (), at=NIGHT + timedelta(hours=2), record=record, config=woken, nodes=("n1",)).actions
    assert (down.direction, down.after.desired, down.take_record, down.record) == ("down", 0, False, record)


def test_a_woken_group_warns_its_pods_before_the_wake_ends() -> None:
    wake = WakeRecord("ml-a/job-0", "uid-job-0", "wake", NIGHT, NIGHT + timedelta(hours=2), 1)
    record = Record(BEFORE, "down", EVENING, wake=wake)
    running = GpuPod("ml-a", "job-0", "n1", 1, evictable=True, uid="uid-job-0")
    p = policy(WAKE + "    warnBefore: 30m\n")
    at = NIGHT + timedelta(hours=1, minutes=45)
    (warning,) = plan(p, (), at=at, record=record, config=GroupConfig(0, 1, 1), nodes=("n1",), pods=(running,)).warnings
    assert warning.at == NIGHT + timedelta(hours=2)


def test_fits_reads_selectors_affinity_tolerations_and_resources() -> None:
    shape = NodeShape(
        {"gpu": "a100", "zone": "a"}, (Taint("nvidia.com/gpu", "present", "NoSchedule"),), ("nvidia.com/gpu",)
    )
    tolerate = (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)
    base = PendingPod("ml", "p", "u", 1, ("nvidia.com/gpu",), {"gpu": "a100"}, tolerations=tolerate)
    assert fits(base, LABEL, shape)
    assert not fits(PendingPod("ml", "p", "u", 1, ("nvidia.com/gpu",), {"gpu": "a100"}), LABEL, shape)  # untolerated
    assert not fits(PendingPod("ml", "p", "u", 1, ("amd.com/gpu",), tolerations=tolerate), LABEL, shape)
    affinity = ((Requirement("gpu", "In", ("h100",)),), (Requirement("zone", "In", ("a", "b")),))
    assert fits(
        PendingPod("ml", "p", "u", 1, ("nvidia.com/gpu",), affinity=affinity, tolerations=tolerate), LABEL, shape
    )
    assert not fits(
        PendingPod("ml", "p", "u", 1, ("nvidia.com/gpu",), affinity=(None,), tolerations=tolerate), LABEL, shape
    )
    # Without a recorded shape: the provider's label only, no taints, any GPU resource.
    assert fits(PendingPod("ml", "p", "u", 1, ("amd.com/gpu",), dict(LABEL)), LABEL, None)


def test_keep_up_until_holds_the_group_capped_by_max_delay_saved_once() -> None:
    p = policy("    onBusy: drain\n")
    asked = "2026-12-01T23:30:00+01:00"
    running = GpuPod("ml-a", "job-0", "n1", 1, evictable=True, uid="u1", keep_up_until=asked)
    up = GroupConfig(1, 3, 8)
    (skip,) = plan(p, (), at=EVENING, record=None, config=up, nodes=("n1",), pods=(running,)).skips
    assert isinstance(skip, GroupSkip)
    assert skip.reason.startswith("kept up until 2026-12-01T22:05:00+01:00 by ml-a/job-0 (gpu-jobs/keep-up-until)")
    assert skip.save_record is not None
    assert skip.save_record.kept_up == (KeepUp("ml-a/job-0/u1", asked, EVENING),)
    assert len(skip.kept) == 1
    # Later: the cap is read from the record, not recomputed; nothing new to save.
    later = plan(
        p, (), at=EVENING + timedelta(hours=1), record=skip.save_record, config=up, nodes=("n1",), pods=(running,)
    )
    (again,) = later.skips
    assert (again.save_record, again.kept) == (None, ())
    # After the cap the shutdown goes on (drain).
    (action,) = plan(
        p,
        (),
        at=EVENING + timedelta(hours=2, minutes=1),
        record=skip.save_record,
        config=up,
        nodes=("n1",),
        pods=(running,),
    ).actions
    assert isinstance(action, GroupAction)
    assert action.evict == (running,)


def test_a_malformed_keep_up_until_is_noted_in_the_shutdown_reason() -> None:
    running = GpuPod("ml-a", "job-0", "n1", 1, evictable=True, uid="u1", keep_up_until="soon")
    (action,) = plan(
        policy("    onBusy: drain\n"),
        (),
        at=EVENING,
        record=None,
        config=GroupConfig(1, 3, 8),
        nodes=("n1",),
        pods=(running,),
    ).actions
    assert 'ignored: ml-a/job-0: gpu-jobs/keep-up-until="soon" is not an RFC 3339 time' in action.reason


@pytest.mark.parametrize(
    ("group", "says"),
    [
        ("    wake: {namespaces: [ml-*], for: 5m}\n", "shorter than 10m"),
        ("    wake: {namespaces: []}\n", "at least 1 item"),
        ("    wake: {namespaces: [ml-*]}\n    autoscalerWakeUp: true\n", "would fight over its size"),
        ("    wake: {namespaces: [ml-*], maxNodes: 0}\n", "greater than or equal to 1"),
    ],
)
def test_a_wake_that_cannot_be_honoured_is_refused_at_load(group: str, says: str) -> None:
    with pytest.raises(PolicyError, match=says):
        policy(group)


def test_a_run_of_one_group_only_never_tells_a_pod_it_fits_no_group() -> None:
    p = policy()
    observed = ObservedGroup(p.node_groups[0], "eks", DOWN, RECORD, (), (), cluster="ml")
    odd = pod(node_selector={"gpu": "b200"})
    assert plan_nodegroups(p, (observed,), NIGHT, (odd,), frozenset(), every_group=False).notices == ()
    assert len(plan_nodegroups(p, (observed,), NIGHT, (odd,), frozenset()).notices) == 1


def test_validate_warns_that_autoscaler_wake_up_is_deprecated_and_names_wake() -> None:
    from jobs.policy_file import check_policy
    from tests.unit.policies import HEADER

    text = HEADER + (
        "defaults: {timezone: Europe/Berlin}\n"
        "nodeGroups:\n  - name: train\n    cloud: aws\n    aws: {region: eu-west-1, cluster: ml, nodegroup: gpu}\n"
        "    autoscalerWakeUp: true\n"
    )
    (warning,) = check_policy(text, "p.yaml").warnings
    assert (warning.path, warning.warning) == ("nodeGroups[0].autoscalerWakeUp", True)
    assert warning.message.startswith("autoscalerWakeUp is deprecated")
    assert "use wake: {namespaces: [...], for: 2h, maxNodes: 1} on train instead" in warning.message


def test_a_stopped_pool_cannot_be_woken_within_max_nodes_so_the_policy_refuses_it() -> None:
    aks = (
        "nodeGroups:\n  - name: finetune\n    cloud: azure\n"
        "    azure: {subscription: s, resourceGroup: rg, cluster: ml, agentPool: gpu}\n"
        "    strategy: stop\n    wake: {namespaces: [ml-*], maxNodes: 1}\n"
    )
    with pytest.raises(PolicyError, match=r"test.yaml:\d+: nodeGroups\[0\]: wake: a pool with strategy stop starts at"):
        policy_from('defaults:\n  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]\n' + aks)
