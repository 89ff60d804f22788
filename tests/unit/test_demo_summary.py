"""What ``make demo`` prints around its runs: the overall summary at the end, and no "nothing to change" over a
failed row (the demo's own renderings of the runs' JSON envelopes; the runs themselves: tests/integration)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from jobs.policy_file import parse_policy
from tests.sandbox.demo import Phase, overall_summary, render_night_phase, render_quota_phase

POLICY = parse_policy(Path("gitops/policy.yaml").read_text(), "policy.yaml")
AT = datetime.fromisoformat("2027-03-09T20:01:00+01:00")
ZERO = {"planned": 0, "applied": 0, "unchanged": 0, "skipped": 0, "failed": 0, "refused": 0}


def envelope(job: str, items: list[dict[str, Any]], scopes: list[dict[str, Any]], dry: bool = False) -> str:
    counts = dict(ZERO)
    for item in items:
        counts[item["status"]] += 1
    counts["planned"] = counts["applied"] + counts["failed"]
    failed = any(s["state"] == "failed" for s in scopes) or counts["failed"]
    doc = {"job": job, "dryRun": dry, "exitCode": int(bool(failed)), "counts": counts, "scopes": scopes}
    return json.dumps({**doc, "items": items})


def scope(name: str, state: str = "applied", reason: str | None = None) -> dict[str, Any]:
    return {"kind": "cluster", "name": name, "state": state, "reason": reason, "warnings": [], "counts": ZERO}


def group(name: str, status: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "node group", "scope": "ml-prod", "name": name, "status": status, "reason": reason, **extra}


def phase(name: str, argv: list[str], stdout: str, code: int = 0, expected: tuple[int, ...] = (0,)) -> Phase:
    return Phase(name, argv, code, 1.0, stdout, "", expected, at=AT)


def test_no_nothing_to_change_above_a_failed_group() -> None:
    failed = group("training-a100", "failed", "cannot read", warning="the group cannot be read: Denied")
    run = phase("evening", ["nodegroups"], envelope("nodegroups", [failed], [scope("ml-prod")]), code=1)
    lines = render_night_phase(POLICY, run)
    assert not any("nothing to change" in line for line in lines)
    assert any(line.split()[:1] == ["training-a100"] and line.rstrip().endswith("failed") for line in lines)
    quiet = phase("evening again", ["nodegroups"], envelope("nodegroups", [], [scope("ml-prod")]))
    assert "  nothing to change: every node group is where the schedule wants it" in render_night_phase(POLICY, quiet)


def test_no_nothing_to_change_after_a_failed_namespace_quota() -> None:
    item = {
        "kind": "namespace quota",
        "scope": "ml-prod",
        "name": "fraud/gpu-quota",
        "status": "failed",
        "reason": "a quota gpu-jobs does not own is in the way",
        "namespace": "fraud",
        "action": "update",
        "rule": "rules[0]",
        "hard": {"requests.nvidia.com/gpu": "2"},
        "warnings": [],
    }
    run = phase("quotas", ["quotas"], envelope("quotas", [item], [scope("ml-prod")]), code=1)
    assert not any("nothing to change" in line for line in render_quota_phase(run))


def test_the_demo_ends_with_what_changed_and_failed_per_job_and_the_exit_codes() -> None:
    refused = "cluster research: refused before reading anything: its API says it is notebooks"
    phases = [
        phase("validate", ["validate", "policy.yaml"], "policy.yaml: valid"),
        phase(
            "wrong cluster",
            ["nodegroups", "--cluster", "research"],
            envelope(
                "nodegroups",
                [{**group("research-h100", "failed", f"not judged: {refused}"), "scope": "research"}],
                [scope("research", "failed", refused)],
            ),
            code=1,
            expected=(1,),
        ),
        phase("evening", ["nodegroups"], envelope("nodegroups", [group("a", "applied", "down")] * 6, [scope("x")])),
        phase("evening again", ["nodegroups"], envelope("nodegroups", [], [scope("x")])),
        phase(
            "cloud-quotas again",
            ["cloud-quotas"],
            envelope(
                "cloud-quotas", [{"kind": "cloud quota", "name": "a100", "status": "failed", "reason": "Failed"}], []
            ),
            code=1,
        ),
    ]
    # The wrong cluster's group fails for its scope's reason: said once.
    assert overall_summary(phases, 66.04) == [
        "== overall: 5 runs of 3 jobs in 66.0 s",
        "  validate: 1 run, exit 0",
        "  nodegroups: 3 runs, exit 1, 0, 0",
        "    changed: evening: 6 applied",
        f"    failed: wrong cluster: {refused}",  # the reason names the scope: not twice
        "  cloud-quotas: 1 run, exit 1 (expected 0)",
        "    changed: nothing",
        "    failed: cloud-quotas again: a100: Failed",
        "  UNEXPECTED exit codes: cloud-quotas again=1",
    ]


def test_a_long_failure_reason_is_cut_to_a_terminal_line() -> None:
    reason = "the API at http://127.0.0.1:41241 is cluster notebooks, not research. " * 5
    run = phase("quotas", ["quotas"], envelope("quotas", [], [scope("research", "failed", reason)]), code=1)
    (failed,) = [line for line in overall_summary([run], 1.0) if "failed:" in line]
    assert len(failed) <= len("    failed: ") + 150
    assert failed.endswith("...")
