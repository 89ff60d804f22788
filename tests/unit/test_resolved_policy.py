"""The policy resolved once, at load: what the planners read (jobs/core/resolved.py)."""

from __future__ import annotations

import gc
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from jobs.core import resolved as views
from jobs.core import schedule
from jobs.core.resolved import ResolvedPolicy, view_of
from jobs.core.schedule import compiled_schedule, in_working_hours
from tests.unit.policies import policy_from

NIGHT = datetime.fromisoformat("2026-12-01T21:00:00+01:00")  # Tue
CHRISTMAS = datetime.fromisoformat("2026-12-25T12:00:00+01:00")  # Fri, a public holiday in Berlin

POLICY = """
defaults:
  timezone: Europe/Berlin
  holidays: {country: DE, subdivision: BE}
  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]
  maxDelay: 45m
  warmUp: 15m
nodeGroups:
  - name: a
    cloud: aws
    aws: {region: eu-west-1, cluster: ml, nodegroup: a}
    drainTimeout: 1h30m
  - name: b
    cloud: aws
    aws: {region: eu-west-1, cluster: ml, nodegroup: b}
    onBusy: drain
  - name: c
    cloud: aws
    aws: {region: eu-west-1, cluster: ml, nodegroup: c}
    alwaysOn: true
namespaceQuotas:
  rules:
    - namespaces: [team-*]
      hard: {nvidia.com/gpu: 4}
      offHours:
        workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]
        hard: {nvidia.com/gpu: 0}
"""


def test_it_is_built_at_load() -> None:
    policy = policy_from(POLICY)
    # parse_policy built it (a policy it cannot resolve fails at load); the policy itself holds no view.
    key = id(policy)
    assert views._VIEWS[key] is view_of(policy)
    assert not any(isinstance(v, ResolvedPolicy) for v in vars(policy).values())
    del policy
    gc.collect()
    assert key not in views._VIEWS  # dropped with its policy


def test_settings_are_values_with_their_defaults() -> None:
    resolved = view_of(policy_from(POLICY))
    a, b = resolved.group("a").settings, resolved.group("b").settings
    assert (a.on_busy, a.max_delay, a.after_delay, a.drain_timeout, a.warm_up) == (
        "wait",
        timedelta(minutes=45),
        "drain",
        timedelta(hours=1, minutes=30),
        timedelta(minutes=15),
    )
    assert (b.on_busy, b.drain_timeout) == ("drain", timedelta(minutes=10))  # the documented default


def test_groups_with_the_same_schedule_share_one_compiled_schedule() -> None:
    resolved = view_of(policy_from(POLICY))
    a, b, c = (resolved.group(n).schedule for n in "abc")
    assert a is b  # asked once per instant, however many groups
    assert c is not a  # alwaysOn: its own
    assert (a.desired(NIGHT).state, c.desired(NIGHT).state) == ("down", "up")
    assert a.desired(CHRISTMAS).reason == "public holiday (Christmas Day): no working hours"


def test_a_quota_rule_is_compiled_once_for_every_namespace() -> None:
    policy = policy_from(POLICY)
    rule = view_of(policy).quota_rules[0]
    assert rule.off_hours_at(NIGHT)
    assert not rule.off_hours_at(NIGHT - timedelta(hours=2))
    off = rule.rule.off_hours
    assert off is not None
    before = compiled_schedule.cache_info()
    for _ in range(5000):
        assert not in_working_hours(ZoneInfo("Europe/Berlin"), policy.defaults.holidays, off.working_hours, NIGHT)
    after = compiled_schedule.cache_info()
    assert after.misses == before.misses  # the rule's schedule, compiled at load, is the one asked
    assert after.hits - before.hits == 5000


def test_one_holiday_table_per_country_subdivision_and_year() -> None:
    schedule._public_holidays.cache_clear()
    for name in ("x", "y"):
        body = POLICY.replace("nodegroup: a}", f"nodegroup: {name}}}").replace("name: a", f"name: {name}")
        view_of(policy_from(body)).group(name).schedule.desired(CHRISTMAS + timedelta(days=365))
    assert schedule._public_holidays.cache_info().misses == 1  # DE/BE 2027, loaded once for both policies


def test_a_copy_with_other_node_groups_is_resolved_again() -> None:
    policy = policy_from(POLICY)
    assert view_of(policy).group("a").settings.on_busy == "wait"
    forced = tuple(g.model_copy(update={"on_busy": "force"}) for g in policy.node_groups)
    copy = policy.model_copy(update={"node_groups": forced})
    assert view_of(copy).group("a").settings.on_busy == "force"
    assert view_of(policy).group("a").settings.on_busy == "wait"
