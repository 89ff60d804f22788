"""The policy diff a pull request shows: every section, only what changes, the same figures whenever it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jobs import errors
from jobs.commands.validate import github_annotation
from jobs.core.calendar import build_calendar, compare
from jobs.core.cloud_quotas import GroupSize, Shape
from jobs.core.policy import NodeGroup, Policy
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.core.policy_diff import (
    MISSING,
    Conversion,
    FieldChange,
    NamespaceChange,
    Week,
    diff_policies,
    group_hours,
    namespace_changes,
    quota_target_changes,
    reference_week,
    structural_diff,
)
from jobs.core.quotas import NamespaceInfo
from jobs.diff import cloud, report
from jobs.policy_file import Problem, parse_policy
from tests.fakes import RecordingLog
from tests.unit.policies import policy_from

EXAMPLE = Path("gitops/policy.yaml").read_text()
BERLIN = ZoneInfo("Europe/Berlin")


def example(*replacements: tuple[str, str]) -> Policy:
    text = EXAMPLE
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return parse_policy(text, "policy.yaml")


BASE = example()
QUOTA_ONLY = example(("default: {nvidia.com/gpu: 0}", "default: {nvidia.com/gpu: 4}"))
# notebooks-t4 (Mon-Fri 07:30-19:30 London, no up size) two hours longer a day.
LONGER = ('start: "07:30", end: "19:30"', 'start: "07:30", end: "21:30"')
LONGER_NOTEBOOKS = example(LONGER)
# training-a100: a fifth node of 8 GPUs while up.
WIDER = ("gpusPerNode: 8\n    up: {min: 0, desired: 4, max: 8}", "gpusPerNode: 8\n    up: {min: 0, desired: 5, max: 8}")
HELD = 'until: "2026-12-02T23:00:00+01:00"'
OVERRIDE = "  - {nodeGroup: training-a100, state: up,"


def ref(policy: Policy = BASE) -> Week:
    return reference_week(policy)


def test_a_quota_only_change_names_the_quota_and_no_node_group() -> None:
    diff = diff_policies(BASE, QUOTA_ONLY, ref())
    assert diff.schedules == ()
    assert diff.node_group_fields == ()
    assert diff.sections == ()
    assert [(q.subject, q.before, q.after) for q in diff.quotas] == [
        ("default (every namespace no rule matches)", "nvidia.com/gpu: 0", "nvidia.com/gpu: 4")
    ]
    markdown = report.to_markdown(diff, "base.yaml", "policy.yaml")
    assert "| default (every namespace no rule matches) | nvidia.com/gpu: 0 | nvidia.com/gpu: 4 |" in markdown
    assert "#### Node groups: 0 of 8 change their hours" in markdown
    assert not any(g.name in markdown for g in BASE.node_groups)  # an unchanged group does not appear


def test_only_the_changed_group_appears_with_units_and_fleet_totals() -> None:
    diff = diff_policies(BASE, LONGER_NOTEBOOKS, ref())
    assert [c.name for c in diff.schedules] == ["notebooks-t4"]
    change = diff.schedules[0]
    assert change.up_delta == 10  # 2 h on 5 weekdays
    assert change.gpu_delta is None  # no up size: GPU-hours unknown, not 0
    assert diff.totals.up_delta == 10
    assert diff.totals.groups == (8, 8)
    # The total is the fleet's, unchanged groups included; the GPU total counts the groups with an up size.
    assert change.before is not None
    assert diff.totals.up_hours[0] > change.before.up_hours
    assert diff.totals.without_size == (5, 5)
    markdown = report.to_markdown(diff)
    rows = [line for line in markdown.splitlines() if line.startswith("| `") and "nodeGroups[" not in line]
    assert rows == ["| `notebooks-t4` | 61.25 | 71.25 | +10 | n/a (no up size) | n/a (no up size) | n/a | notebooks |"]
    assert "| node group | before h/week | after h/week | change | GPU-h/week before |" in markdown
    assert "| **all 8 groups** |" in markdown
    assert "GPU-h = up-hours x up.desired x gpusPerNode" in markdown
    # The schedule's field change is listed too: the reviewer sees what was edited and what it does.
    assert [c.path for c in diff.node_group_fields] == ["nodeGroups[notebooks-t4].workingHours[0].end"]


def test_gpu_hours_are_up_hours_times_the_gpus_while_up() -> None:
    # training-a100: 8 GPUs per node, up.desired 4 -> 32 GPUs while up. A fifth node adds 8 GPUs for every up-hour.
    diff = diff_policies(BASE, example(WIDER), ref())
    (change,) = diff.schedules
    assert change.name == "training-a100"
    assert change.up_delta == 0
    assert change.before is not None
    assert change.after is not None
    assert (change.before.gpus_up, change.after.gpus_up) == (32, 40)
    assert change.gpu_delta == pytest.approx(change.before.up_hours * 8)
    assert diff.totals.gpu_delta == change.gpu_delta


def test_the_reference_week_is_fixed_and_at_picks_an_iso_week() -> None:
    week = reference_week(BASE)
    assert week.start == datetime(2026, 6, 8, tzinfo=BERLIN)  # Monday of 2026-W24
    assert not week.with_overrides
    monday = reference_week(BASE, datetime(2026, 12, 7, 0, 0, tzinfo=BERLIN))
    sunday = reference_week(BASE, datetime(2026, 12, 13, 23, 59, tzinfo=BERLIN))
    assert monday == sunday
    assert monday.start == datetime(2026, 12, 7, tzinfo=BERLIN)
    # The same pair gives the same figures at any instant of that week: nothing depends on when CI runs.
    assert diff_policies(BASE, LONGER_NOTEBOOKS, monday) == diff_policies(BASE, LONGER_NOTEBOOKS, sunday)


@pytest.mark.parametrize(
    "until",
    [
        "2026-06-10T12:00:00+02:00",  # ends inside the reference week
        "2026-12-02T23:00:00+01:00",  # after it (the example's override)
        "2026-01-01T00:00:00+01:00",  # long expired
    ],
)
def test_an_override_does_not_move_the_reference_week_figures(until: str) -> None:
    # An override has no start, so the reference week counts the regular schedule; the override itself is listed.
    no_override = ((OVERRIDE, "  # - {nodeGroup: training-a100, state: up,"), ("overrides:\n", "overrides: []\n"))
    plain = diff_policies(example(*no_override), example(*no_override, LONGER, WIDER), ref())
    held = diff_policies(
        example((HELD, f'until: "{until}"')), example((HELD, f'until: "{until}"'), LONGER, WIDER), ref()
    )
    assert [c.name for c in held.schedules] == ["training-a100", "notebooks-t4"]
    assert plain.schedules == held.schedules
    assert plain.totals == held.totals
    added = diff_policies(example(*no_override), example((HELD, f'until: "{until}"')), ref())
    assert added.schedules == ()
    assert [(s.name, [c.kind for c in s.changes]) for s in added.sections] == [("overrides", ["added"])]


def test_a_calendars_two_tables_agree_while_an_override_is_active() -> None:
    # Tuesday noon: training-a100 is held up by the override until Wednesday 23:00; its calendar row and its
    # comparison row count the same 7 days with the override (they were 70.33 and 75.98).
    at = datetime(2026, 12, 1, 12, 0, tzinfo=BERLIN)
    after = example(WIDER)
    table = {g.group.name: g.up_hours_per_week for g in build_calendar(after, at).groups}
    (change,) = compare(BASE, after, at).schedules
    assert change.after is not None
    assert change.before is not None
    assert change.after.up_hours == change.before.up_hours == table["training-a100"]
    assert table["training-a100"] > group_hours(after, after.group("training-a100"), Week(at)).up_hours


def test_a_rule_limit_change_is_one_line_naming_the_rule() -> None:
    after = example(("      hard: {nvidia.com/gpu: 16}", "      hard: {nvidia.com/gpu: 24}"))
    (change,) = diff_policies(BASE, after, ref()).quotas
    assert change.subject == "rules: namespaces ml-research; clusters research"
    assert change.before == "rules[1]: nvidia.com/gpu: 16; outside Mon-Fri 08:00-20:00: nvidia.com/gpu: 32"
    assert change.after == "rules[1]: nvidia.com/gpu: 24; outside Mon-Fri 08:00-20:00: nvidia.com/gpu: 32"


def quotas(rules: str, default: str = "{nvidia.com/gpu: 0}") -> Policy:
    clusters = "clusters:\n  - {name: x, cloud: aws}\n  - {name: y, cloud: gcp}\n"
    return policy_from(f"{clusters}namespaceQuotas:\n  default: {default}\n  rules:\n{rules}")


A = "    - {namespaces: [a], hard: {nvidia.com/gpu: 1}}\n"
B = "    - {namespaces: [b], hard: {nvidia.com/gpu: 2}}\n"
C = "    - {namespaces: [c], clusters: [x], hard: {nvidia.com/gpu: 3}}\n"


def test_a_rule_added_above_others_is_the_only_change() -> None:
    diff = diff_policies(quotas(A + B), quotas(C + A + B), ref())
    assert [(q.subject, q.before, q.after) for q in diff.quotas] == [
        ("rules: namespaces c; clusters x", None, "rules[0]: nvidia.com/gpu: 3")
    ]


def test_swapped_rules_are_moves_since_the_first_match_wins() -> None:
    diff = diff_policies(quotas(A + B), quotas(B + A), ref())
    assert sorted((q.before, q.after) for q in diff.quotas) == [
        ("rules[0]: nvidia.com/gpu: 1", "rules[1]: nvidia.com/gpu: 1"),
        ("rules[1]: nvidia.com/gpu: 2", "rules[0]: nvidia.com/gpu: 2"),
    ]


def test_equal_quantities_are_no_change_and_a_cluster_keeps_its_rules() -> None:
    assert diff_policies(
        quotas(A, "{nvidia.com/gpu: 4, cpu: 2}"), quotas(A, "{nvidia.com/gpu: 4, cpu: 2000m}"), ref()
    ).empty
    only_y = diff_policies(quotas(A), quotas(A + C), ref(), cluster="y")
    assert only_y.quotas == ()  # rule c applies in cluster x only
    assert len(diff_policies(quotas(A), quotas(A + C), ref(), cluster="x").quotas) == 1


def test_comments_and_layout_only_is_no_change() -> None:
    reformatted = example(
        ("# Namespace GPU quotas", "# (reworded) Namespace GPU quotas"), ("warmUp: 15m", "warmUp: 15m   # same")
    )
    diff = diff_policies(BASE, reformatted, ref())
    assert diff.empty
    assert "No change" in report.to_markdown(diff)


def test_a_new_and_a_removed_group() -> None:
    after = example(("  - name: vision-t4\n", "  - name: vision-t4-new\n"))
    diff = diff_policies(BASE, after, ref())
    names = {c.name: report.label(c) for c in diff.schedules}
    assert names == {"vision-t4": " (removed)", "vision-t4-new": " (new)"}
    assert diff.totals.groups == (8, 8)
    assert {c.path: c.kind for c in diff.node_group_fields} == {
        "nodeGroups[vision-t4]": "removed",
        "nodeGroups[vision-t4-new]": "added",
    }


class FuturePolicy(Policy):
    """The policy with a section the diff has no code for (as ``cloudQuotas`` or ``sweep`` will be)."""

    sweep: dict[str, Any] | None = None


def test_a_section_the_diff_does_not_know_appears_as_a_structural_diff() -> None:
    data = Policy.model_dump(BASE, by_alias=True, exclude_none=True)
    before = FuturePolicy.model_validate({**data, "sweep": {"idleAfter": "2h", "actions": [{"name": "warn"}]}})
    after = FuturePolicy.model_validate(
        {**data, "sweep": {"idleAfter": "4h", "actions": [{"name": "warn"}, {"name": "scale-down"}]}}
    )
    diff = diff_policies(before, after, ref())
    (section,) = diff.sections
    assert section.name == "sweep"
    assert [(c.path, c.kind) for c in section.changes] == [
        ("sweep.idleAfter", "changed"),
        ("sweep.actions[scale-down]", "added"),
    ]
    assert "`sweep.idleAfter` | 2h | 4h |" in report.to_markdown(diff)
    doc = json.loads(report.to_json(diff))
    assert doc["sections"]["sweep"][0] == {"path": "sweep.idleAfter", "kind": "changed", "before": "2h", "after": "4h"}


def test_structural_diff_pairs_list_items_by_name_else_by_position() -> None:
    before = {"clusters": [{"name": "a", "ctx": "1"}, {"name": "b", "ctx": "2"}], "days": ["Mon", "Tue"]}
    after = {"clusters": [{"name": "b", "ctx": "3"}, {"name": "a", "ctx": "1"}], "days": ["Mon"], "new": 1}
    assert list(structural_diff(before, after, "x")) == [
        FieldChange("x.clusters[b].ctx", "2", "3"),  # a reorder alone is no change
        FieldChange("x.days", ["Mon", "Tue"], ["Mon"]),  # a list of values is one value
        FieldChange("x.new", MISSING, 1),
    ]
    # Items without a unique key are compared by position.
    assert list(structural_diff([{"g": 1}, {"g": 1}], [{"g": 1}], "o")) == [FieldChange("o[1]", {"g": 1}, MISSING)]


def test_the_json_is_one_line_with_every_section() -> None:
    text = report.to_json(diff_policies(BASE, QUOTA_ONLY, ref()), "a", "b")
    assert text.count("\n") == 1
    doc = json.loads(text)
    assert doc["week"] == {
        "start": "2026-06-08T00:00:00+02:00",
        "end": "2026-06-15T00:00:00+02:00",
        "overridesCounted": False,
    }
    assert doc["nodeGroups"] == []
    assert doc["namespaceQuotas"][0]["kind"] == "changed"


@pytest.mark.parametrize(
    ("problem", "line"),
    [
        (
            Problem("gitops/policy.yaml", 42, "nodeGroups[3].workingHours[0].days", '"Mon-Fry" is not a day range'),
            "::error file=gitops/policy.yaml,line=42,title=gpu-jobs validate%3A nodeGroups[3].workingHours[0].days"
            '::nodeGroups[3].workingHours[0].days: "Mon-Fry" is not a day range',
        ),
        (
            Problem("a,b:c.yaml", 0, "", "cannot read: 100% gone\nreally", warning=True),
            "::warning file=a%2Cb%3Ac.yaml,title=gpu-jobs validate::cannot read: 100%25 gone%0Areally",
        ),
    ],
)
def test_validate_problems_as_github_annotations(problem: Problem, line: str) -> None:
    assert github_annotation(problem) == line


def test_namespaces_whose_quota_changes_are_grouped_by_before_and_after() -> None:
    seen = [
        NamespaceInfo("kube-system", {}),  # excluded on both sides
        NamespaceInfo("fraud", {}),  # rules[0] in ml-prod: unchanged
        NamespaceInfo("misc-a", {}),  # default 0 -> 4
        NamespaceInfo("misc-b", {}),
        NamespaceInfo("nlp", {"team": "nlp"}),  # the team rule: unchanged
        NamespaceInfo("gone", {}, terminating=True),  # left alone by the job, so not listed
    ]
    changes = namespace_changes(BASE, QUOTA_ONLY, "ml-prod", seen, ref())
    assert changes == (
        NamespaceChange("ml-prod", "default: nvidia.com/gpu: 0", "default: nvidia.com/gpu: 4", ("misc-a", "misc-b")),
    )
    # A rule moved above another changes no namespace's limits: nothing listed.
    rules = "    - {namespaces: [a], hard: {nvidia.com/gpu: 1}}\n    - {namespaces: [b], hard: {nvidia.com/gpu: 2}}\n"
    swapped = "    - {namespaces: [b], hard: {nvidia.com/gpu: 2}}\n    - {namespaces: [a], hard: {nvidia.com/gpu: 1}}\n"
    ab = [NamespaceInfo("a", {}), NamespaceInfo("b", {})]
    assert namespace_changes(quotas(rules), quotas(swapped), "x", ab, ref()) == ()
    markdown = report.to_markdown(
        replace(diff_policies(BASE, QUOTA_ONLY, ref()), namespaces=changes, namespaces_read=(("ml-prod", 6),))
    )
    assert "namespaces read: 6 in ml-prod." in markdown
    assert "| ml-prod | 2: misc-a, misc-b | default: nvidia.com/gpu: 0 | default: nvidia.com/gpu: 4 |" in markdown


def test_diff_imports_no_cloud_sdk_and_no_kubernetes_client() -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from jobs.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    code = main(['diff', 'gitops/policy.yaml', 'gitops/policy.yaml', '--output', 'markdown'])\n"
        "print(code, sorted(m for m in sys.modules if m.startswith(('boto3', 'botocore', 'kubernetes', 'google', 'azure'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "0 []"


def test_a_cluster_view_shows_only_that_clusters_groups() -> None:
    after = example(LONGER, WIDER)  # notebooks-t4 in notebooks, training-a100 in ml-prod
    diff = diff_policies(BASE, after, ref(), cluster="ml-prod")
    assert [c.name for c in diff.schedules] == ["training-a100"]
    assert [c.path for c in diff.node_group_fields] == ["nodeGroups[training-a100].up.desired"]
    assert diff.totals.groups == (3, 3)


def test_a_percent_given_as_a_number_reads_as_a_percent() -> None:
    """`below: 5` is a percent the model reads as 5.0: the diff says 5%, with a decimal only where it is not whole."""
    after = example(
        ("below: 5 ", "below: 7.5 "),
        ("utilBelow: 1,", "utilBelow: 2,"),
        ("maxActionsPerRun: 10", "maxActionsPerRun: 12"),
    )
    diff = diff_policies(BASE, after, ref())
    text = report.to_text(diff)
    assert "  sweep.idlePods.below           5%      7.5%\n" in text
    assert "  sweep.leakedMemory.utilBelow   1%      2%\n" in text
    assert "  sweep.limits.maxActionsPerRun  10      12\n" in text  # a count, not a percent
    assert ".0" not in text
    markdown = report.to_markdown(diff)
    assert "| `sweep.idlePods.below` | 5% | 7.5% |" in markdown
    assert "| `sweep.leakedMemory.utilBelow` | 1% | 2% |" in markdown
    (section,) = json.loads(report.to_json(diff))["sections"].values()
    assert section[0] == {"path": "sweep.idlePods.below", "kind": "changed", "before": 5, "after": 7.5, "unit": "%"}
    assert "unit" not in section[2]


# training-a100 (p4d.24xlarge, 96 vCPU, spot) is the one group p-spot-eu-west-1 counts.
RAISED = ("up: {min: 0, desired: 4, max: 8}", "up: {min: 0, desired: 4, max: 12}")
P4D = Shape("p4d.24xlarge", 96, "vCPU", family="P")
READ: dict[str, Conversion] = {
    "p-spot-eu-west-1": (
        {"training-a100": GroupSize("training-a100", "p4d.24xlarge", 8, "spot")},
        {"p4d.24xlarge": P4D},
    )
}


def test_raising_up_max_shows_the_derived_cloud_quota_target_in_its_unit() -> None:
    after = example(RAISED)
    diff = replace(diff_policies(BASE, after, ref()), quota_targets=quota_target_changes(BASE, after, read=READ))
    diff = replace(diff, quota_targets_read=True)
    (change,) = diff.quota_targets
    assert (change.name, change.where, change.delta) == ("p-spot-eu-west-1", "aws eu-west-1", 384)
    text = report.to_text(diff)
    assert "p-spot-eu-west-1  aws eu-west-1  768 vCPU  1,152 vCPU  +384 vCPU" in text
    assert "training-a100: 12 x p4d.24xlarge x 96 vCPU = 1152" in text
    markdown = report.to_markdown(diff)
    assert (
        "| `p-spot-eu-west-1` | aws eu-west-1 | 768 vCPU | 1,152 vCPU | +384 vCPU"
        " | training-a100: 12 x p4d.24xlarge x 96 vCPU = 1152 |" in markdown
    )
    (doc,) = json.loads(report.to_json(diff))["cloudQuotaTargets"]
    assert (doc["before"]["value"], doc["after"]["value"], doc["after"]["unit"], doc["delta"]) == (
        768,
        1152,
        "vCPU",
        384,
    )
    assert doc["after"]["nodeGroupsUpMax"] == {"training-a100": 12}


def test_without_the_cloud_the_derived_target_shows_in_nodes() -> None:
    diff = diff_policies(BASE, example(RAISED), ref())
    (change,) = diff.quota_targets
    assert change.delta is None
    text = report.to_text(diff)
    assert "training-a100 up.max 8  training-a100 up.max 12  +4 nodes  in nodes (--cloud-quotas converts)" in text
    assert "+4 nodes" in report.to_markdown(diff)
    # Nothing a target counts changes: no row; a group it does not count changes: no row either.
    assert diff_policies(BASE, example(WIDER), ref()).quota_targets == ()
    assert diff_policies(BASE, BASE, ref()).empty


def test_a_derived_target_above_max_says_it_is_capped() -> None:
    after = example(
        RAISED, ("target: {nodeGroups: [training-a100]}", "target: {nodeGroups: [training-a100]}\n    max: 1000")
    )
    (change,) = quota_target_changes(BASE, after, read=READ)
    assert report.target_text(change.after) == "1,152 vCPU (capped at max 1,000)"


class FakeShapes:
    """The read half of a quota adapter, as the cloud answers it."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def group(self, group: NodeGroup) -> GroupSize | str:
        if self.fail:
            raise errors.Unavailable("eks: connection reset")
        return GroupSize(group.name, "p4d.24xlarge", 3, "spot")

    def shapes(self, entry: CloudQuota, names: Sequence[str]) -> Mapping[str, Shape | str]:
        self.asked.append((entry.name, tuple(names)))
        return {"p4d.24xlarge": P4D}


