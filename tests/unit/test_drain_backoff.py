"""The back-off of a drain that gave up: 30 min, doubling per give-up on the same blockers, capped at 4 h."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jobs.core.group_record import DrainBlock, Record, drain_backoff

AT = datetime.fromisoformat("2026-12-01T20:05:00+01:00")  # a Tuesday evening, Europe/Berlin


@pytest.mark.parametrize(
    ("attempts", "wait"),
    [
        (0, timedelta(minutes=30)),  # never below the first
        (1, timedelta(minutes=30)),
        (2, timedelta(hours=1)),
        (3, timedelta(hours=2)),
        (4, timedelta(hours=4)),
        (5, timedelta(hours=4)),  # capped
        (1000, timedelta(hours=4)),  # no overflow
    ],
)
def test_drain_backoff(attempts: int, wait: timedelta) -> None:
    assert drain_backoff(attempts) == wait


def test_a_block_says_when_the_next_drain_is_and_survives_its_record() -> None:
    block = DrainBlock(AT, 3, ("team-a/serve-0/u1",), (("team-a/serve", 0),))
    assert block.retry_at == datetime.fromisoformat("2026-12-01T22:05:00+01:00")
    from jobs.core.group_config import GroupConfig

    record = Record(GroupConfig(1, 3, 8), "up", AT, drain_blocked=block)
    assert Record.from_json(record.to_json()) == record
    assert "drainBlocked" not in Record(GroupConfig(1, 3, 8), "up", AT).to_json()  # older readers see no change
    assert block.same_blockers(DrainBlock(AT + timedelta(hours=1), 1, block.pods, block.budgets))
    assert not block.same_blockers(DrainBlock(AT, 3, block.pods, (("team-a/serve", 1),)))


def test_a_blocker_recreated_under_its_name_is_the_same_obstacle_for_the_back_off() -> None:
    block = DrainBlock(AT, 2, ("team-a/serve-0/u1", "team-a/serve-1/u2"), (("team-a/serve", 0),))
    replaced = DrainBlock(AT, 1, ("team-a/serve-0/u1", "team-a/serve-1/u9"), block.budgets)
    assert block.same_blockers(replaced)  # a StatefulSet's replacement: the back-off keeps doubling
    assert not block.same_blockers(DrainBlock(AT, 1, ("team-a/serve-0/u1",), block.budgets))
