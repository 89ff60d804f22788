"""Untagged GPU instances, pure: the label key rule, the mark's format, and the judgement of one instance (first match
wins: protected, member, cleared, then marked / acted by the grace period, and not running; an instance with every
tag and no mark is not reported at all)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobs.core.policy_sweep import InstanceAction, UntaggedInstances
from jobs.core.timespec import quoted
from jobs.core.untagged import (
    GpuInstance,
    InstancePlan,
    InstanceState,
    Mark,
    due_at,
    judge,
    label_key,
    mark_value,
    parse_mark,
    plan_instances,
)
from jobs.labels import SWEEP_MARK_TAG

# Wednesday 2026-12-02 14:05:30 UTC, as the policy's timezone (Europe/Berlin) shows it.
NOW = datetime(2026, 12, 2, 15, 5, 30, tzinfo=ZoneInfo("Europe/Berlin"))
GRACE = timedelta(hours=24)


def section(action: InstanceAction = "stop", **extra: object) -> UntaggedInstances:
    return UntaggedInstances.model_validate({"requiredTags": ["owner", "project"], "action": action, **extra})


def instance(tags: dict[str, str] | None = None, **changes: object) -> GpuInstance:
    base = GpuInstance("aws", "us-east-1", "i-0abc", "train", "us-east-1a", "p4d.24xlarge", 8, "running", tags or {})
    return replace(base, **changes)  # type: ignore[arg-type]


def marked(value: str, **tags: str) -> GpuInstance:
    return instance({SWEEP_MARK_TAG: value, **tags})


# --- label keys and marks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cloud", "name", "key"),
    [
        ("gcp", "gpu-jobs/protect", "gpu-jobs_protect"),
        ("gcp", "Team.Owner", "team_owner"),
        ("gcp", "owner", "owner"),
        ("aws", "gpu-jobs/protect", "gpu-jobs/protect"),
        ("azure", "Team.Owner", "Team.Owner"),
    ],
)
def test_label_key_is_the_gcp_label_spelling_and_leaves_tags_alone(cloud: str, name: str, key: str) -> None:
    assert label_key(cloud, name) == key  # type: ignore[arg-type]


def test_the_mark_is_the_action_and_the_due_minute_in_utc_and_a_valid_gcp_label_value() -> None:
    due = datetime(2026, 12, 3, 14, 6, tzinfo=UTC)

    value = mark_value("tag-only", due.astimezone(ZoneInfo("America/New_York")))

    assert value == "tag-only-after-20261203t1406z"
    assert len(value) <= 63
    assert value == value.lower()
    assert set(value) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_")
    assert parse_mark(value) == Mark("tag-only", due)
    assert parse_mark(mark_value("terminate", due)) == Mark("terminate", due)


@pytest.mark.parametrize(
    "value", ["", "stop", "stop-after-", "delete-after-20261203t1406z", "stop-after-20261399t2599z", "STOP-after-x"]
)
def test_a_value_this_job_did_not_write_is_no_mark(value: str) -> None:
    assert parse_mark(value) is None


@pytest.mark.parametrize(
    ("now", "due"),
    [
        # 14:05:30 + 24h is rounded up: the mark never announces a minute before the full grace period.
        (datetime(2026, 12, 2, 14, 5, 30, tzinfo=UTC), datetime(2026, 12, 3, 14, 6, tzinfo=UTC)),
        (datetime(2026, 12, 2, 14, 5, tzinfo=UTC), datetime(2026, 12, 3, 14, 5, tzinfo=UTC)),
        (datetime(2026, 12, 2, 14, 5, 0, 1, tzinfo=UTC), datetime(2026, 12, 3, 14, 6, tzinfo=UTC)),
    ],
)
def test_due_is_now_plus_grace_rounded_up_to_the_minute(now: datetime, due: datetime) -> None:
    assert due_at(now, GRACE) == due


# --- the judgement ------------------------------------------------------------------------------------------------


def test_an_untagged_running_instance_is_marked_with_the_due_time() -> None:
    plan = judge(section(), instance({"project": "llm"}), NOW)

    assert plan == InstancePlan(
        instance({"project": "llm"}),
        "marked",
        "stop",
        ("owner",),
        "missing owner: stop after 2026-12-03 14:06 UTC unless tagged",
        write="mark",
        tags={SWEEP_MARK_TAG: "stop-after-20261203t1406z"},
        due=datetime(2026, 12, 3, 14, 6, tzinfo=UTC),
    )
    assert plan.writes
    assert not plan.counts


def test_a_blank_tag_value_names_nobody() -> None:
    plan = judge(section(), instance({"owner": " ", "project": "llm"}), NOW)
    assert plan is not None
    assert (plan.state, plan.missing) == ("marked", ("owner",))


def test_marked_and_not_due_writes_nothing() -> None:
    plan = judge(section(), marked("stop-after-20261202t1406z"), NOW)  # due in 30 s
    assert plan is not None
    assert (plan.state, plan.write, plan.missing) == ("marked", None, ("owner", "project"))


@pytest.mark.parametrize(("action", "due"), [("stop", "20261202t1405z"), ("terminate", "20261201t0000z")])
def test_marked_and_due_is_acted_on_and_counts(action: InstanceAction, due: str) -> None:
    plan = judge(section(action), marked(f"{action}-after-{due}"), NOW)
    assert plan is not None
    assert (plan.state, plan.action, plan.write, plan.counts) == ("acted", action, action, True)
    assert plan.reason.startswith(f"missing owner, project; {action} was due at ")


def test_tag_only_stays_marked_forever() -> None:
    plan = judge(section("tag-only"), marked("tag-only-after-20261101t0000z"), NOW)
    assert plan is not None
    assert (plan.state, plan.action, plan.write) == ("marked", "tag-only", None)


@pytest.mark.parametrize("value", ["stop-after-someday", "terminate-after-20261201t0000z"])
def test_an_unreadable_mark_or_one_for_another_action_is_rewritten_as_marked_now(value: str) -> None:
    # A policy that moved from terminate to stop (or a hand-edited tag): the warning restarts, nothing is acted on.
    plan = judge(section("stop"), marked(value), NOW)
    assert plan is not None
    assert (plan.state, plan.write, plan.tags) == ("marked", "mark", {SWEEP_MARK_TAG: "stop-after-20261203t1406z"})
    assert f"its mark {quoted(value)} is replaced" in plan.reason


def test_a_tag_added_meanwhile_clears_the_mark() -> None:
    plan = judge(section(), marked("stop-after-20261201t0000z", owner="ana", project="llm"), NOW)
    assert plan is not None
    assert (plan.state, plan.write, plan.tags, plan.action, plan.counts) == (
        "cleared",
        "unmark",
        {SWEEP_MARK_TAG: None},
        None,
        False,
    )


def test_a_tagged_instance_without_a_mark_is_not_reported() -> None:
    assert judge(section(), instance({"owner": "ana", "project": "llm"}), NOW) is None


def test_protection_wins_over_everything() -> None:
    overdue = marked("stop-after-20261201t0000z", **{"gpu-jobs/protect": ""})
    plan = judge(section(), replace(overdue, group="Auto Scaling group batch"), NOW)
    assert plan is not None
    assert (plan.state, plan.write, plan.action) == ("protected", None, None)


def test_a_custom_protect_tag_on_gcp_is_read_as_its_label() -> None:
    gcp = replace(instance({"keep_me": "yes"}), cloud="gcp")
    plan = judge(section(protectTag="Keep.Me"), gcp, NOW)
    assert plan is not None
    assert plan.state == "protected"


def test_a_group_member_is_reported_never_marked_or_acted_on() -> None:
    member = replace(marked("stop-after-20261201t0000z"), group="EKS node group ml/gpu")
    plan = judge(section(), member, NOW)
    assert plan is not None
    assert (plan.state, plan.write, plan.missing) == ("member", None, ("owner", "project"))
    assert "belongs to EKS node group ml/gpu" in plan.reason


def test_tagged_members_and_protected_instances_are_not_reported() -> None:
    tagged = instance({"owner": "ana", "project": "llm"})
    assert judge(section(), replace(tagged, group="Auto Scaling group batch"), NOW) is None
    assert judge(section(), instance({"owner": "ana", "project": "llm", "gpu-jobs/protect": ""}), NOW) is None


@pytest.mark.parametrize("state", ["stopped", "other"])
def test_not_running_and_marked_is_acted_without_a_call(state: InstanceState) -> None:
    plan = judge(section(), replace(marked("stop-after-20261201t0000z"), state=state), NOW)
    assert plan is not None
    assert (plan.state, plan.write) == ("acted", None)


def test_not_running_and_never_marked_is_not_reported() -> None:
    assert judge(section(), instance(state="stopped"), NOW) is None


def test_gcp_required_tags_are_compared_as_labels() -> None:
    gcp = replace(instance({"team_owner": "ana", "project": "llm"}), cloud="gcp")
    assert judge(section(requiredTags=["Team.Owner", "project"]), gcp, NOW) is None
    plan = judge(section(requiredTags=["Team.Owner", "cost/center"]), gcp, NOW)
    assert plan is not None
    assert plan.missing == ("cost/center",)


def test_the_plan_reports_by_id_and_a_second_run_after_marking_writes_nothing() -> None:
    a, b, c = (replace(instance(), id=i) for i in ("i-3", "i-1", "i-2"))
    c = replace(c, tags={"owner": "x", "project": "y"})
    first = plan_instances(section(), [a, b, c], NOW)
    assert [(p.instance.id, p.state, p.write) for p in first] == [("i-1", "marked", "mark"), ("i-3", "marked", "mark")]

    tagged = [replace(p.instance, tags={**p.instance.tags, **p.tags}) for p in first]  # type: ignore[dict-item]
    again = plan_instances(section(), [*tagged, c], NOW + timedelta(hours=1))
    assert [(p.state, p.write) for p in again] == [("marked", None), ("marked", None)]
    later = plan_instances(section(), [*tagged, c], NOW + GRACE + timedelta(minutes=1))
    assert [(p.state, p.write) for p in later] == [("acted", "stop"), ("acted", "stop")]
