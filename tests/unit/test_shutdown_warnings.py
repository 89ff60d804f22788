"""``warnBefore``: the planner warns each running GPU pod once before its group goes down. Pure: observed pods and
the warnings they already carry in, ``PodWarning`` out.

Schedule: Mon-Fri 08:00-20:00 Europe/Berlin (CET in December), warnBefore 30m unless a case says otherwise.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import Record
from jobs.core.nodegroup_plan import GpuPod, ObservedGroup, PodWarning, plan_nodegroups, warning_event
from jobs.core.policy import Policy
from jobs.nodegroups.job import NodeGroupsPlan
from jobs.nodegroups.observe import Observation
from jobs.policy_file import PolicyError
from tests.unit.policies import policy_from

UP = GroupConfig(min=1, desired=2, max=4)
TRAIN = GpuPod("team-a", "train-0", "node-1", 8, evictable=True, uid="uid-train")
NOTEBOOK = GpuPod("team-b", "nb-0", "node-1", 1, evictable=True, uid="uid-nb")
# Tue 2026-12-01: the window ends at 20:00 CET (19:00 UTC).
BEFORE_END = datetime.fromisoformat("2026-12-01T19:40:00+01:00")
SHUTDOWN = datetime.fromisoformat("2026-12-01T20:00:00+01:00")


def policy(defaults: str = "  warnBefore: 30m\n", group: str = "", days: str = "Mon-Fri") -> Policy:
    return policy_from(
        "defaults:\n  timezone: Europe/Berlin\n"
        f'  workingHours: [{{days: {days}, start: "08:00", end: "20:00"}}]\n{defaults}'
        "nodeGroups:\n  - name: train-a100\n    cloud: aws\n    aws: {region: eu-west-1, cluster: ml, nodegroup: gpu}\n"
        + group
    )


def warnings(
    p: Policy,
    at: datetime,
    pods: tuple[GpuPod, ...] = (TRAIN, NOTEBOOK),
    warned: frozenset[str] = frozenset(),
    config: GroupConfig = UP,
) -> tuple[PodWarning, ...]:
    observed = ObservedGroup(p.node_groups[0], "eks", config, None, pods, ("node-1",), cluster="ml", warned=warned)
    return plan_nodegroups(p, (observed,), at).warnings


def test_each_running_gpu_pod_is_warned_within_warn_before_of_the_window_end() -> None:
    found = warnings(policy(), BEFORE_END)
    assert [w.pod for w in found] == [TRAIN, NOTEBOOK]
    assert {w.at for w in found} == {SHUTDOWN}
    assert found[0].at.utcoffset() is not None
    assert found[0].at.tzname() == "CET"
    assert found[0].message == (
        "Node group train-a100 goes down at Tue 2026-12-01 20:00 CET: onBusy wait: GPU pods still running then keep"
        " it up for at most 2h, then they are evicted; to keep it up while this pod runs: kubectl -n team-a annotate"
        " pod train-0 gpu-jobs/keep-alive=true (the group then stays up until every such pod ends), or an override in"
        " the policy (state: up, until)"
    )


@pytest.mark.parametrize(
    ("at", "why"),
    [
        ("2026-12-01T19:29:00+01:00", "31 min before the end: not yet"),
        ("2026-12-01T12:00:00+01:00", "midday"),
        ("2026-12-01T20:05:00+01:00", "after the end: the shutdown itself (or its postponement) speaks"),
        ("2026-12-01T23:00:00+01:00", "night"),
        ("2026-12-05T19:45:00+01:00", "a Saturday: down all day, nothing ends"),
    ],
)
def test_no_warning_outside_the_warn_before(at: str, why: str) -> None:
    assert warnings(policy(), datetime.fromisoformat(at)) == (), why


def test_no_warn_before_no_warning_and_a_group_can_switch_the_default_off() -> None:
    assert warnings(policy(defaults=""), BEFORE_END) == ()
    assert warnings(policy(group="    warnBefore: 0s\n"), BEFORE_END) == ()
    # And a group may warn earlier than the default.
    assert len(warnings(policy(group="    warnBefore: 1h\n"), datetime.fromisoformat("2026-12-01T19:05:00+01:00"))) == 2


def test_a_pod_that_already_got_its_event_is_not_warned_again_its_replacement_is() -> None:
    given = frozenset({f"team-a/{warning_event(TRAIN, SHUTDOWN)}"})
    assert [w.pod for w in warnings(policy(), BEFORE_END, warned=given)] == [NOTEBOOK]
    replacement = GpuPod("team-a", "train-0", "node-1", 8, evictable=True, uid="uid-train-2")  # same name, new pod
    assert [w.pod for w in warnings(policy(), BEFORE_END, (replacement,), warned=given)] == [replacement]


def test_the_event_name_is_one_per_pod_and_shutdown_and_a_valid_name() -> None:
    name = warning_event(TRAIN, SHUTDOWN)
    assert name == warning_event(TRAIN, SHUTDOWN.astimezone(UTC))  # the same instant, however it is written
    assert name.startswith("train-0.shutdown-")
    assert name != warning_event(TRAIN, datetime.fromisoformat("2026-12-02T20:00:00+01:00"))  # the next evening's
    long = GpuPod("ns", "p" * 253, "node-1", 1, evictable=True, uid="u")
    assert len(warning_event(long, SHUTDOWN)) == 253


def test_the_shutdown_time_is_dst_correct() -> None:
    """Sun 2026-10-25 Europe/Berlin goes from CEST to CET at 03:00: 20:00 that evening is 19:00 UTC, not 18:00."""
    p = policy(days="daily")
    found = warnings(p, datetime.fromisoformat("2026-10-25T18:40:00+00:00"))  # 19:40 CET
    assert found
    assert found[0].at.astimezone(UTC) == datetime.fromisoformat("2026-10-25T19:00:00+00:00")
    assert "Sun 2026-10-25 20:00 CET" in found[0].message
    # At 18:40 UTC the day before (20:40 CEST) the window had already ended: nothing to warn of.
    assert warnings(p, datetime.fromisoformat("2026-10-24T18:40:00+00:00")) == ()


@pytest.mark.parametrize(
    ("group", "pods", "fate"),
    [
        ("    onBusy: drain\n", (TRAIN,), "onBusy drain: GPU pods still running then are evicted"),
        ("    onBusy: force\n", (TRAIN,), "onBusy force: GPU pods still running then go down with their nodes"),
        (
            "    maxDelay: 1h30m\n    afterDelay: stay\n",
            (TRAIN,),
            "keep it up for at most 1h30m, then it stays up",
        ),
        (
            "",
            (TRAIN, GpuPod("team-c", "serve-0", "node-1", 1, evictable=False, uid="u")),
            "it stays up while pods that must not be evicted run (team-c/serve-0)",
        ),
    ],
)
def test_the_message_says_what_happens_to_running_work(group: str, pods: tuple[GpuPod, ...], fate: str) -> None:
    assert fate in warnings(policy(group=group), BEFORE_END, pods)[0].message


def test_nothing_to_warn_on_a_group_that_does_not_go_down() -> None:
    always = policy(group="    alwaysOn: true\n")
    assert warnings(always, BEFORE_END) == ()
    assert warnings(policy(), BEFORE_END, config=GroupConfig(min=1, desired=1, max=1, system=True)) == ()
    assert warnings(policy(), BEFORE_END, pods=()) == ()


def test_warnings_are_items_to_write_but_no_change_against_the_limit() -> None:
    p = policy()
    observed = (ObservedGroup(p.node_groups[0], "eks", UP, None, (TRAIN,), ("node-1",), cluster="ml"),)
    plan = NodeGroupsPlan(Observation(observed, ()), plan_nodegroups(p, observed, BEFORE_END))
    assert (len(plan.items), plan.changes, plan.plan.writes) == (1, 0, True)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("soon", '"soon" is not a duration (use e.g. 15m, 8h, 1h30m, 2d)'),
        ("8d", '"8d" is longer than'),
    ],
)
def test_a_bad_warn_before_is_named_with_file_and_line(value: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        policy(defaults=f"  warnBefore: {value}\n")
    problem = str(caught.value.problems[0])
    assert problem.startswith("test.yaml:6: defaults.warnBefore: "), problem
    assert message in problem


# Past the window with GPU pods running (onBusy wait): the shutdown waits maxDelay (2h) from 20:00, then evicts.
WAITING = Record(UP, "up", SHUTDOWN, busy_since=SHUTDOWN)
EVICTION = datetime.fromisoformat("2026-12-01T22:00:00+01:00")


def waiting(p: Policy, at: str, warned: frozenset[str] = frozenset()) -> tuple[PodWarning, ...]:
    observed = ObservedGroup(
        p.node_groups[0], "eks", UP, WAITING, (TRAIN, NOTEBOOK), ("node-1",), cluster="ml", warned=warned
    )
    return plan_nodegroups(p, (observed,), datetime.fromisoformat(at)).warnings


def test_a_pod_started_while_the_shutdown_waits_is_warned_before_the_wait_ends() -> None:
    """The window's end warned TRAIN (its Event is still there); NOTEBOOK started at 20:30 and was never told. Both
    are evicted at 22:00: only the one not warned for this shutdown gets an Event, 30 minutes before."""
    told = frozenset({f"team-a/{warning_event(TRAIN, SHUTDOWN)}"})
    assert waiting(policy(), "2026-12-01T21:20:00+01:00", told) == ()  # 40 min before: not yet
    (found,) = waiting(policy(), "2026-12-01T21:35:00+01:00", told)
    assert (found.pod, found.at, found.event) == (NOTEBOOK, EVICTION, warning_event(NOTEBOOK, EVICTION))
    assert found.message.startswith(
        "Node group train-a100 is past its working hours and waits for running GPU pods until Tue 2026-12-01 22:00"
        " CET (maxDelay 2h): then they are evicted; to keep it up while this pod runs: kubectl -n team-b annotate"
    )
    # Its own Event found again by the next run: nothing more; a group that then stays up takes nothing: no warning.
    again = frozenset({*told, f"team-b/{found.event}"})
    assert waiting(policy(), "2026-12-01T21:45:00+01:00", again) == ()
    assert waiting(policy(defaults="  warnBefore: 30m\n  afterDelay: stay\n"), "2026-12-01T21:35:00+01:00") == ()
