"""The nodegroups planner, pure: observed configurations and records in, actions and skips out.

Schedule for every case: Mon-Fri 08:00-20:00 Europe/Berlin. NIGHT is Tue 2026-12-01 21:00, DAY the same day 12:00.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import Record
from jobs.core.nodegroup_plan import GpuPod, GroupAction, GroupSkip, ObservedGroup, plan_nodegroups
from jobs.core.nodegroups import SetAutoscaling, SetPower, SetSize
from jobs.core.policy import Policy
from jobs.core.providers import ProviderKind
from tests.unit.policies import policy_from

NIGHT = datetime.fromisoformat("2026-12-01T21:00:00+01:00")
DAY = datetime.fromisoformat("2026-12-01T12:00:00+01:00")
CA = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/ml": "owned"}
EKS_UP = GroupConfig(min=1, desired=3, max=8, autoscaling=True, autoscaler_tags=CA)
EKS_DOWN = GroupConfig(min=0, desired=0, max=1, autoscaling=False, autoscaler_tags=CA)
GKE_UP = GroupConfig(min=1, desired=None, max=5, autoscaling=True, zones=3)
AKS_UP = GroupConfig(min=1, desired=2, max=6, autoscaling=True)
LOCATORS = {
    "eks": "cloud: aws\naws: {region: eu-west-1, cluster: ml, nodegroup: gpu}",
    "asg": "cloud: aws\naws: {region: eu-west-1, autoScalingGroup: gpu-asg}",
    "gke": "cloud: gcp\ngcp: {project: p, location: europe-west4, cluster: c, nodePool: gpu}",
    "aks": "cloud: azure\nazure: {subscription: s, resourceGroup: rg, cluster: c, agentPool: gpu}",
}


def policy(kind: ProviderKind, extra: str = "") -> Policy:
    fields = "\n".join(f"    {line}" for line in f"{LOCATORS[kind]}\n{extra}".splitlines() if line.strip())
    head = 'defaults:\n  timezone: Europe/Berlin\n  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]\n'
    return policy_from(f"{head}nodeGroups:\n  - name: g\n{fields}\n")


def plan_one(
    kind: ProviderKind,
    config: GroupConfig,
    at: datetime,
    *,
    record: Record | None = None,
    pods: tuple[GpuPod, ...] = (),
    extra: str = "",
    nodes: tuple[str, ...] = ("node-1",),
    nodes_error: str | None = None,
) -> GroupAction | GroupSkip | None:
    p = policy(kind, extra)
    observed = ObservedGroup(p.node_groups[0], kind, config, record, pods, nodes, cluster="ml", nodes_error=nodes_error)
    plan = plan_nodegroups(p, (observed,), at)
    assert len(plan.actions) + len(plan.skips) <= 1
    return (plan.actions or plan.skips or (None,))[0]


def rec(config: GroupConfig, phase: str, busy_since: datetime | None = None) -> Record:
    return Record(config, phase, NIGHT - timedelta(days=1), busy_since)  # type: ignore[arg-type]


def test_eks_goes_down_autoscaler_first_and_keeps_max_at_one() -> None:
    action = plan_one("eks", EKS_UP, NIGHT)
    assert isinstance(action, GroupAction)
    assert (action.direction, action.take_record) == ("down", True)
    assert action.steps == (SetAutoscaling(False), SetSize(0, 0, 1))
    assert action.after.max == 1


def test_plain_asg_goes_to_zero_max_too() -> None:
    action = plan_one("asg", GroupConfig(min=2, desired=2, max=4), NIGHT)
    assert isinstance(action, GroupAction)
    assert action.steps == (SetSize(0, 0, 0),)


def test_down_group_with_down_record_plans_nothing() -> None:
    assert plan_one("eks", EKS_DOWN, NIGHT, record=rec(EKS_UP, "down")) is None


def test_crash_after_the_last_step_finishes_the_bookkeeping_only() -> None:
    action = plan_one("eks", EKS_DOWN, NIGHT, record=rec(EKS_UP, "stopping"))
    assert isinstance(action, GroupAction)
    assert (action.steps, action.take_record, action.record) == ((), False, rec(EKS_UP, "stopping"))


def test_crash_between_steps_keeps_the_original_record() -> None:
    # Autoscaler already off, size not yet changed: the record (phase stopping) is reused, not re-taken.
    half = GroupConfig(min=1, desired=3, max=8, autoscaling=False, autoscaler_tags=CA)
    action = plan_one("eks", half, NIGHT, record=rec(EKS_UP, "stopping"))
    assert isinstance(action, GroupAction)
    assert (action.steps, action.take_record, action.record) == ((SetSize(0, 0, 1),), False, rec(EKS_UP, "stopping"))


def test_manual_scale_up_at_night_is_undone_without_touching_the_record() -> None:
    action = plan_one("eks", GroupConfig(min=0, desired=2, max=4), NIGHT, record=rec(EKS_UP, "down"))
    assert isinstance(action, GroupAction)
    assert (action.steps, action.take_record) == ((SetSize(0, 0, 1),), False)


def test_morning_restores_the_record_size_then_the_autoscaler() -> None:
    action = plan_one("eks", EKS_DOWN, DAY, record=rec(EKS_UP, "down"))
    assert isinstance(action, GroupAction)
    assert action.direction == "up"
    assert action.steps == (SetSize(1, 3, 8), SetAutoscaling(True, 1, 8, CA))
    assert action.after == EKS_UP


def test_morning_without_record_or_policy_size_does_not_guess_and_fails() -> None:
    skip = plan_one("eks", EKS_DOWN, DAY)
    assert isinstance(skip, GroupSkip)
    assert skip.warning
    assert skip.failed  # down all working day: the Job status must say so (issue 18.6)
    assert "not guessing" in skip.reason
    assert "`up`" in skip.reason


def test_morning_without_record_uses_the_policy_size_and_default_discovery_tags() -> None:
    action = plan_one("eks", EKS_DOWN, DAY, extra="up: {min: 0, desired: 2, max: 6}")
    assert isinstance(action, GroupAction)
    assert action.steps == (SetSize(0, 2, 6), SetAutoscaling(True, 0, 6, CA))


def test_policy_size_wins_over_the_record() -> None:
    action = plan_one("eks", EKS_DOWN, DAY, record=rec(EKS_UP, "down"), extra="up: {min: 2, desired: 2, max: 4}")
    assert isinstance(action, GroupAction)
    assert action.steps[0] == SetSize(2, 2, 4)


@pytest.mark.parametrize(
    "config",
    [
        GroupConfig(min=1, desired=7, max=8, autoscaling=True, autoscaler_tags=CA),  # the autoscaler moved desired
        GroupConfig(min=1, desired=3, max=12, autoscaling=True, autoscaler_tags=CA),  # someone raised max
    ],
)
def test_daytime_changes_are_the_new_normal(config: GroupConfig) -> None:
    assert plan_one("eks", config, DAY, record=rec(EKS_UP, "up")) is None


def test_an_up_group_during_the_day_with_no_record_is_left_alone() -> None:
    assert plan_one("eks", EKS_UP, DAY) is None


POD = GpuPod("team-a", "train-0", "node-1", 8, evictable=True)
KEEP = GpuPod("team-b", "serve-0", "node-1", 1, evictable=False)


def test_busy_group_waits_and_records_when_the_wait_started() -> None:
    skip = plan_one("eks", EKS_UP, NIGHT, pods=(POD,))
    assert isinstance(skip, GroupSkip)
    assert "postponed until 2026-12-01T23:00:00+01:00" in skip.reason
    assert "team-a/train-0" in skip.reason
    assert skip.save_record is not None
    assert (skip.save_record.busy_since, skip.save_record.phase) == (NIGHT, "up")


def test_busy_group_still_waiting_writes_nothing_more() -> None:
    skip = plan_one("eks", EKS_UP, NIGHT, pods=(POD,), record=rec(EKS_UP, "up", busy_since=NIGHT - timedelta(hours=1)))
    assert isinstance(skip, GroupSkip)
    assert skip.save_record is None


def test_after_max_delay_the_group_is_drained() -> None:
    action = plan_one(
        "eks", EKS_UP, NIGHT, pods=(POD,), record=rec(EKS_UP, "up", busy_since=NIGHT - timedelta(hours=2))
    )
    assert isinstance(action, GroupAction)
    assert (action.evict, action.cordon, action.take_record) == ((POD,), ("node-1",), True)


def test_after_max_delay_stay_keeps_the_group_up() -> None:
    extra = "maxDelay: 30m\nafterDelay: stay"
    skip = plan_one(
        "eks", EKS_UP, NIGHT, pods=(POD,), record=rec(EKS_UP, "up", busy_since=NIGHT - timedelta(hours=1)), extra=extra
    )
    assert isinstance(skip, GroupSkip)
    assert skip.warning
    assert "stays up after maxDelay" in skip.reason


def test_on_busy_drain_and_force() -> None:
    drained = plan_one("eks", EKS_UP, NIGHT, pods=(POD,), extra="onBusy: drain")
    forced = plan_one("eks", EKS_UP, NIGHT, pods=(POD,), extra="onBusy: force")
    assert isinstance(drained, GroupAction)
    assert isinstance(forced, GroupAction)
    assert (drained.evict, drained.doomed) == ((POD,), ())
    assert (forced.evict, forced.doomed, forced.cordon) == ((), (POD,), ())


@pytest.mark.parametrize("mode", ["wait", "drain", "force"])
def test_keep_alive_pods_are_never_evicted(mode: str) -> None:
    skip = plan_one("eks", EKS_UP, NIGHT, pods=(POD, KEEP), extra=f"onBusy: {mode}")
    assert isinstance(skip, GroupSkip)
    assert "team-b/serve-0" in skip.reason


def test_gke_down_disables_autoscaling_then_resizes_and_then_is_stable() -> None:
    action = plan_one("gke", GKE_UP, NIGHT)
    assert isinstance(action, GroupAction)
    assert action.steps == (SetAutoscaling(False), SetSize(1, 0, 5))
    # After the run: autoscaling off, the pool reports no size, the record says down: nothing to do.
    after = GroupConfig(min=1, desired=None, max=5, autoscaling=False, zones=3)
    assert plan_one("gke", after, NIGHT, record=rec(GKE_UP, "down")) is None
    # Crash between the two steps (phase stopping): the resize is sent again, the record kept.
    again = plan_one("gke", after, NIGHT, record=rec(GKE_UP, "stopping"))
    assert isinstance(again, GroupAction)
    assert (again.steps, again.take_record) == ((SetSize(1, 0, 5),), False)


def test_gke_up_resizes_then_reenables_autoscaling() -> None:
    recorded = GroupConfig(min=1, desired=2, max=5, autoscaling=True, zones=3)
    after = GroupConfig(min=1, desired=None, max=5, autoscaling=False, zones=3)
    action = plan_one("gke", after, DAY, record=rec(recorded, "down"))
    assert isinstance(action, GroupAction)
    assert action.steps == (SetSize(1, 2, 5), SetAutoscaling(True, 1, 5))


def test_aks_scale_and_stop_strategies() -> None:
    scaled = plan_one("aks", AKS_UP, NIGHT)
    stopped = plan_one("aks", AKS_UP, NIGHT, extra="strategy: stop")
    assert isinstance(scaled, GroupAction)
    assert isinstance(stopped, GroupAction)
    assert scaled.steps == (SetAutoscaling(False), SetSize(1, 0, 6))
    # Stopping a pool stops its autoscaler with it: no separate autoscaler update.
    assert stopped.steps == (SetPower(True),)
    # Back up from stopped: starting restarts the autoscaler with its bounds, so power is the only step.
    down = replace(AKS_UP, stopped=True)
    back = plan_one("aks", down, DAY, record=rec(AKS_UP, "down"), extra="strategy: stop")
    assert isinstance(back, GroupAction)
    assert back.steps == (SetPower(False),)
    # A pool stopped the old way (autoscaler switched off first) still gets its autoscaler back.
    old_way = GroupConfig(min=1, desired=2, max=6, autoscaling=False, stopped=True)
    back = plan_one("aks", old_way, DAY, record=rec(AKS_UP, "down"), extra="strategy: stop")
    assert isinstance(back, GroupAction)
    assert back.steps == (SetPower(False), SetAutoscaling(True, 1, 6))


def test_aks_system_pool_is_refused() -> None:
    skip = plan_one("aks", GroupConfig(min=1, desired=3, max=5, autoscaling=True, system=True), NIGHT)
    assert isinstance(skip, GroupSkip)
    assert "system pool" in skip.reason


def test_eks_wake_up_keeps_the_discovery_tags_and_lets_the_autoscaler_size() -> None:
    action = plan_one("eks", EKS_UP, NIGHT, extra="autoscalerWakeUp: true")
    assert isinstance(action, GroupAction)
    assert action.steps == (SetSize(0, 0, 1),)
    # The autoscaler woke the group for a pending pod: desired 1 within [0, 1] is left alone.
    woken = GroupConfig(min=0, desired=1, max=1, autoscaling=True, autoscaler_tags=CA)
    assert plan_one("eks", woken, NIGHT, record=rec(EKS_UP, "down"), extra="autoscalerWakeUp: true") is None


def test_unreadable_group_is_skipped_with_the_error() -> None:
    p = policy("eks")
    plan = plan_nodegroups(p, (ObservedGroup(p.node_groups[0], "eks", None, error="throttled"),), NIGHT)
    assert plan.skips == (GroupSkip("g", "cannot read the group: throttled", warning=True, failed=True),)
    assert plan.failures == plan.skips


def test_a_wait_that_never_ended_in_a_shutdown_is_forgotten_in_the_morning() -> None:
    waited = rec(EKS_UP, "up", busy_since=NIGHT)
    skip = plan_one("eks", EKS_UP, DAY + timedelta(days=1), record=waited)
    assert isinstance(skip, GroupSkip)
    assert skip.save_record == rec(EKS_UP, "up")  # the same record, without busy_since


def test_a_group_with_an_update_running_waits_for_the_next_run() -> None:
    busy = GroupConfig(min=1, desired=3, max=8, autoscaling=True, autoscaler_tags=CA, busy=True)
    skip = plan_one("eks", busy, NIGHT)
    assert isinstance(skip, GroupSkip)
    assert (skip.reason, skip.warning, skip.save_record) == (
        "an update is already running on the group: next run",
        False,
        None,
    )
    # Nothing to change for the job, but someone else's update runs: reported as busy, not dropped (issue 18.8).
    skip = plan_one("eks", GroupConfig(min=1, desired=3, max=8, busy=True), DAY)
    assert isinstance(skip, GroupSkip)
    assert (skip.reason, skip.failed, skip.warning) == (
        "an update is already running on the group: next run",
        False,
        False,
    )
    assert plan_one("eks", GroupConfig(min=1, desired=3, max=8), DAY) is None  # not busy: nothing at all


def test_a_busy_group_with_a_reason_of_its_own_keeps_it() -> None:
    busy = replace(EKS_UP, busy=True)
    skip = plan_one("eks", busy, NIGHT, pods=(POD,))
    assert isinstance(skip, GroupSkip)
    assert skip.reason.startswith("shutdown postponed until")


# Unknown is never idle: a group is judged through its own cluster's API, and only when that API shows its nodes.


def test_cloud_nodes_the_api_does_not_show_are_never_shut_down() -> None:
    skip = plan_one("eks", EKS_UP, NIGHT, nodes=())
    assert isinstance(skip, GroupSkip)
    assert (skip.failed, skip.warning) == (True, True)
    assert skip.reason == (
        "not shut down: the cloud reports 3 node(s) but cluster ml's API shows none of them"
        " (wrong cluster, or nodes not registered yet)"
    )


def test_a_group_whose_nodes_cannot_be_identified_is_a_failure_not_idle() -> None:
    skip = plan_one("asg", GroupConfig(min=2, desired=2, max=4), NIGHT, nodes_error="no node label for this group")
    assert isinstance(skip, GroupSkip)
    assert skip.failed
    assert skip.reason.startswith("not shut down: no node label for this group")


def test_an_unknown_live_size_with_no_nodes_in_sight_is_not_idle() -> None:
    skip = plan_one("gke", GKE_UP, NIGHT, nodes=())
    assert isinstance(skip, GroupSkip)
    assert skip.failed
    assert "does not say how many nodes" in skip.reason


def test_a_group_already_at_zero_nodes_goes_down_with_none_in_sight() -> None:
    # The autoscaler took it to zero: no nodes to see, nothing running, the shutdown (max, autoscaler) goes ahead.
    action = plan_one(
        "eks", GroupConfig(min=0, desired=0, max=8, autoscaling=True, autoscaler_tags=CA), NIGHT, nodes=()
    )
    assert isinstance(action, GroupAction)
    assert action.after.max == 1


# Records are checked on read (issue 18.5): a record no provider would accept fails its group, never obeyed.


@pytest.mark.parametrize(
    ("kind", "recorded", "why"),
    [
        (
            "eks",
            GroupConfig(1, 300, 6, autoscaling=True, autoscaler_tags=CA),
            "sizes 1/300/6 are not min <= desired <= max",
        ),
        ("eks", GroupConfig(8, 3, 1), "sizes 8/3/1 are not min <= desired <= max"),
        ("aks", GroupConfig(0, -3, 0), "sizes 0/-3/0 are negative"),
        (
            "gke",
            GroupConfig(0, 1001, 0, zones=3),
            "sizes 0/1001/0 are above the GKE node pool limit of 1000 nodes per zone",
        ),
        (
            "aks",
            GroupConfig(1, 2, 1001, autoscaling=True),
            "sizes 1/2/1001 are above the AKS agent pool limit of 1000 nodes",
        ),
    ],
)
def test_a_record_with_impossible_sizes_fails_its_group(kind: ProviderKind, recorded: GroupConfig, why: str) -> None:
    down = GroupConfig(0, 0, 1 if kind == "eks" else 0)
    for phase, at in (("down", DAY), ("stopping", NIGHT)):
        skip = plan_one(kind, down, at, record=rec(recorded, phase))
        assert isinstance(skip, GroupSkip), phase
        assert (skip.failed, skip.warning) == (True, True)
        assert skip.reason == f"left as it is: its record is not usable: {why} (fix or delete it)"


def test_a_gke_record_without_autoscaling_has_no_bounds_to_check() -> None:
    # GKE reports bounds 0..0 while the pool autoscaler is off: only the count matters then.
    action = plan_one("gke", GroupConfig(0, 0, 0, zones=3), DAY, record=rec(GroupConfig(0, 3, 0, zones=3), "down"))
    assert isinstance(action, GroupAction)
    assert action.steps == (SetSize(0, 3, 0),)


def test_a_policy_size_is_restored_over_an_impossible_record() -> None:
    # With `up:` the record's sizes are not restored, so they cannot do harm.
    bad = GroupConfig(1, 300, 6, autoscaling=True, autoscaler_tags=CA)
    action = plan_one("eks", EKS_DOWN, DAY, record=rec(bad, "down"), extra="up: {min: 1, desired: 2, max: 6}")
    assert isinstance(action, GroupAction)
    assert action.after.desired == 2


def test_a_record_of_a_group_up_is_not_checked() -> None:
    # Phase up: nothing is worked from it; the next shutdown takes a new one.
    assert plan_one("eks", EKS_UP, DAY, record=rec(GroupConfig(8, 3, 1), "up")) is None


# A drain that gave up (issue 22): blockers followed by uid, retried early only once none is left on the group.
SERVE_0 = GpuPod("team-a", "serve-0", "node-1", 1, True, "u0")
SERVE_1 = GpuPod("team-a", "serve-1", "node-1", 1, True, "u1")
NOTEBOOK = GpuPod("team-b", "notebook-0", "node-1", 1, True, "n0")


@pytest.mark.parametrize(
    ("pods", "allowed_now", "drains"),
    [
        ((SERVE_0, SERVE_1), 0, False),  # nothing changed
        ((SERVE_0, SERVE_1, NOTEBOOK), 0, False),  # a new pod landed: draining would evict it into the same refusal
        ((SERVE_0,), 0, False),  # serve-1 recreated elsewhere or Pending: serve-0 still blocks
        ((SERVE_0, replace(SERVE_1, uid="u1-new")), 0, False),  # serve-1 replaced on the node: serve-0 still blocks
        ((NOTEBOOK,), 0, True),  # no blocker left on the group's nodes
        ((replace(SERVE_0, uid="u0-new"), replace(SERVE_1, uid="u1-new")), 0, True),  # every blocker replaced
        ((SERVE_0, SERVE_1), 1, True),  # the budget allows another number
    ],
    ids=["same", "new-pod", "one-moved", "one-replaced", "none-left", "all-replaced", "budget"],
)
def test_a_blocked_drain_is_tried_again_only_once_no_blocker_is_left(
    pods: tuple[GpuPod, ...], allowed_now: int, drains: bool
) -> None:
    from jobs.core.group_record import DrainBlock

    block = DrainBlock(
        NIGHT - timedelta(minutes=10), 1, ("team-a/serve-0/u0", "team-a/serve-1/u1"), (("team-a/serve", 0),)
    )
    record = replace(rec(EKS_UP, "up"), drain_blocked=block)
    p = policy("eks", "onBusy: drain")
    observed = ObservedGroup(p.node_groups[0], "eks", EKS_UP, record, pods, ("node-1",), cluster="ml")
    observed = replace(observed, budgets=(("team-a/serve", allowed_now),))
    plan = plan_nodegroups(p, (observed,), NIGHT)
    (outcome,) = (*plan.actions, *plan.skips)
    assert isinstance(outcome, GroupAction) is drains
    if not drains:
        assert isinstance(outcome, GroupSkip)
        assert outcome.reason.startswith("shutdown blocked:")


def test_a_record_left_stopping_by_a_stopped_drain_is_finished_at_night_and_marked_up_by_day() -> None:
    # A drain was stopped (SIGTERM) after the record was taken: the group is up, the record says stopping and when
    # the wait for running pods began.
    left = rec(EKS_UP, "stopping", busy_since=NIGHT - timedelta(hours=3))
    night = plan_one("eks", EKS_UP, NIGHT, record=left, pods=(POD,))
    assert isinstance(night, GroupAction)  # maxDelay is not started over: drain again, from the same record
    assert (night.evict, night.take_record, night.record) == ((POD,), False, left)
    gone = plan_one("eks", EKS_UP, NIGHT, record=left)
    assert isinstance(gone, GroupAction)
    assert (gone.evict, gone.steps, gone.record) == ((), (SetAutoscaling(False), SetSize(0, 0, 1)), left)
    day = plan_one("eks", EKS_UP, DAY, record=left)
    assert isinstance(day, GroupAction)
    assert (day.direction, day.steps, day.record) == ("up", (), left)  # only the record is marked up
