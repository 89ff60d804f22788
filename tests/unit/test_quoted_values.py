"""Values people control (annotations, labels, tags, records they edit) are repeated cut to a bounded length, with
their real length: a 20,000-character value is one line of a report, a log line or an Event, not the report."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from jobs.core.group_identity import RecordError
from jobs.core.group_record import Record
from jobs.core.policy_sweep import UntaggedInstances
from jobs.core.timespec import ECHO_LIMIT, quoted
from jobs.core.untagged import GpuInstance, judge
from jobs.labels import SWEEP_MARK_TAG

HUGE = "x" * 20_000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-12-04T18:00:00+01:00", '"2026-12-04T18:00:00+01:00"'),  # short: whole
        (2, "2"),
        ("a\nb", '"a\\nb"'),  # a line break cannot start a forged log line
        ("y" * (ECHO_LIMIT - 2), f'"{"y" * (ECHO_LIMIT - 2)}"'),  # exactly at the limit, quotes included
        ("y" * (ECHO_LIMIT - 1), f'"{"y" * (ECHO_LIMIT - 3)}…" ({ECHO_LIMIT - 1} characters)'),
        (HUGE, f'"{"x" * (ECHO_LIMIT - 3)}…" (20000 characters)'),
        (10**250, f"{str(10**250)[: ECHO_LIMIT - 1]}… (251 characters)"),
    ],
)
def test_a_value_is_quoted_whole_or_cut_with_its_length(value: object, expected: str) -> None:
    assert quoted(value, ECHO_LIMIT) == expected


def test_an_unreadable_instance_mark_is_repeated_cut() -> None:
    section = UntaggedInstances.model_validate({"requiredTags": ["owner"], "action": "stop"})
    instance = GpuInstance("aws", "us-east-1", "i-0abc", "train", "us-east-1a", "p4d.24xlarge", 8, "running", {})
    plan = judge(section, replace(instance, tags={SWEEP_MARK_TAG: HUGE}), datetime.now(UTC))
    assert plan is not None
    assert f"its mark {quoted(HUGE, ECHO_LIMIT)} is replaced" in plan.reason
    assert len(plan.reason) < 2 * ECHO_LIMIT + 200


def test_an_edited_record_is_repeated_cut() -> None:
    with pytest.raises(RecordError) as raised:
        Record.from_json({"schemaVersion": HUGE})
    assert str(raised.value) == f"schemaVersion {quoted(HUGE, ECHO_LIMIT)}, expected 2"
