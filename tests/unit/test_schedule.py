"""The schedule engine, table-driven. Every instant is written with its offset and a comment saying why."""

from __future__ import annotations

from datetime import datetime

import pytest

from jobs.core.policy import NodeGroup, Policy
from jobs.core.resolved import view_of
from tests.unit.policies import one_group, policy_from

WEEKDAYS = "workingHours:\n  - {days: Mon-Fri, start: '08:00', end: '20:00'}"
OVERNIGHT = "workingHours:\n  - {days: Mon-Fri, start: '22:00', end: '06:00'}"
NIGHT_1_TO_4 = "workingHours:\n  - {days: daily, start: '01:00', end: '04:00'}"
NIGHT_22_TO_6 = "workingHours:\n  - {days: daily, start: '22:00', end: '06:00'}"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


CASES = [
    # (id, timezone, schedule, instant, state, next change or None, reason fragment)
    # -- boundaries: start inclusive, end exclusive. 2026-12-01 is a Tuesday.
    (
        "before-start",
        "Europe/Berlin",
        WEEKDAYS,
        "2026-12-01T07:59:59+01:00",
        "down",
        "2026-12-01T08:00:00+01:00",
        "outside",
    ),
    ("at-start", "Europe/Berlin", WEEKDAYS, "2026-12-01T08:00:00+01:00", "up", "2026-12-01T20:00:00+01:00", "inside"),
    (
        "just-before-end",
        "Europe/Berlin",
        WEEKDAYS,
        "2026-12-01T19:59:59+01:00",
        "up",
        "2026-12-01T20:00:00+01:00",
        "inside",
    ),
    ("at-end", "Europe/Berlin", WEEKDAYS, "2026-12-01T20:00:00+01:00", "down", "2026-12-02T08:00:00+01:00", "outside"),
    (
        "friday-evening-to-monday",
        "Europe/Berlin",
        WEEKDAYS,
        "2026-12-04T20:00:00+01:00",
        "down",
        "2026-12-07T08:00:00+01:00",
        "outside",
    ),
    (
        "same-instant-other-offset",
        "Europe/Berlin",
        WEEKDAYS,
        "2026-12-01T07:00:00+00:00",
        "up",
        "2026-12-01T20:00:00+01:00",
        "inside",
    ),
    # -- overnight windows belong to the day they start on. 2026-12-04 is a Friday.
    (
        "overnight-friday-late",
        "Europe/Berlin",
        OVERNIGHT,
        "2026-12-04T23:00:00+01:00",
        "up",
        "2026-12-05T06:00:00+01:00",
        "inside",
    ),
    (
        "overnight-saturday-3am-from-friday",
        "Europe/Berlin",
        OVERNIGHT,
        "2026-12-05T03:00:00+01:00",
        "up",
        "2026-12-05T06:00:00+01:00",
        "inside",
    ),
    (
        "overnight-sunday-3am-saturday-not-in-mon-fri",
        "Europe/Berlin",
        OVERNIGHT,
        "2026-12-06T03:00:00+01:00",
        "down",
        "2026-12-07T22:00:00+01:00",
        "outside",
    ),
    (
        "overnight-monday-3am-sunday-not-in-mon-fri",
        "Europe/Berlin",
        OVERNIGHT,
        "2026-12-07T03:00:00+01:00",
        "down",
        "2026-12-07T22:00:00+01:00",
        "outside",
    ),
    (
        "overnight-tuesday-3am-from-monday",
        "Europe/Berlin",
        OVERNIGHT,
        "2026-12-08T03:00:00+01:00",
        "up",
        "2026-12-08T06:00:00+01:00",
        "inside",
    ),
    (
        "overnight-end-exclusive",
        "Europe/Berlin",
        OVERNIGHT,
        "2026-12-08T06:00:00+01:00",
        "down",
        "2026-12-08T22:00:00+01:00",
        "outside",
    ),
    # -- DST, Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET.
    # 01:00-04:00 on the spring day is 01:00+01:00 .. 04:00+02:00: two real hours.
    (
        "berlin-spring-in-gap-window",
        "Europe/Berlin",
        NIGHT_1_TO_4,
        "2026-03-29T00:30:00+00:00",
        "up",
        "2026-03-29T04:00:00+02:00",
        "inside",
    ),
    (
        "berlin-spring-after-window",
        "Europe/Berlin",
        NIGHT_1_TO_4,
        "2026-03-29T02:00:00+00:00",
        "down",
        "2026-03-30T01:00:00+02:00",
        "outside",
    ),
    # Weekday 08:00 stays 08:00 wall time after the change: Monday 2026-03-30 08:00 CEST is 06:00 UTC.
    (
        "berlin-spring-weekday-start-wall-time",
        "Europe/Berlin",
        WEEKDAYS,
        "2026-03-30T05:59:00+00:00",
        "down",
        "2026-03-30T08:00:00+02:00",
        "outside",
    ),
    # Autumn: 01:00+02:00 .. 04:00+01:00 is four real hours; 02:30 second occurrence (+01:00) is inside.
    (
        "berlin-autumn-repeated-hour",
        "Europe/Berlin",
        NIGHT_1_TO_4,
        "2026-10-25T02:30:00+01:00",
        "up",
        "2026-10-25T04:00:00+01:00",
        "inside",
    ),
    (
        "berlin-autumn-window-start",
        "Europe/Berlin",
        NIGHT_1_TO_4,
        "2026-10-24T22:59:00+00:00",
        "down",
        "2026-10-25T01:00:00+02:00",
        "outside",
    ),
    (
        "berlin-autumn-weekday-wall-time",
        "Europe/Berlin",
        WEEKDAYS,
        "2026-10-26T06:59:00+00:00",
        "down",
        "2026-10-26T08:00:00+01:00",
        "outside",
    ),
    # -- DST, America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
    # Saturday 22:00 EST .. Sunday 06:00 EDT is seven real hours: ends at 10:00 UTC.
    (
        "ny-spring-overnight-inside",
        "America/New_York",
        NIGHT_22_TO_6,
        "2026-03-08T09:59:00+00:00",
        "up",
        "2026-03-08T06:00:00-04:00",
        "inside",
    ),
    (
        "ny-spring-overnight-end",
        "America/New_York",
        NIGHT_22_TO_6,
        "2026-03-08T10:00:00+00:00",
        "down",
        "2026-03-08T22:00:00-04:00",
        "outside",
    ),
    # Saturday 22:00 EDT .. Sunday 06:00 EST is nine real hours: ends at 11:00 UTC.
    (
        "ny-autumn-overnight-inside",
        "America/New_York",
        NIGHT_22_TO_6,
        "2026-11-01T10:59:00+00:00",
        "up",
        "2026-11-01T06:00:00-05:00",
        "inside",
    ),
    (
        "ny-autumn-overnight-end",
        "America/New_York",
        NIGHT_22_TO_6,
        "2026-11-01T11:00:00+00:00",
        "down",
        "2026-11-01T22:00:00-05:00",
        "outside",
    ),
]


