"""The history's pure parts: entries derived from a run's report, their ids (a write made twice is one entry), the
weeks past the retention, what the entries measure (a DST week included), prices, the report's renderings, and the
policy's ``history:`` / ``pricing:`` sections."""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobs import savings
from jobs.commands.report import window
from jobs.core.list_prices import LIST_PRICES
from jobs.envelope import ItemResult, ScopeResult, tally
from jobs.errors import Unavailable
from jobs.history import (
    Entry,
    decode,
    encode,
    entries_of,
    expired_weeks,
    iso_week,
    measure,
    merged,
    record,
    week_window,
    with_warning,
)
from jobs.policy_file import PolicyError, parse_policy
from jobs.scopes import cluster
from jobs.settings import SettingsError
from tests.fakes import RecordingLog

AS_OF = LIST_PRICES["p4d.24xlarge"].as_of  # the date of the AWS prices the train group is priced from

POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults:
      timezone: Europe/Berlin
      workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]
    nodeGroups:
      - name: train
        cloud: aws
        aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}
        gpusPerNode: 8
      - name: batch
        cloud: aws
        aws: {region: eu-west-1, cluster: ml-prod, nodegroup: batch}
    sweep:
      idlePods: {window: 2h, gracePeriod: 30m, action: delete}
    history:
      retention: 4w
    pricing:
      currency: EUR
      nodeGroups:
        train: {instanceType: p4d.24xlarge}
        batch: {gpuHour: 1.5}
    """)
BERLIN_EVENING = datetime.fromisoformat("2026-12-01T20:05:00+01:00")  # Tue, the window closed at 20:00


def policy(text: str = POLICY) -> Any:
    return parse_policy(text, "policy.yaml")


def result(items: list[ItemResult], at: datetime = BERLIN_EVENING, *, job: str = "nodegroups") -> ScopeResult:
    return ScopeResult(job, cluster("ml-prod"), at, False, "applied", items=tuple(items))


def down_item(desired: int = 3) -> ItemResult:
    before = {"min": 1, "desired": desired, "max": 8, "zones": 1}
    detail = {"direction": "down", "before": before, "after": {"desired": 0}, "why": "outside working hours"}
    return ItemResult("node group", "train", "applied", "outside working hours", write=True, detail=detail)


def quiet_item(desired: int, nodes: int | None) -> ItemResult:
    detail = {"size": {"min": 0, "desired": desired, "max": 8, "stopped": False}, "nodes": nodes}
    return ItemResult("node group", "train", "unchanged", "as the schedule wants", detail=detail)


def test_a_gke_pool_whose_size_reads_no_desired_count_is_gone_when_its_nodes_are() -> None:
    # A GKE pool's unchanged item carries no desired count (no live read): its nodes alone say it is gone.
    down = Entry(BERLIN_EVENING, "nodegroups", "ml-prod", "down", "train", 2, 16, 8)
    later = BERLIN_EVENING + timedelta(minutes=10)
    gke = {"min": 0, "desired": None, "max": 0, "autoscaling": False, "stopped": False, "zones": 2}
    item = ItemResult("node group", "train", "unchanged", "as the schedule wants", detail={"size": gke, "nodes": 0})
    (gone,) = entries_of(result([item], later), policy(), [down])
    assert (gone.kind, gone.subject, gone.at) == ("gone", "train", later)


def test_a_shutdown_records_the_nodes_and_gpus_before() -> None:
    (entry,) = entries_of(result([down_item(3)]), policy(), [])
    assert (entry.kind, entry.subject, entry.nodes, entry.gpus, entry.gpus_per_node) == ("down", "train", 3, 24, 8)
    assert entry.reason == "outside working hours"


# A Karpenter pool's before (``GroupConfig.to_json``): no bounds, "autoscaling" while its limits let it launch.
POOL: dict[str, Any] = {"min": 0, "desired": 3, "max": 0, "autoscaling": True, "zones": 1, "limits": {"cpu": "1000"}}


def autoscaled_down(before: dict[str, Any]) -> ItemResult:
    detail = {"direction": "down", "before": before, "after": {"desired": 0}, "why": "outside working hours"}
    return ItemResult("node group", "train", "applied", "outside working hours", write=True, detail=detail)


@pytest.mark.parametrize(
    ("before", "floor", "would_run"),
    [
        # No autoscaler: the nodes before stay all night without the shutdown.
        ({"min": 1, "desired": 3, "max": 8, "autoscaling": False, "zones": 1}, None, (3, 24)),
        # EKS under the Cluster Autoscaler, min 0: it removes the empty nodes by itself; nothing was avoided.
        ({"min": 0, "desired": 3, "max": 8, "autoscaling": True, "zones": 1}, 0, (0, 0)),
        # A GKE pool in 2 zones, 1..3 per zone, that reads no live size: its autoscaler keeps 2 nodes.
        ({"min": 1, "desired": None, "max": 3, "autoscaling": True, "zones": 2}, 2, (2, 16)),
        # An autoscaler already at its floor.
        ({"min": 2, "desired": 2, "max": 6, "autoscaling": True, "zones": 1}, 2, (2, 16)),
        # A Karpenter pool that consolidates empty nodes: Karpenter would have removed its 3 idle claims by itself.
        ({**POOL, "consolidates": True}, 0, (0, 0)),
        # One with consolidateAfter Never keeps them: its claims' GPUs ran, whatever its limits let it launch.
        ({**POOL, "consolidates": False}, None, (3, 24)),
        # A record written before consolidation was read: its claims, as before.
        (POOL, None, (3, 24)),
    ],
)
def test_what_a_shutdown_avoids_is_no_more_than_the_autoscalers_floor(
    before: dict[str, Any], floor: int | None, would_run: tuple[int, int]
) -> None:
    (down,) = entries_of(result([autoscaled_down(before)]), policy(), [])
    assert (down.floor, down.would_run()) == (floor, would_run)
    assert Entry.from_json(json.loads(json.dumps(down.to_json()))) == down
    gone, up = entry("2026-12-01T20:15:00+01:00", "gone"), entry("2026-12-02T07:45:00+01:00", "up")
    (group,) = measure([down, gone, up], *week_window("2026-W49", "Europe/Berlin")).groups
    assert group.avoided_gpu_hours == 11.5 * would_run[1]
    # The report marks a figure the floor capped (not one already at its floor, nor one without a floor).
    capped = floor is not None and (down.nodes is None or floor < down.nodes)
    assert group.floor == (floor if capped else None)


def test_nodes_gone_is_recorded_by_the_first_run_that_sees_none() -> None:
    down = Entry(BERLIN_EVENING, "nodegroups", "ml-prod", "down", "train", 3, 24, 8)
    later = BERLIN_EVENING + timedelta(minutes=10)
    still_there = entries_of(result([quiet_item(0, 2)], later), policy(), [down])
    (gone,) = entries_of(result([quiet_item(0, 0)], later), policy(), [down])
    after_gone = entries_of(result([quiet_item(0, 0)], later), policy(), [down, gone])
    unread = entries_of(result([quiet_item(0, None)], later), policy(), [down])
    assert (still_there, gone.kind, after_gone, unread) == ([], "gone", [], [])


def test_a_postponed_shutdown_is_one_entry_per_keep_up_and_ends_in_working_hours() -> None:
    busy = ItemResult("node group", "train", "skipped", "shutdown postponed until 2026-12-01T22:00: GPU pods running")
    (first,) = entries_of(result([busy]), policy(), [])
    again = entries_of(result([busy], BERLIN_EVENING + timedelta(minutes=10)), policy(), [first])
    morning = datetime.fromisoformat("2026-12-02T08:00:00+01:00")
    (kept,) = entries_of(result([quiet_item(3, 3)], morning), policy(), [first])
    assert (first.kind, first.reason, again, kept.kind) == ("postponed", busy.reason, [], "kept")


def test_the_sweeps_pods_and_instances_and_wakes() -> None:
    pod = ItemResult(
        "pod",
        "team-a/nb-0",
        "applied",
        "deleted",
        detail={"gpus": 2, "state": "acted", "action": "delete", "idleReason": "utilization"},
    )
    warned = ItemResult("pod", "team-a/nb-1", "applied", "warned", detail={"gpus": 1, "state": "warned"})
    # As the nodegroups job reports a wake (one item per Pending pod that woke its group) and a notice.
    woke = {"nodeGroup": "train", "woke": True, "why": "a pending pod asked for a GPU"}
    wakes = [ItemResult("wake", f"team-a/job-{n}", "applied", "woke train", detail=woke) for n in range(2)]
    notice = ItemResult("wake", "team-b/x", "applied", "no group fits", detail={"nodeGroup": None, "woke": False})
    entries = entries_of(result([pod, warned, *wakes, notice], job="sweep"), policy(), [])
    assert [(e.kind, e.subject, e.gpus, e.idle_gpu_hours) for e in entries] == [
        ("pod", "team-a/nb-0", 2, 5.0),  # 2 GPUs x (2h window + 30m grace)
        ("wake", "train", None, None),
        ("wake", "train", None, None),  # the same entry (one id): kept once
    ]
    assert len(merged([], entries)) == 2


def test_a_dry_run_or_a_refused_scope_records_nothing() -> None:
    dry = ScopeResult("nodegroups", cluster("ml-prod"), BERLIN_EVENING, True, "planned", items=(down_item(),))
    refused = ScopeResult("nodegroups", cluster("ml-prod"), BERLIN_EVENING, False, "refused", items=(down_item(),))
    assert entries_of(dry, policy(), []) == entries_of(refused, policy(), []) == []


def test_an_entry_written_twice_is_one_entry_and_survives_its_encoding() -> None:
    (entry,) = entries_of(result([down_item()]), policy(), [])
    (again,) = entries_of(result([down_item()]), policy(), [])
    assert entry.id == again.id  # the same run's entry: a resend after a lost answer is recognised
    assert merged([entry], [again]) == [entry]
    decoded, problems = decode(encode([entry]) + "not json\n")
    assert decoded == [entry]
    assert problems == ["line 2: Expecting value: line 1 column 1 (char 0)"]


def test_weeks_past_the_retention_expire() -> None:
    now = datetime.fromisoformat("2026-12-06T12:00:00+00:00")  # Sunday of 2026-W49
    weeks = ["2026-W44", "2026-W45", "2026-W46", "2026-W49"]
    assert iso_week(now) == "2026-W49"
    assert expired_weeks(weeks, now, timedelta(weeks=4)) == ["2026-W44"]  # 4 weeks back is W45: kept


def entry(at: str, kind: Any, **extra: Any) -> Entry:
    return Entry(datetime.fromisoformat(at), "nodegroups", "ml-prod", kind, "train", **extra)


def test_avoided_gpu_hours_are_measured_from_nodes_gone_to_back_up() -> None:
    entries = [
        entry("2026-12-01T20:05:00+01:00", "down", nodes=3, gpus=24, gpus_per_node=8),
        entry("2026-12-01T20:15:00+01:00", "gone"),  # the first run that saw no node
        entry("2026-12-02T07:45:00+01:00", "up"),
    ]
    start, end = week_window("2026-W49", "Europe/Berlin")
    (group,) = measure(entries, start, end).groups
    assert (group.gone_hours, group.avoided_node_hours, group.avoided_gpu_hours) == (11.5, 34.5, 276.0)


def test_nodes_seen_gone_at_the_instant_of_the_shutdown_count_from_it() -> None:
    # A second run at the same --at (the demo's "evening again"): its "gone" shares the down's instant.
    at = "2026-12-01T20:05:00+01:00"
    entries = [entry("2026-12-02T07:45:00+01:00", "up"), entry(at, "gone"), entry(at, "down", nodes=1, gpus=8)]
    start, end = week_window("2026-W49", "Europe/Berlin")
    (group,) = measure(entries, start, end).groups
    assert (group.gone_hours, group.avoided_gpu_hours) == (11 + 40 / 60, (11 + 40 / 60) * 8)


def test_a_week_clips_a_weekend_and_a_dst_week_has_167_hours() -> None:
    # Down from the Friday before W13 of 2026 to the Monday after: all of the week, whose Sunday (29 March)
    # loses an hour in Berlin.
    entries = [
        entry("2026-03-20T20:00:00+01:00", "down", nodes=1, gpus=8, gpus_per_node=8),
        entry("2026-03-20T20:10:00+01:00", "gone"),
        entry("2026-03-30T07:45:00+02:00", "up"),
    ]
    start, end = week_window("2026-W13", "Europe/Berlin")
    (group,) = measure(entries, start, end).groups
    assert (end - start, group.gone_hours, group.avoided_gpu_hours) == (timedelta(days=7), 167.0, 167.0 * 8)


def test_a_night_still_open_whose_shutdown_knew_no_size_takes_the_last_size_restored() -> None:
    # Down on Friday without a size (a GKE pool reads none before it goes down), still down when the window ends: the size Friday's morning
    # brought back is what the weekend took away, not an unknown that hides the whole group's figure.
    entries = [
        entry("2026-12-04T07:30:00+01:00", "up", nodes=2, gpus=16, gpus_per_node=8),
        entry("2026-12-04T20:00:00+01:00", "down"),
        entry("2026-12-04T20:10:00+01:00", "gone"),
    ]
    start, end = week_window("2026-W49", "Europe/Berlin")
    (group,) = measure(entries, start, end).groups
    hours = (end - datetime.fromisoformat("2026-12-04T20:10:00+01:00")) / timedelta(hours=1)
    assert (group.gone_hours, group.avoided_gpu_hours) == (hours, hours * 16)


def test_a_group_still_down_counts_until_the_window_ends_and_unknown_gpus_are_not_zero() -> None:
    entries = [entry("2026-12-04T20:00:00+01:00", "down", nodes=2), entry("2026-12-04T20:10:00+01:00", "gone")]
    end = datetime.fromisoformat("2026-12-05T08:10:00+01:00")
    (group,) = measure(entries, datetime.fromisoformat("2026-12-04T00:00:00+01:00"), end).groups
    assert (group.gone_hours, group.avoided_node_hours, group.avoided_gpu_hours) == (12.0, 24.0, None)


def test_kept_up_hours_for_busy_work_and_wakes() -> None:
    entries = [
        entry("2026-12-01T20:05:00+01:00", "postponed", reason="shutdown postponed"),
        entry("2026-12-01T22:05:00+01:00", "down", nodes=1, gpus=8),
        entry("2026-12-01T22:15:00+01:00", "gone"),
        entry("2026-12-01T23:00:00+01:00", "wake"),
        entry("2026-12-02T01:00:00+01:00", "down", nodes=1, gpus=8),
    ]
    start, end = week_window("2026-W49", "Europe/Berlin")
    (group,) = measure(entries, start, end).groups
    # Kept up 20:05-22:05 for busy work; gone 22:15-23:00, then woken and kept up until it went down at 01:00 (no
    # run saw its nodes gone since).
    assert (group.busy_hours, group.wake_hours, group.gone_hours) == (2.0, 2.0, 0.75)


def test_a_night_a_wake_interrupted_still_avoids_the_size_it_began_with() -> None:
    # 3 nodes down at 20:00; a wake brings 1 back at 23:00 for 2 hours; that 1 goes down at 01:00: from then to the
    # morning the night avoids the 3 nodes always-on would have run, not the 1 the wake brought. During the wake the
    # 2 nodes it did not bring are avoided too (not "gone": the group's nodes were not all gone).
    # The wake's run records both the restore ("up", its 1 node) and the "wake", at the same instant.
    woke = "2026-12-01T23:00:00+01:00"
    entries = [
        entry("2026-12-01T20:00:00+01:00", "down", nodes=3, gpus=24),
        entry("2026-12-01T20:10:00+01:00", "gone"),
        entry(woke, "up", nodes=1, gpus=8, reason="wake: week/needs-gpu Pending out of hours"),
        entry(woke, "wake", reason="wake: week/needs-gpu Pending out of hours"),
        entry("2026-12-02T01:00:00+01:00", "down", nodes=1, gpus=8),
        entry("2026-12-02T01:10:00+01:00", "gone"),
        entry("2026-12-02T07:30:00+01:00", "up", nodes=3, gpus=24),
    ]
    start, end = week_window("2026-W49", "Europe/Berlin")
    (group,) = measure(entries, start, end).groups
    before_wake, after_wake = 2 + 50 / 60, 6 + 20 / 60
    assert group.gone_hours == pytest.approx(before_wake + after_wake)
    assert group.avoided_gpu_hours == pytest.approx((before_wake + after_wake) * 24 + 2 * 2 * 8)
    assert group.avoided_node_hours == pytest.approx((before_wake + after_wake) * 3 + 2 * 2)


def test_a_gke_night_a_wake_interrupted_takes_the_size_the_morning_restored() -> None:
    # A GKE pool's shutdown knows no size; the night after its wake still avoids what the morning had brought back.
    woke = "2026-12-01T23:00:00+01:00"
    entries = [
        entry("2026-12-01T08:20:00+01:00", "up", nodes=3, gpus=3),
        entry("2026-12-01T20:30:00+01:00", "down"),
        entry("2026-12-01T20:40:00+01:00", "gone"),
        entry(woke, "up", nodes=1, gpus=1),
        entry(woke, "wake"),
        entry("2026-12-02T01:00:00+01:00", "down", nodes=1, gpus=1),
        entry("2026-12-02T01:10:00+01:00", "gone"),
        entry("2026-12-02T08:20:00+01:00", "up", nodes=3, gpus=3),
    ]
    start, end = week_window("2026-W49", "Europe/Berlin")
    (group,) = measure(entries, start, end).groups
    # Gone 20:40-23:00 and 01:10-08:20 at 3 nodes; 23:00-01:00 the wake's 1 node up, the other 2 avoided.
    assert group.avoided_gpu_hours == pytest.approx((2 + 20 / 60 + 7 + 10 / 60) * 3 + 2 * 2)


def test_a_wake_of_as_many_nodes_as_the_autoscaler_keeps_avoids_nothing_more() -> None:
    # 3 nodes down, but the group's autoscaler keeps 1 once empty: the night avoids 1 node; a wake of 1 node leaves
    # nothing of it down. And a wake whose restore says no size counts nothing (never guessed).
    woke = "2026-12-01T23:00:00+01:00"
    night = [
        entry("2026-12-01T20:00:00+01:00", "down", nodes=3, gpus=3, gpus_per_node=1, floor=1),
        entry("2026-12-01T20:10:00+01:00", "gone"),
        entry(woke, "wake"),
        entry("2026-12-02T01:00:00+01:00", "down", nodes=1, gpus=1, gpus_per_node=1),
    ]
    start, end = week_window("2026-W49", "Europe/Berlin")
    (floored,) = measure([*night, entry(woke, "up", nodes=1, gpus=1)], start, end).groups
    (unsized,) = measure([*night, entry(woke, "up")], start, end).groups
    assert floored.avoided_gpu_hours == pytest.approx(2 + 50 / 60)  # 20:10-23:00 at 1 node, then none
    assert unsized.avoided_gpu_hours == floored.avoided_gpu_hours


def test_prices_from_the_policy_and_from_the_dated_list() -> None:
    p = policy()
    batch = savings.price_of(p, "batch")
    train = savings.price_of(p, "train")
    assert batch == savings.Price(1.5, "EUR", "policy pricing.nodeGroups.batch.gpuHour")
    assert train is not None
    assert (train.currency, train.gpu_hour) == ("USD", LIST_PRICES["p4d.24xlarge"].hourly / 8)
    assert AS_OF in train.source
    assert "AWS Price List API" in train.source
    negotiated = policy(POLICY + "  instanceTypes: {p4d.24xlarge: 16.0}\n")
    assert savings.price_of(negotiated, "train") == savings.Price(
        2.0, "EUR", "policy pricing.instanceTypes.p4d.24xlarge"
    )
    assert savings.price_of(p, "unpriced") is None


def report() -> savings.SavingsReport:
    entries = [
        entry("2026-12-01T20:05:00+01:00", "down", nodes=3, gpus=24, gpus_per_node=8),
        entry("2026-12-01T20:15:00+01:00", "gone"),
        entry("2026-12-02T07:45:00+01:00", "up"),
    ]
    start, end = week_window("2026-W49", "Europe/Berlin")
    read = [savings.ScopeRead("ml-prod"), savings.ScopeRead("research", "its history cannot be read (503)")]
    return savings.build("2026-W49", start, end, measure(entries, start, end), policy(), read)


def test_the_json_is_one_line_with_money_and_its_source() -> None:
    text = savings.to_json(report())
    doc = json.loads(text)
    money = round(276.0 * LIST_PRICES["p4d.24xlarge"].hourly / 8, 2)
    assert len(text.splitlines()) == 1
    assert doc["total"]["avoidedGpuHours"] == 276.0
    assert doc["total"]["money"] == {"USD": money}
    assert doc["groups"][0]["price"]["source"].startswith("aws list price p4d.24xlarge as of " + AS_OF)
    assert doc["scopes"][1] == {"name": "research", "state": "failed", "reason": "its history cannot be read (503)"}


def test_the_text_and_markdown_print_the_source_with_every_figure() -> None:
    text, markdown = savings.to_text(report()), savings.to_markdown(report())
    assert "research: FAILED: its history cannot be read (503)" in text
    assert "276.0" in text
    assert "USD [1]" in text
    assert f"[1] aws list price p4d.24xlarge as of {AS_OF}" in text
    assert markdown.startswith("### GPU savings 2026-W49\n")
    assert "| ml-prod | train | 11.5 | 276.0 | 0.0 | 0.0 |" in markdown
    assert f"[1] aws list price p4d.24xlarge as of {AS_OF}" in markdown


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ("history: {retention: 3d}", 'policy.yaml:6: history.retention: "3d" is shorter than a week'),
        ("pricing: {currency: euro}", 'policy.yaml:6: pricing.currency: "euro": String should match pattern'),
        (
            "pricing: {nodeGroups: {train: {gpuHour: 2, instanceType: p4d.24xlarge}}}",
            "policy.yaml:6: pricing.nodeGroups.train: give exactly one of gpuHour and instanceType",
        ),
        (
            "pricing: {nodeGroups: {tran: {gpuHour: 2}}}",
            'policy.yaml:6: pricing.nodeGroups.tran: unknown node group "tran"',
        ),
    ],
)
def test_bad_history_and_pricing_sections_name_file_line_and_path(section: str, problem: str) -> None:
    text = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\nnodeGroups: []\ndefaults:\n  timezone: UTC\n" + section + "\n"
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, "policy.yaml")
    assert any(str(p).startswith(problem) for p in raised.value.problems), raised.value.problems


class BrokenStore:
    """A history whose writes fail as an API server's 5xx would (the ``HistoryStore`` port)."""

    def __init__(self) -> None:
        self.appended: list[Entry] = []

    def read(self) -> list[Entry]:
        return []

    def append(self, entries: Sequence[Entry]) -> None:
        raise Unavailable("update configmaps: 503 the server is shutting down")

    def prune(self, now: datetime, retention: timedelta) -> list[str]:
        raise AssertionError("not reached: nothing is pruned after a failed append")


