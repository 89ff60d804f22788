"""The ``gpu-jobs`` command line as a person and a CronJob use it: exit codes, output forms, env settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.cli import main, summary
from jobs.outcome import ExitCode, Outcome
from tests import forkserver

EXAMPLE = "gitops/policy.yaml"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "jobs", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=60,
    )


def test_validate_good_policy_exits_0_and_logs_a_summary() -> None:
    done = run_cli("validate", EXAMPLE)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines()]
    summary = events[-1]
    assert summary["event"] == "run.summary"
    assert {k: summary[k] for k in ("job", "dry_run", "failed")} == {"job": "validate", "dry_run": False, "failed": 0}
    assert {"planned", "applied", "skipped", "duration_s"} <= summary.keys()
    assert summary["summary"] == "validate: all good; exit 0"  # a sentence: the pod log's last line


def test_validate_bad_policy_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("apiVersion: gpu-jobs/v1\nkind: GpuPolicy\ndefaults:\n  timezone: Nowhere/City\n  warmUp: x\n")
    done = run_cli("validate", str(bad))
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        f'{bad}:4: defaults.timezone: "Nowhere/City" is not a known IANA timezone (e.g. Europe/Berlin)',
        f'{bad}:5: defaults.warmUp: "x" is not a duration (use e.g. 15m, 8h, 1h30m, 2d)',
    ]


def test_validate_directory_means_every_yaml_in_it(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(Path(EXAMPLE).read_text())
    (tmp_path / "b.yaml").write_text("apiVersion: gpu-jobs/v1\nkind: Nope\n")
    (tmp_path / "notes.txt").write_text("not a policy")
    done = run_cli("validate", str(tmp_path))
    assert done.returncode == 2
    assert done.stdout.splitlines() == [
        f"{tmp_path}/a.yaml: valid: 8 node groups in 5 clusters, 1 override, 4 namespace quota rules, 4 cloud quotas",
        "  8 node groups warn running GPU pods 30m before shutdown",  # what acts on people, a line each
        "  1 node group wakes on demand (up to 2h)",
        "  sweep: idle pods below 5% for 2h: delete after 30m, snoozes at most 7d",
        "  sweep: instances without owner, project: stop after 24h",
        f"{tmp_path}/b.yaml:2: kind: \"Nope\": Input should be 'GpuPolicy'",
    ]


def test_policy_path_from_environment(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    done = run_cli("validate", env={"GPU_JOBS_POLICY": str(missing)})
    assert done.returncode == 2
    assert str(missing) in done.stdout


def test_calendar_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["calendar", "--policy", EXAMPLE, "--at", "2026-12-01T07:29:00+01:00", "--output", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["at"] == "2026-12-01T07:29:00+01:00"
    groups = {g["name"]: g for g in doc["nodeGroups"]}
    # research-h100 follows the defaults (Mon-Fri 08:00-20:00 Berlin) with a 30 minute warm-up.
    assert {k: groups["research-h100"][k] for k in ("state", "reason", "nextChange")} == {
        "state": "down",
        "reason": "outside working hours",
        "nextChange": "2026-12-01T07:30:00+01:00",
    }
    # training-a100 is held up by the override until Wednesday 23:00.
    assert groups["training-a100"]["state"] == "up"
    assert groups["training-a100"]["nextChange"] == "2026-12-02T23:00:00+01:00"
    assert groups["inference-l4"]["nextChange"] is None


def test_calendar_text_draws_a_week_grid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calendar", "--policy", EXAMPLE, "--at", "2026-12-01T12:00:00+01:00", "--days", "2"]) == 0
    out = capsys.readouterr().out
    # notebooks-t4: Mon-Fri 07:30-19:30 London + 15 min warm-up: up cells from 07:30 (slot 15) to 19:30 (slot 39)
    block = out.split("notebooks-t4")[1]
    tuesday = next(line for line in block.splitlines() if line.strip().startswith("Tue 01 Dec"))
    cells = tuesday.split()[-1]
    assert cells == "·" * 15 + "█" * 24 + "·" * 9


def test_calendar_markdown_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tmp_path / "before.yaml"
    before.write_text(Path(EXAMPLE).read_text().replace('start: "07:30", end: "19:30"', 'start: "07:30", end: "17:30"'))
    assert (
        main(
            [
                "calendar",
                "--policy",
                EXAMPLE,
                "--compare",
                str(before),
                "--at",
                "2026-12-01T12:00:00+01:00",
                "--output",
                "markdown",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| node group | before h/week | after h/week | change |" in out
    # Two more hours on five weekdays: +10 h a week.
    assert "| `notebooks-t4` | 51.25 | 61.25 | +10 |" in out


def test_calendar_naive_at_uses_policy_timezone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calendar", "--policy", EXAMPLE, "--at", "2026-12-01T07:29:00", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["at"] == "2026-12-01T07:29:00+01:00"


def test_calendar_bad_at_exits_2() -> None:
    done = run_cli("calendar", "--policy", EXAMPLE, "--at", "tomorrow-ish")
    assert done.returncode == 2
    assert "is not an ISO 8601 date-time" in done.stderr


FORBIDDEN = ("boto3", "botocore", "kubernetes", "google.cloud", "google.api_core", "azure")


@pytest.mark.parametrize("argv", [["validate", EXAMPLE], ["calendar", "--policy", EXAMPLE, "--output", "json"]])
def test_validate_and_calendar_import_no_cloud_sdk_and_no_kubernetes_client(argv: list[str]) -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from jobs.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        f"print(code, sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "0 []"


def test_schema_file_is_current() -> None:
    from jobs.commands.schema import render

    assert Path("gitops/policy.schema.json").read_text() == render(), "regenerate: make schema"


def test_schema_output_publishes_the_report_envelope_and_schema_alone_the_policys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import jsonschema

    from jobs.envelope import API_VERSION, ENVELOPE_KEYS

    assert main(["schema", "--output"]) == 0
    published = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(published)
    assert (tuple(published["required"]), published["properties"]["apiVersion"]) == (
        ENVELOPE_KEYS,
        {"const": API_VERSION},
    )
    empty = {"apiVersion": API_VERSION, "job": "quotas", "at": None, "dryRun": False, "exitCode": 0}
    counts = dict.fromkeys(("planned", "applied", "unchanged", "skipped", "failed", "refused"), 0)
    jsonschema.validate({**empty, "counts": counts, "scopes": [], "items": []}, published)
    with pytest.raises(jsonschema.ValidationError):  # an old shape is not the envelope
        jsonschema.validate({"at": None, "dryRun": False, "quotas": [], "scopes": []}, published)

    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["$id"].endswith("policy-v1.json")


def test_example_policy_conforms_to_the_published_schema() -> None:
    import jsonschema
    import yaml

    schema = json.loads(Path("gitops/policy.schema.json").read_text())
    jsonschema.validate(yaml.safe_load(Path(EXAMPLE).read_text()), schema)


def test_calendar_names_every_groups_cluster_and_filters_by_one(capsys: pytest.CaptureFixture[str]) -> None:
    at = "2026-12-01T07:29:00+01:00"
    assert main(["calendar", "--policy", EXAMPLE, "--at", at, "--output", "json"]) == 0
    every = {g["name"]: g["cluster"] for g in json.loads(capsys.readouterr().out)["nodeGroups"]}
    assert every["research-h100"] == "research"
    assert every["batch-nightly-g5"] == "batch"
    assert main(["calendar", "--policy", EXAMPLE, "--at", at, "--output", "json", "--cluster", "aks-ml"]) == 0
    assert {g["name"] for g in json.loads(capsys.readouterr().out)["nodeGroups"]} == {
        name for name, cluster in every.items() if cluster == "aks-ml"
    }
    assert main(["calendar", "--policy", EXAMPLE, "--at", at, "--cluster", "research", "--days", "1"]) == 0
    text = capsys.readouterr().out
    assert "research-h100  [cluster research: gcp " in text
    assert "training-a100" not in text
    assert main(["calendar", "--policy", EXAMPLE, "--cluster", "staging"]) == 2
    assert "'staging' is not a cluster of the policy" in capsys.readouterr().err


def test_calendar_output_reads_right_in_a_pull_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = Path(EXAMPLE).read_text()
    after = tmp_path / "after.yaml"
    # A reason with a pipe and an override that ends long after the week (both must not break the table).
    after.write_text(text.replace('reason: "NeurIPS camera-ready deadline"', 'reason: "NeurIPS | camera-ready"'))
    before = tmp_path / "before.yaml"
    before.write_text(text.replace("  - name: vision-t4\n", "  - name: vision-t4-old\n"))
    at = "2026-12-01T12:00:00+01:00"
    argv = ["calendar", "--policy", str(after), "--at", at, "--days", "1", "--compare", str(before)]
    assert main([*argv, "--output", "markdown"]) == 0
    markdown = capsys.readouterr().out
    row = next(line for line in markdown.splitlines() if line.startswith("| `training-a100`"))
    assert "NeurIPS \\| camera-ready" in row
    assert row.count(" | ") == 7  # eight cells: the escaped pipe is text, not a column
    assert "| `vision-t4` (new) |" in markdown
    assert "| `vision-t4-old` (removed) |" in markdown
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "vision-t4 (new)" in out
    assert "vision-t4-old (removed)" in out
    # The hour ruler sits over the cells: "00" starts in the column of a day's first cell.
    lines = out.splitlines()
    ruler = next(i for i, line in enumerate(lines) if line.strip().startswith("00  02"))
    first_cell = len(lines[ruler + 1]) - len(lines[ruler + 1].lstrip()) + len("Tue 01 Dec  ")
    assert lines[ruler].index("00") == first_cell


def test_calendar_compare_counts_a_change_to_an_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = Path(EXAMPLE).read_text()
    before = tmp_path / "before.yaml"
    before.write_text(text)
    after = tmp_path / "after.yaml"
    after.write_text(text.replace('until: "2026-12-02T23:00:00+01:00"', 'until: "2026-12-06T23:00:00+01:00"'))
    argv = ["calendar", "--policy", str(after), "--compare", str(before), "--at", "2026-12-01T12:00:00+01:00"]
    assert main([*argv, "--output", "json"]) == 0
    delta = {c["name"]: c["delta"] for c in json.loads(capsys.readouterr().out)["compare"]}
    assert delta["training-a100"] > 0  # the override keeps it up four more days
    assert {name for name, d in delta.items() if d} == {"training-a100"}


def test_calendar_gpu_hours_avoided_names_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An always-on group avoids 0 GPU-hours (size or not); a group without a figure names the field it lacks, and
    text, markdown and JSON say the same."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        Path(EXAMPLE)
        .read_text()
        .replace("    gpusPerNode: 1\n    alwaysOn: true", "    alwaysOn: true")  # inference-l4: no size, always on
        .replace("    gpusPerNode: 1\n    up: {min: 0, desired: 2, max: 6}", "    up: {min: 0, desired: 2, max: 6}")
    )
    argv = ["calendar", "--policy", str(policy), "--at", "2026-12-07T12:00:00+01:00", "--days", "1"]
    assert main([*argv, "--output", "json"]) == 0
    groups = {g["name"]: g for g in json.loads(capsys.readouterr().out)["nodeGroups"]}
    figures = {n: (groups[n]["gpuHoursAvoidedPerWeek"], groups[n]["gpuHoursAvoidedNeeds"]) for n in groups}
    assert figures["inference-l4"] == (0.0, [])
    assert figures["research-h100"] == (None, ["up"])  # it sets gpusPerNode: only the working size is missing
    assert figures["finetune-a100"] == (None, ["gpusPerNode"])
    assert figures["training-a100"][0] > 0
    assert main(argv) == 0
    text = {block.split()[0]: block for block in capsys.readouterr().out.split("\n\n")}  # one block per group
    assert "GPU-hours avoided vs always-on: 0\n" in text["inference-l4"]
    assert "avoided vs always-on: n/a (set up, the working size)\n" in text["research-h100"]
    assert "avoided vs always-on: n/a (set gpusPerNode)\n" in text["finetune-a100"]
    assert "n/a (set gpusPerNode and up)" not in "".join(text.values())
    assert main([*argv, "--output", "markdown"]) == 0
    rows = {r.split("|")[1].strip(" `"): r.split("|")[-2].strip() for r in capsys.readouterr().out.splitlines()[4:11]}
    assert (rows["inference-l4"], rows["research-h100"], rows["finetune-a100"]) == (
        "0",
        "n/a (set up, the working size)",
        "n/a (set gpusPerNode)",
    )


@pytest.mark.parametrize(
    ("command", "outcome", "stopped", "said"),
    [
        (
            "nodegroups",
            Outcome(ExitCode.ITEM_FAILED, 4, 2, 1, failures=("training-a100: not applied: 500 from the EKS API",)),
            None,
            "nodegroups: 4 planned, 2 applied, 1 failed (training-a100: not applied: 500 from the EKS API); exit 1",
        ),
        (
            "sweep",
            Outcome(ExitCode.ITEM_FAILED, 3, 1, 2, failures=("ml/a: x", "ml/b: y")),
            "SIGTERM",
            "sweep: 3 planned, 1 applied, 2 failed (ml/a: x, and 1 more); stopped by SIGTERM; exit 1",
        ),
        (
            "quotas",
            Outcome(ExitCode.REFUSED, 9, dry_run=True, notes=("refused: over the limit of 5; nothing changed",)),
            None,
            "quotas (dry run): 9 planned; refused: over the limit of 5; nothing changed; exit 3",
        ),
        ("quotas", Outcome(), None, "quotas: nothing to change; exit 0"),
        ("quotas", Outcome(ExitCode.ITEM_FAILED), None, "quotas: failed (the error is logged above); exit 1"),
        (
            "quotas",
            Outcome(ExitCode.ITEM_FAILED, reason="stopped by SIGINT during start-up: nothing was changed"),
            "SIGINT",
            "quotas: stopped by SIGINT during start-up: nothing was changed; exit 1",
        ),
        (
            "validate",
            Outcome(ExitCode.BAD_CONFIG, 2, failed=1),
            None,
            "validate: bad policy or configuration: nothing changed; exit 2",
        ),
        (None, Outcome(ExitCode.BAD_CONFIG), None, "gpu-jobs: bad policy or configuration: nothing changed; exit 2"),
    ],
)
def test_the_summary_is_one_sentence_with_the_counts_the_first_failure_and_the_exit_code(
    command: str | None, outcome: Outcome, stopped: str | None, said: str
) -> None:
    assert summary(command, outcome, stopped) == said


def test_the_summary_cuts_a_long_failure_short() -> None:
    long = Outcome(ExitCode.ITEM_FAILED, 1, failed=1, failures=("train: " + "x" * 5000,))
    assert len(summary("nodegroups", long, None)) < 200
