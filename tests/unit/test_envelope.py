"""The one report every job makes (``jobs.envelope``): the tally, the text renderer and the JSON envelope, on
results made by hand (every job's own items are checked against the sandbox in tests/integration/test_sandbox.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import jsonschema
import pytest

from jobs.envelope import (
    API_VERSION,
    ENVELOPE_KEYS,
    ItemResult,
    ScopeResult,
    counts,
    failures,
    notes,
    schema,
    scope_text,
    tally,
    to_json,
    to_text,
)
from jobs.outcome import ExitCode
from jobs.runner import State, Tally, outcome
from jobs.scopes import account, cluster

AT = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)
ITEMS = (
    ItemResult("namespace quota", "a/gpu-quota", "applied", "Created the GPU quota", write=True, detail={"rule": "x"}),
    ItemResult("namespace quota", "b/gpu-quota", "failed", "500 from the API", write=True),
    ItemResult("namespace quota", "c/gpu-quota", "unchanged"),
    ItemResult("namespace quota", "d/gpu-quota", "skipped", "namespace d is gone"),
)


def result(state: State = "applied", items: tuple[ItemResult, ...] = ITEMS, reason: str | None = None) -> ScopeResult:
    rows = tuple(f"  {i.name} {i.status}" for i in items)
    return ScopeResult("quotas", cluster("ml-prod"), AT, False, state, reason, items, rows)


def test_an_item_counts_once_under_its_status_and_planned_counts_every_write() -> None:
    assert counts(result()) == {"planned": 2, "applied": 1, "unchanged": 1, "skipped": 1, "failed": 1, "refused": 0}
    assert tally(result()) == Tally(planned=2, applied=1, failed=1, skipped=1)


def test_a_scope_that_failed_with_no_failed_item_is_one_failed_item() -> None:
    assert counts(result("failed", (), "cluster ml-prod cannot be read"))["failed"] == 1
    assert counts(result("failed", ITEMS, "the Lease could not be taken"))["failed"] == 1  # its own, not one more
    refused = result("refused", (ItemResult("node group", "train", "refused", "over", write=True),), "over the limit")
    assert (tally(refused).refused, outcome([tally(refused)], dry_run=False).exit_code) == (True, ExitCode.REFUSED)


@pytest.mark.parametrize(
    ("state", "reason", "first"),
    [
        ("applied", None, None),
        ("locked", "other-run", "  another run holds the lease (other-run): nothing done"),
        ("failed", "cluster ml-prod cannot be read", "  FAILED: cluster ml-prod cannot be read. Nothing changed."),
        ("refused", "over the limit", "  REFUSED: over the limit.\n  Nothing changed. The plan was:"),
    ],
)
def test_one_renderer_frames_every_scope_the_same_way(state: State, reason: str | None, first: str | None) -> None:
    """The headline, then what stopped the scope (if anything), then the job's rows."""
    lines = scope_text(result(state, reason=reason)).splitlines()
    assert lines[0] == "gpu-jobs quotas in cluster ml-prod at 2026-12-02T15:00:00+00:00"
    assert lines[1:] == [*(first.split("\n") if first else []), *(f"  {i.name} {i.status}" for i in ITEMS)]


def test_a_stopped_scope_with_no_rows_says_only_why() -> None:
    text = scope_text(result("failed", (), "cluster ml-prod cannot be read"))
    assert text.splitlines()[1:] == ["  FAILED: cluster ml-prod cannot be read. Nothing changed."]
    assert to_text([], "gpu-jobs quotas: no cluster to act on") == "gpu-jobs quotas: no cluster to act on\n"
    accounts = ScopeResult("sweep", account("aws", "us-east-1"), AT, True, "planned")
    assert scope_text(accounts).startswith("gpu-jobs sweep in account aws/us-east-1 at 2026-12-02T15:00:00+00:00 (dry")


def test_the_envelope_is_one_line_with_the_same_keys_and_the_exit_code() -> None:
    results = [result(), result("locked", (), "other-run")]
    ended = outcome([tally(r) for r in results], dry_run=False)
    text = to_json("quotas", results, ended)
    assert text.count("\n") == 1
    doc = json.loads(text)
    jsonschema.validate(doc, schema())
    assert tuple(doc) == ENVELOPE_KEYS
    assert (doc["apiVersion"], doc["job"], doc["exitCode"]) == (API_VERSION, "quotas", 1)
    assert doc["counts"]["failed"] == 1
    assert [(s["name"], s["state"], s["reason"]) for s in doc["scopes"]] == [
        ("ml-prod", "applied", None),
        ("ml-prod", "locked", "other-run"),
    ]
    assert doc["items"][0] == {
        "kind": "namespace quota",
        "scope": "ml-prod",
        "name": "a/gpu-quota",
        "status": "applied",
        "reason": "Created the GPU quota",
        "rule": "x",
    }