def test_a_failed_history_write_is_a_warning_of_the_scope_and_changes_no_item() -> None:
    log = RecordingLog()
    scope_result = result([down_item()])
    recorded = record(scope_result, policy(), BrokenStore(), BERLIN_EVENING, log)
    warned = with_warning(scope_result, recorded)
    assert warned.warnings == (
        "history not written (update configmaps: 503 the server is shutting down): the report will miss this run's"
        " entries",
    )
    assert warned.items == scope_result.items
    assert tally(warned) == tally(scope_result)
    assert log.names == ["history.unwritten"]


def test_the_reports_window_a_week_so_far_the_last_days_never_the_future() -> None:
    now = datetime.fromisoformat("2026-12-02T12:00:00+01:00")
    week = argparse.Namespace(week="2026-W49", since=None)
    assert window(week, policy(), now) == ("2026-W49", datetime.fromisoformat("2026-11-30T00:00:00+01:00"), now)
    since = argparse.Namespace(week=None, since="36h")
    assert window(since, policy(), now) == ("since 36h", now - timedelta(hours=36), now)
    for bad in (argparse.Namespace(week="2026-W50", since=None), argparse.Namespace(week="2026-49", since=None)):
        with pytest.raises(SettingsError):
            window(bad, policy(), now)
    with pytest.raises(SettingsError, match=r"use e\.g\. 36h, 7d or 2w"):
        window(argparse.Namespace(week=None, since="7 days"), policy(), now)