@pytest.mark.parametrize(
    ("timezone", "schedule", "instant", "state", "change", "why"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_windows(timezone: str, schedule: str, instant: str, state: str, change: str | None, why: str) -> None:
    policy, group = one_group(schedule, timezone=timezone)
    desired = view_of(policy).group(group.name).schedule.desired(at(instant))
    assert (desired.state, desired.next_change) == (state, at(change) if change else None)
    assert why in desired.reason


HOLIDAY_CASES = [
    # 2026-12-25 (Friday) is Christmas Day everywhere in Germany.
    ("national-holiday", "{country: DE}", "2026-12-25T12:00:00+01:00", "down", "Christmas"),
    # 2026-01-06 (Tuesday), Epiphany: a holiday in Bavaria (BY), not in Berlin (BE) nor nationally.
    ("subdivision-holiday", "{country: DE, subdivision: BY}", "2026-01-06T12:00:00+01:00", "down", "Epiphany"),
    (
        "not-a-holiday-in-that-subdivision",
        "{country: DE, subdivision: BE}",
        "2026-01-06T12:00:00+01:00",
        "up",
        "inside",
    ),
    ("not-a-holiday-without-subdivision", "{country: DE}", "2026-01-06T12:00:00+01:00", "up", "inside"),
    # An explicit date (2026-12-24, Thursday, not a public holiday in Germany).
    ("explicit-date", "{dates: ['2026-12-24']}", "2026-12-24T12:00:00+01:00", "down", "holiday 2026-12-24"),
    ("explicit-date-other-day", "{dates: ['2026-12-24']}", "2026-12-23T12:00:00+01:00", "up", "inside"),
]


@pytest.mark.parametrize(
    ("holidays", "instant", "state", "why"), [c[1:] for c in HOLIDAY_CASES], ids=[c[0] for c in HOLIDAY_CASES]
)
def test_holidays(holidays: str, instant: str, state: str, why: str) -> None:
    policy, group = one_group(f"{WEEKDAYS}\nholidays: {holidays}")
    desired = view_of(policy).group(group.name).schedule.desired(at(instant))
    assert desired.state == state
    assert why in desired.reason


def test_holiday_cancels_the_overnight_window_that_starts_on_it_only() -> None:
    policy, group = one_group(
        "workingHours:\n  - {days: daily, start: '22:00', end: '06:00'}\nholidays: {dates: ['2026-12-24']}"
    )
    # Wed 23rd 22:00 .. Thu 24th 06:00 belongs to the 23rd: up, even though the 24th is a holiday.
    assert view_of(policy).group(group.name).schedule.desired(at("2026-12-24T03:00:00+01:00")).state == "up"
    # The window starting on the 24th is cancelled, so Friday 03:00 is down.
    off = view_of(policy).group(group.name).schedule.desired(at("2026-12-25T03:00:00+01:00"))
    assert (off.state, off.next_change) == ("down", at("2026-12-25T22:00:00+01:00"))
    # The holiday also removes the change at 22:00 on the 24th: next change after 06:00 is the 25th 22:00.
    assert view_of(policy).group(group.name).schedule.desired(at("2026-12-24T06:00:00+01:00")).next_change == at(
        "2026-12-25T22:00:00+01:00"
    )


OVERRIDES = """
overrides:
  - {nodeGroup: g, state: up, until: "2026-12-02T23:00:00+01:00", reason: paper deadline}
  - {nodeGroup: g, state: down, until: "2026-12-10T12:00:00+01:00", reason: maintenance}
  - {nodeGroup: g, state: up, until: "2026-11-01T00:00:00+01:00", reason: long expired}
"""


@pytest.mark.parametrize(
    ("instant", "state", "change", "why"),
    [
        # Tue 2026-12-01 21:00: outside hours, but both the up and the down override are active; the later line
        # (down, maintenance) wins.
        ("2026-12-01T21:00:00+01:00", "down", "2026-12-10T12:00:00+01:00", "maintenance"),
        # Thu 2026-12-10 11:00: inside hours, the down override still holds; at 12:00 it expires and hours resume.
        ("2026-12-10T11:00:00+01:00", "down", "2026-12-10T12:00:00+01:00", "override until 2026-12-10T12:00:00+01:00"),
        # At the expiry instant (exclusive) the schedule is back.
        ("2026-12-10T12:00:00+01:00", "up", "2026-12-10T20:00:00+01:00", "inside"),
        # Saturday 2026-12-12: every override has expired: plain schedule.
        ("2026-12-12T12:00:00+01:00", "down", "2026-12-14T08:00:00+01:00", "outside"),
    ],
)
def test_overrides(instant: str, state: str, change: str, why: str) -> None:
    policy, group = one_group(WEEKDAYS, extra=OVERRIDES)
    desired = view_of(policy).group(group.name).schedule.desired(at(instant))
    assert (desired.state, desired.next_change) == (state, at(change))
    assert why in desired.reason


def test_up_override_outside_hours_then_expiry() -> None:
    text = 'overrides:\n  - {nodeGroup: g, state: up, until: "2026-12-02T23:00:00+01:00", reason: paper deadline}'
    policy, group = one_group(WEEKDAYS, extra=text)
    # Tue 2026-12-01 22:00 is outside hours, but the override keeps the group up until Wed 23:00.
    desired = view_of(policy).group(group.name).schedule.desired(at("2026-12-01T22:00:00+01:00"))
    assert (desired.state, desired.next_change) == ("up", at("2026-12-02T23:00:00+01:00"))
    assert "paper deadline" in desired.reason


def test_always_on_never_changes() -> None:
    policy, group = one_group(f"{WEEKDAYS}\nalwaysOn: true")
    desired = view_of(policy).group(group.name).schedule.desired(at("2026-12-05T03:00:00+01:00"))  # a Saturday night
    assert (desired.state, desired.reason, desired.next_change) == ("up", "alwaysOn", None)


def test_no_windows_is_always_down() -> None:
    policy, group = one_group("workingHours: []")
    desired = view_of(policy).group(group.name).schedule.desired(at("2026-12-01T12:00:00+01:00"))
    assert (desired.state, desired.next_change) == ("down", None)


@pytest.mark.parametrize(
    ("instant", "state", "change", "why"),
    [
        (
            "2026-12-01T07:29:00+01:00",
            "down",
            "2026-12-01T07:45:00+01:00",
            "outside",
        ),  # the calendar example of docs/output.md
        ("2026-12-01T07:44:59+01:00", "down", "2026-12-01T07:45:00+01:00", "outside"),
        ("2026-12-01T07:45:00+01:00", "up", "2026-12-01T20:00:00+01:00", "warming up"),  # warm-up starts
        ("2026-12-01T08:00:00+01:00", "up", "2026-12-01T20:00:00+01:00", "inside"),
        # Monday 07:45 after a weekend: warm-up crosses from Sunday night into the window.
        ("2026-12-06T23:59:00+01:00", "down", "2026-12-07T07:45:00+01:00", "outside"),
    ],
)
def test_warm_up(instant: str, state: str, change: str, why: str) -> None:
    policy, group = one_group(f"{WEEKDAYS}\nwarmUp: 15m")
    desired = view_of(policy).group(group.name).schedule.desired(at(instant))
    assert (desired.state, desired.next_change) == (state, at(change))
    assert why in desired.reason


def test_warm_up_does_not_wake_a_holiday() -> None:
    policy, group = one_group(f"{WEEKDAYS}\nwarmUp: 15m\nholidays: {{country: DE}}")
    # Fri 2026-12-25 07:50 would be warm-up, but Christmas cancels the window and so its warm-up.
    assert view_of(policy).group(group.name).schedule.desired(at("2026-12-25T07:50:00+01:00")).state == "down"


CRON = "workingHours:\n  - {cron: '0 22 * * 1-5', duration: 8h}"


@pytest.mark.parametrize(
    ("instant", "state", "change"),
    [
        # Fri 2026-12-04 22:00 EST starts the last weekday run, 8 h long.
        ("2026-12-04T21:59:00-05:00", "down", "2026-12-04T22:00:00-05:00"),
        ("2026-12-04T22:00:00-05:00", "up", "2026-12-05T06:00:00-05:00"),
        ("2026-12-05T05:59:00-05:00", "up", "2026-12-05T06:00:00-05:00"),
        # Saturday and Sunday evenings have no run: next is Monday 22:00.
        ("2026-12-05T23:00:00-05:00", "down", "2026-12-07T22:00:00-05:00"),
        # Across the spring change, 8 real hours: Fri 2026-03-06 22:00 EST is 03:00Z; ends 11:00Z.
        ("2026-03-07T05:59:00-05:00", "up", "2026-03-07T06:00:00-05:00"),
    ],
)
def test_cron_windows(instant: str, state: str, change: str) -> None:
    policy, group = one_group(CRON, timezone="America/New_York")
    desired = view_of(policy).group(group.name).schedule.desired(at(instant))
    assert (desired.state, desired.next_change) == (state, at(change))


def test_cron_window_duration_is_real_time_across_dst() -> None:
    # Sat 2026-03-07 22:00 EST daily run of 8 h ends at 07:00 EDT on Sunday (06:00 wall time + the lost hour).
    policy, group = one_group("workingHours:\n  - {cron: '0 22 * * *', duration: 8h}", timezone="America/New_York")
    desired = view_of(policy).group(group.name).schedule.desired(at("2026-03-08T06:30:00-04:00"))
    assert (desired.state, desired.next_change) == ("up", at("2026-03-08T07:00:00-04:00"))


def test_naive_instant_is_refused() -> None:
    policy, group = one_group(WEEKDAYS)
    with pytest.raises(ValueError, match="timezone-aware"):
        view_of(policy).group(group.name).schedule.desired(datetime(2026, 12, 1, 12))  # noqa: DTZ001 - the point of the test


# -- DST decisions (see docs/policy.md, Schedule semantics) ------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        "workingHours:\n  - {days: daily, start: '02:30', end: '06:00'}",
        "workingHours:\n  - {cron: '30 2 * * *', duration: 3h30m}",
    ],
)
def test_a_window_starting_in_the_spring_gap_opens_at_the_first_instant_after_it(schedule: str) -> None:
    # Berlin, Sun 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 never happens.
    policy, group = one_group(schedule)
    before = view_of(policy).group(group.name).schedule.desired(at("2026-03-29T01:59:00+01:00"))
    assert (before.state, before.next_change) == ("down", at("2026-03-29T03:00:00+02:00"))
    assert view_of(policy).group(group.name).schedule.desired(at("2026-03-29T03:00:00+02:00")).state == "up"