def test_the_cloud_read_converts_both_sides_and_an_unreadable_entry_says_why() -> None:
    after = example(RAISED)
    changes = diff_policies(BASE, after, ref()).quota_targets
    fake = FakeShapes()
    read, failed = cloud.read_conversions(BASE, after, changes, lambda _: fake, RecordingLog())
    assert failed == 0
    assert fake.asked == [("p-spot-eu-west-1", ("p4d.24xlarge",))]
    (change,) = quota_target_changes(BASE, after, read=read)
    assert (change.before and change.before.value, change.after and change.after.value) == (768, 1152)
    log = RecordingLog()
    read, failed = cloud.read_conversions(BASE, after, changes, lambda _: FakeShapes(fail=True), log)
    assert (failed, log.names) == (1, ["diff.cloud_quota_unreadable"])
    (change,) = quota_target_changes(BASE, after, read=read)
    assert report.target_how(change, True) == (
        "not converted: node group training-a100: cannot be read: eks: connection reset"
    )


# g-ondemand-eu-west-1 asks for enough for instances of one shape: 4 x g6.xlarge (4 vCPU each).
MORE_G6 = ("target: {instances: 4, instanceType: g6.xlarge}", "target: {instances: 6, instanceType: g6.xlarge}")
G6 = Shape("g6.xlarge", 4, "vCPU", family="G")


