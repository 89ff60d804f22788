"""Planning a restore the provider did not deliver: observe and report, never resend a size already in place.

Schedule: Mon-Fri 08:00-20:00 Europe/Berlin; DAY is Tue 2026-12-01 12:00 (working hours), NIGHT the same day 21:00.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.core.group_config import GroupConfig
from jobs.core.nodegroup_plan import RESTORE_NOT_DELIVERED, GroupAction, GroupSkip
from jobs.core.nodegroups import SetAutoscaling, SetSize
from tests.unit.test_nodegroup_plan import AKS_UP, CA, DAY, EKS_DOWN, EKS_UP, NIGHT, plan_one, rec

STOCKOUT = "AsgInstanceLaunchFailures: Could not launch On-Demand Instances. InsufficientInstanceCapacity"
# Restored size, autoscaler tags not yet back, the provider says why the nodes are not there.
EKS_SIZED = replace(EKS_DOWN, min=1, desired=3, max=8, autoscaling=False, autoscaler_tags={}, shortfall=STOCKOUT)


def test_size_in_place_with_a_shortfall_is_a_failed_skip_that_writes_nothing_but_an_event() -> None:
    skip = plan_one("eks", EKS_SIZED, DAY, record=rec(EKS_UP, "down"))

    assert isinstance(skip, GroupSkip)
    assert (skip.failed, skip.warning, skip.event) == (True, True, RESTORE_NOT_DELIVERED)
    assert STOCKOUT in skip.reason
    assert skip.save_record is None  # the pre-shutdown record stays as it is


def test_once_the_nodes_are_there_the_rest_of_the_restore_goes_ahead() -> None:
    action = plan_one("eks", replace(EKS_SIZED, shortfall=None), DAY, record=rec(EKS_UP, "down"))

    assert isinstance(action, GroupAction)
    assert action.steps == (SetAutoscaling(True, 1, 8, CA),)


def test_nodes_missing_without_a_cause_are_not_done_either() -> None:
    asg = GroupConfig(min=2, desired=2, max=4, missing=2)

    skip = plan_one("asg", asg, DAY, record=rec(replace(asg, missing=0), "down"), nodes=())

    assert isinstance(skip, GroupSkip)
    assert skip.failed
    assert "2 node(s) asked for are not there" in skip.reason


def test_a_size_not_in_place_is_sent_again() -> None:
    # AKS: a failed PUT leaves the old count; the next run resends it (the stockout may be over).
    failed = GroupConfig(min=0, desired=0, max=0, shortfall="AllocationFailed")

    action = plan_one("aks", failed, DAY, record=rec(replace(AKS_UP, autoscaling=False), "down"))

    assert isinstance(action, GroupAction)
    assert action.steps == (SetSize(1, 2, 6),)


def test_an_up_group_with_missing_nodes_is_reported_not_changed() -> None:
    skip = plan_one("eks", replace(EKS_UP, shortfall=STOCKOUT), DAY, record=rec(EKS_UP, "up"))

    assert isinstance(skip, GroupSkip)
    assert (skip.failed, skip.warning, skip.save_record) == (False, True, None)


def test_nodes_that_never_launched_do_not_block_the_shutdown() -> None:
    never = GroupConfig(min=2, desired=2, max=4, missing=2)
    some = replace(never, missing=1)

    action = plan_one("asg", never, NIGHT, record=rec(replace(never, missing=0), "down"), nodes=())
    skip = plan_one("asg", some, NIGHT, record=rec(replace(never, missing=0), "down"), nodes=())

    assert isinstance(action, GroupAction)
    assert action.direction == "down"
    assert isinstance(skip, GroupSkip)  # one node launched and the cluster shows none: unknown is never idle
    assert skip.failed