@pytest.mark.parametrize(
    ("timezone", "repeated"),
    [
        ("America/New_York", "2026-11-01T01:30:00-05:00"),  # 01:00-02:00 EDT, then again as EST
        ("Europe/Berlin", "2026-10-25T02:30:00+01:00"),  # 02:00-03:00 CEST, then again as CET
    ],
)
def test_an_hourly_cron_window_covers_the_repeated_autumn_hour(timezone: str, repeated: str) -> None:
    policy, group = one_group("workingHours:\n  - {cron: '0 * * * *', duration: 1h}", timezone=timezone)
    assert view_of(policy).group(group.name).schedule.desired(at(repeated)).state == "up"


def test_a_daily_cron_fires_once_in_the_repeated_hour() -> None:
    # 01:30 happens twice in New York on 2026-11-01; a daily window of 1 h runs once, from the first.
    policy, group = one_group("workingHours:\n  - {cron: '30 1 * * *', duration: 1h}", timezone="America/New_York")
    assert view_of(policy).group(group.name).schedule.desired(at("2026-11-01T01:45:00-04:00")).state == "up"
    assert view_of(policy).group(group.name).schedule.desired(at("2026-11-01T01:45:00-05:00")).state == "down"


def test_a_group_switches_a_default_warm_up_off_with_0s() -> None:
    def group_with(own: str) -> tuple[Policy, NodeGroup]:
        policy = policy_from(
            "defaults: {timezone: Europe/Berlin, warmUp: 30m,"
            " workingHours: [{days: Mon-Fri, start: '08:00', end: '20:00'}]}\n"
            f"nodeGroups:\n  - {{name: g, cloud: aws, aws: {{region: eu-west-1, cluster: c, nodegroup: n}}{own}}}\n"
        )
        return policy, policy.node_groups[0]

    # 07:50 is inside the default 30 min warm-up; a group's warmUp: 0s has none.
    for own, state in (("", "up"), (", warmUp: 0s", "down")):
        policy, group = group_with(own)
        assert view_of(policy).group(group.name).schedule.desired(at("2026-12-01T07:50:00+01:00")).state == state