def test_an_instances_target_shows_in_instances_and_in_its_unit_once_the_shape_is_read() -> None:
    after = example(MORE_G6)
    (change,) = diff_policies(BASE, after, ref()).quota_targets
    assert (change.name, change.where) == ("g-ondemand-eu-west-1", "aws eu-west-1")
    text = report.to_text(diff_policies(BASE, after, ref()))
    assert "4 x g6.xlarge  6 x g6.xlarge  +2 instances  in instances (--cloud-quotas converts)" in text
    read: dict[str, Conversion] = {"g-ondemand-eu-west-1": ({}, {"g6.xlarge": G6})}
    (converted,) = quota_target_changes(BASE, after, read=read)
    assert (converted.delta, report.target_text(converted.before), report.target_text(converted.after)) == (
        8,
        "16 vCPU",
        "24 vCPU",
    )
    assert report.target_how(converted, True) == "instances: 6 x g6.xlarge x 4 vCPU = 24"
    fake = FakeShapes()
    cloud.read_conversions(BASE, after, (change,), lambda _: fake, RecordingLog())
    assert fake.asked == [("g-ondemand-eu-west-1", ("g6.xlarge",))]  # the shape the target names is read
    doc = report.to_doc(diff_policies(BASE, after, ref()))["cloudQuotaTargets"][0]
    assert doc["after"]["instances"] == {"shape": "g6.xlarge", "count": 6}