NOTHING = "nothing to change: 3 namespaces have the quota the policy says"


@pytest.mark.parametrize(
    ("state", "items", "reason"),
    [
        ("failed", (), "cluster ml-prod cannot be read"),
        ("failed", (ItemResult("namespace quota", "c/gpu-quota", "unchanged"),), "the Lease could not be taken"),
        ("applied", (ItemResult("namespace quota", "b/gpu-quota", "failed", "500 from the API", write=True),), None),
        ("locked", (), "other-run"),
    ],
)
def test_nothing_to_change_is_never_said_above_a_failure(
    state: State, items: tuple[ItemResult, ...], reason: str | None
) -> None:
    scope = replace(result(state, items, reason), nothing=NOTHING)
    assert "nothing to change" not in scope_text(scope)
    assert "nothing to change" not in to_text([scope, replace(scope, scope=cluster("research"))], "")


def test_nothing_to_change_is_said_once_under_the_headline_when_it_holds() -> None:
    quiet = replace(result("planned", (ItemResult("namespace quota", "c/gpu-quota", "unchanged"),)), nothing=NOTHING)
    assert scope_text(quiet).splitlines()[1:] == [f"  {NOTHING}", "  c/gpu-quota unchanged"]


def test_a_run_refused_across_scopes_says_so_once_above_each_scopes_plan() -> None:
    why = "the plan changes 2 namespace quotas across 3 clusters, more than the limit of 1 per run"
    changing = result("refused", (ItemResult("namespace quota", "a/gpu-quota", "refused", write=True),), why)
    quiet = [replace(result("refused", (), why), scope=cluster(name), nothing=NOTHING) for name in ("b", "c")]
    held = replace(result("locked", (), "other-run"), scope=cluster("d"))
    lines = to_text([changing, *quiet, held], "").splitlines()
    assert lines == [
        "gpu-jobs quotas at 2026-12-02T15:00:00+00:00",
        f"  REFUSED: {why}.",
        "  Nothing changed. Each cluster's plan was:",
        "gpu-jobs quotas in cluster ml-prod at 2026-12-02T15:00:00+00:00",
        "  a/gpu-quota refused",
        "gpu-jobs quotas in cluster b at 2026-12-02T15:00:00+00:00",
        f"  {NOTHING}",
        "gpu-jobs quotas in cluster c at 2026-12-02T15:00:00+00:00",
        f"  {NOTHING}",
        "gpu-jobs quotas in cluster d at 2026-12-02T15:00:00+00:00",
        "  another run holds the lease (other-run): nothing done",
    ]
    # One scope refused on its own keeps the refusal in its block.
    assert scope_text(changing).splitlines()[1:3] == [f"  REFUSED: {why}.", "  Nothing changed. The plan was:"]
    assert to_text([changing], "") == scope_text(changing)


def test_the_runs_failures_and_notes_name_each_failed_item_and_what_else_stopped_it() -> None:
    why = "the plan changes 9 namespace quotas, more than the limit of 1 per run"
    run = [
        result(),
        replace(result("failed", (), "cluster research cannot be read"), scope=cluster("research")),
        replace(result("locked", (), "other-run"), scope=cluster("d")),
    ]
    assert failures(run) == ("b/gpu-quota: 500 from the API", "research: cluster research cannot be read")
    assert notes(run) == ("cluster d left to the run holding its lease (other-run)",)
    assert notes([result("refused", (), why)]) == (f"refused: {why}; nothing changed",)


def test_no_line_of_the_text_report_is_wider_than_120_characters() -> None:
    """The REFUSED line (the limit's reason with its hint) and a headline holding an Azure subscription id were the
    two lines left wider than a terminal, a pod log viewer or a PR comment reads comfortably."""
    azure = account("azure", "subscriptions/00000000-1111-2222-3333-444444444444/providers/Microsoft.Compute/eastus")
    reason = (
        "the plan changes 60 node groups across the fleet, more than the limit of 50 per run"
        " (raise --max-changes / GPU_JOBS_MAX_CHANGES if this is intended)"
    )
    refused_items = (ItemResult("node group", "train", "refused", reason, write=True),)
    one = ScopeResult("cloud-quotas", azure, AT, True, "refused", reason, refused_items, ("  train refused",))
    two = replace(one, scope=cluster("ml-prod"))
    for text in (to_text([one], "none"), to_text([one, two], "none")):
        assert max(len(line) for line in text.splitlines()) <= 120, text
        assert "REFUSED: the plan changes 60 node groups" in text
        assert "GPU_JOBS_MAX_CHANGES" in text  # wrapped, never cut
    assert (
        to_text([result()], "none").splitlines()[0] == "gpu-jobs quotas in cluster ml-prod at 2026-12-02T15:00:00+00:00"
    )
