"""The blast-radius limit: a count or a share of the items considered, parsed strictly."""

from __future__ import annotations

import pytest

from jobs.core.limits import ChangeLimit


@pytest.mark.parametrize(
    ("text", "considered", "allowed"),
    [("20", 1000, 20), ("0", 5, 0), ("25%", 200, 50), ("25%", 10, 3), ("1%", 3, 1), ("100%", 7, 7), ("12.5%", 8, 1)],
)
def test_a_limit_allows_a_count_or_a_share_rounded_up(text: str, considered: int, allowed: int) -> None:
    assert ChangeLimit.parse(text).allowed(considered) == allowed


@pytest.mark.parametrize("text", ["", "abc", "-1", "2.5", "150%", "0%", "%", "5 %x"])
def test_anything_else_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(ValueError, match=r"percentage|whole number"):
        ChangeLimit.parse(text)


def test_the_refusal_says_how_many_of_how_many_and_how_to_raise_it() -> None:
    assert ChangeLimit(50).refusal(50, 60, "node groups") is None
    assert ChangeLimit.parse("10%").refusal(7, 60, "namespace quotas") == (
        "the plan changes 7 namespace quotas, more than the limit of 10% (6 of 60) per run"
        " (raise --max-changes / GPU_JOBS_MAX_CHANGES if this is intended)"
    )


def test_a_limit_allows_up_to_itself_and_refuses_one_more() -> None:
    # Moved from the nodegroups plan's guard (deleted: the runner applies the limit to every job's plan).
    assert ChangeLimit(3).refusal(3, 3, "node groups") is None
    assert "changes 3 node groups, more than the limit of 2" in (ChangeLimit(2).refusal(3, 3, "node groups") or "")
    assert ChangeLimit.parse("50%").refusal(3, 6, "node groups") is None  # 3 of 6
    refused = ChangeLimit.parse("10%").refusal(3, 10, "node groups") or ""
    assert "more than the limit of 10% (1 of 10) per run" in refused
