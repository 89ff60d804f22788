"""Hostile or broken policy files: ``validate`` reports each as ``FILE:LINE: PATH: message`` and exits 2, fast.

Each case here was found by a fuzzer; before the fix it crashed with a traceback (exit 1), ran for minutes, or
passed validation and crashed a later command.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobs.cli import main

HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"
GROUP = "nodeGroups:\n  - name: a\n    cloud: aws\n    aws: {region: eu-west-1, cluster: c, nodegroup: n}\n"


def validate(tmp_path: Path, content: str | bytes, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """Run ``gpu-jobs validate`` on ``content``; the exit code and the problem lines, without the file name (a valid
    file's one line, ``PATH: valid: counts``, is not a problem)."""
    path = tmp_path / "policy.yaml"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    code = main(["validate", str(path)])
    out = capsys.readouterr().out
    problems = [line for line in out.splitlines() if not line.startswith(f"{path}: valid: ")]
    return code, [line.removeprefix(f"{path}:") for line in problems]


# --- bytes that are not UTF-8 text --------------------------------------------------------------------------


def test_latin1_byte_is_reported_on_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (HEAD + "defaults:\n  timezone: UTC\n# caf\xe9\n").encode("latin-1")
    assert validate(tmp_path, text, capsys) == (2, ["5: not UTF-8 text: byte 0xe9 (save it as UTF-8)"])


def test_utf16_with_bom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, HEAD.encode("utf-16"), capsys) == (
        2,
        ["1: not UTF-8 text: it starts with a UTF-16/32 byte-order mark (save it as UTF-8)"],
    )


def test_utf16_without_bom_is_caught_by_its_nul_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, HEAD.encode("utf-16-le"), capsys) == (
        2,
        ["1: not UTF-8 text: a NUL character (a binary or UTF-16 file?)"],
    )


def test_nul_byte_on_line_7_is_reported_at_line_7(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  timezone: UTC\n\n\n# x\x00y\n"
    assert validate(tmp_path, text, capsys) == (2, ["7: not UTF-8 text: a NUL character (a binary or UTF-16 file?)"])


def test_binary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, bytes(range(256)) * 4, capsys) == (
        2,
        ["1: not UTF-8 text: a NUL character (a binary or UTF-16 file?)"],
    )
    # Invalid UTF-8 before the first NUL is the first bad byte.
    assert validate(tmp_path, b"kind: x\n\xff\n\x00", capsys) == (
        2,
        ["2: not UTF-8 text: byte 0xff (save it as UTF-8)"],
    )


def test_control_character_is_reported_on_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, HEAD + "defaults:\n  timezone: U\x07TC\n", capsys) == (
        2,
        ["4: not valid YAML: control character U+0007"],
    )


# --- documents that are too large, too deep, or expand without bound ----------------------------------------


def test_file_over_the_size_limit_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + "#" + "x" * 50_000_000 + "\n")
    started = time.monotonic()
    assert main(["validate", str(path)]) == 2
    assert time.monotonic() - started < 1
    assert capsys.readouterr().out == f"{path}:1: larger than the limit of 1024 KiB for a policy file\n"


def test_a_file_just_under_the_limit_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "#" * (1024 * 1024 - len(HEAD) - 1) + "\n"
    assert validate(tmp_path, text, capsys) == (0, [])


def test_recursive_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults: &a\n  holidays: *a\n"
    assert validate(tmp_path, text, capsys) == (2, ["4: recursive alias *a: a value cannot contain itself"])


def test_recursive_alias_in_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, HEAD + "x: &a [1, *a]\n", capsys) == (
        2,
        ["3: recursive alias *a: a value cannot contain itself"],
    )


def test_deep_nesting_is_limited(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  holidays: " + "[" * 3000 + "]" * 3000 + "\n"
    assert validate(tmp_path, text, capsys) == (2, ["4: nested deeper than 100 levels"])


def test_nesting_within_the_limit_is_an_ordinary_type_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  holidays: " + "[" * 90 + "]" * 90 + "\n"
    assert validate(tmp_path, text, capsys) == (
        2,
        ["4: defaults.holidays: list: Input should be a valid dictionary or instance of Holidays"],
    )


def billion_laughs() -> str:
    lines = ['l0: &l0 ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return HEAD + "\n".join(lines) + "\ndefaults:\n  holidays: {dates: *l9}\n"


def test_billion_laughs_is_refused_in_well_under_a_second(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    code, lines = validate(tmp_path, billion_laughs(), capsys)
    elapsed = time.monotonic() - started
    assert (code, lines) == (2, ["7: more than 20000 values (aliases expanded): a policy holds a few hundred"])
    assert elapsed < 1, f"took {elapsed:.2f}s"


def test_aliases_within_the_budget_still_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  holidays: &h {dates: ['2026-12-24']}\n" + GROUP + "    holidays: *h\n"
    assert validate(tmp_path, text, capsys) == (0, [])


def test_duplicate_key_inside_an_alias_is_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  holidays: &h {country: DE, country: FR}\n" + GROUP + "    holidays: *h\n"
    assert validate(tmp_path, text, capsys) == (2, ["4: defaults.holidays.country: duplicate key"])


def test_a_long_list_is_refused_while_reading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  holidays:\n    dates: [" + ", ".join(["2026-01-01"] * 80_000) + "]\n"
    started = time.monotonic()
    assert validate(tmp_path, text, capsys) == (2, ["5: more than 1000 items in one list or mapping"])
    assert time.monotonic() - started < 1


def test_a_newline_in_a_value_does_not_split_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + 'defaults:\n  timezone: "Mars\\nBase"\n'
    assert validate(tmp_path, text, capsys) == (
        2,
        ['4: defaults.timezone: "Mars\\nBase" is not a known IANA timezone (e.g. Europe/Berlin)'],
    )


# --- YAML 1.1 surprises ------------------------------------------------------------------------------------


def test_unquoted_times_are_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 08:00 stays text (YAML 1.1 base-60 integers do not start with 0); 8:00 and 12:00 become 480 and 720.
    text = HEAD + "defaults:\n  workingHours:\n    - {days: Mon-Fri, start: 8:00, end: 12:00}\n"
    assert validate(tmp_path, text, capsys) == (
        2,
        [
            '5: defaults.workingHours[0].end: 12:00 was read by YAML as the number 720: quote times ("12:00")',
            '5: defaults.workingHours[0].start: 8:00 was read by YAML as the number 480: quote times ("08:00")',
        ],
    )


def test_country_no_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, HEAD + "defaults:\n  holidays: {country: NO}\n", capsys) == (
        2,
        ['4: defaults.holidays.country: NO was read by YAML as false: quote it ("NO")'],
    )


def test_quoted_country_no_is_norway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, HEAD + 'defaults:\n  holidays: {country: "NO"}\n', capsys) == (0, [])


# --- values that crashed validate ----------------------------------------------------------------------------


def test_huge_duration_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  warmUp: 99999999999d\n  maxDelay: 8d\n  drainTimeout: 7d\n"
    assert validate(tmp_path, text, capsys) == (
        2,
        [
            '4: defaults.warmUp: "99999999999d" is longer than the limit of 7d',
            '5: defaults.maxDelay: "8d" is longer than the limit of 7d',
        ],
    )


def test_window_duration_is_bounded_at_31_days(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  workingHours:\n    - {cron: '0 0 1 * *', duration: 32d}\n"
    assert validate(tmp_path, text, capsys) == (
        2,
        ['5: defaults.workingHours[0].duration: "32d" is longer than the limit of 31d'],
    )


def test_five_hundred_segment_timezone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  timezone: " + "/".join(["a"] * 500) + "\n"
    assert validate(tmp_path, text, capsys) == (
        2,
        [
            '4: defaults.timezone: "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a…" (999 characters)'
            " is not a known IANA timezone (e.g. Europe/Berlin)"
        ],
    )


@pytest.mark.parametrize("name", ["../../etc/passwd", "zone.tab", "America", "Europe/", "/UTC", " UTC"])
def test_timezone_names_that_are_paths_or_files(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = validate(tmp_path, HEAD + f'defaults:\n  timezone: "{name}"\n', capsys)
    assert code == 2
    assert lines == [f'4: defaults.timezone: "{name}" is not a known IANA timezone (e.g. Europe/Berlin)']


@pytest.mark.parametrize("name", ["Etc/GMT+5", "America/Argentina/Buenos_Aires", "America/Port-au-Prince", "EST5EDT"])
def test_real_timezone_names_still_pass(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, HEAD + f"defaults:\n  timezone: {name}\n", capsys) == (0, [])


# --- values that passed validate and crashed a later command -----------------------------------------------


def window(cron: str) -> str:
    return HEAD + f"defaults:\n  workingHours:\n    - {{cron: '{cron}', duration: 1h}}\n"


def test_cron_that_never_fires(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, window("0 0 30 2 *"), capsys) == (
        2,
        ['5: defaults.workingHours[0].cron: "0 0 30 2 *" never fires (no such date within a year)'],
    )


@pytest.mark.parametrize("cron", ["R 0 * * *", "0 H * * *", "H(0-29) 8 * * 1-5", "0 8 * * r"])
def test_random_or_hashed_cron(cron: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = validate(tmp_path, window(cron), capsys)
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith("5: defaults.workingHours[0].cron: ")


@pytest.mark.parametrize("cron", ["0 0 29 2 *", "0 22 * * FRI", "0 8 * MAR-APR THU", "0 0 L * *", "0 0 * * 5#3"])
def test_crons_that_fire_still_pass(cron: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, window(cron), capsys) == (0, [])


def test_cron_text_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = validate(tmp_path, window("1," * 5000 + "1 * * * *"), capsys)
    assert code == 2
    assert lines[0].endswith('…" (10009 characters) is not a 5-field cron expression (e.g. "0 22 * * 1-5")')


def override(until: str) -> str:
    return HEAD + GROUP + f"overrides:\n  - {{nodeGroup: a, state: up, until: {until}, reason: x}}\n"


@pytest.mark.parametrize(
    ("until", "message"),
    [
        ("'9999-12-31T23:00:00-05:00'", "9999-12-31T23:00:00-05:00 is outside the years 2000-2100"),
        ("'0001-01-01T00:00:00+01:00'", "0001-01-01T00:00:00+01:00 is outside the years 2000-2100"),
        ("0", '0 is not a date-time: write e.g. "2026-12-02T23:00:00+01:00"'),
    ],
)
def test_override_until_is_a_sane_date_time(
    until: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert validate(tmp_path, override(until), capsys) == (2, [f"8: overrides[0].until: {message}"])


def test_unquoted_until_with_offset_still_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(tmp_path, override("2026-12-02T23:00:00+01:00"), capsys) == (0, [])


def test_name_with_a_trailing_newline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + GROUP.replace("name: a", 'name: "vision-t4\\n"')
    assert validate(tmp_path, text, capsys) == (
        2,
        ['4: nodeGroups[0].name: "vision-t4\\n" is not a valid name (lowercase letters, digits and "-", at most 63)'],
    )


@pytest.mark.parametrize("value", ["'08:00\\n'", "' 08:00'"])
def test_clock_with_whitespace_is_not_a_time(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + f'defaults:\n  workingHours:\n    - {{days: Mon-Fri, start: "{value[1:-1]}", end: "20:00"}}\n'
    code, lines = validate(tmp_path, text, capsys)
    assert code == 2
    assert lines[0].endswith("is not a time of day (use HH:MM, 24-hour clock)")


# --- as strict as the published JSON Schema -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpusPerNode", "true", "true: Input should be a valid integer"),
        ("gpusPerNode", "'8'", '"8": Input should be a valid integer'),
        ("alwaysOn", "1", "1: Input should be a valid boolean"),
        ("alwaysOn", "'yes'", '"yes": Input should be a valid boolean'),
        ("up", "{min: false, desired: 1, max: 2}", None),
    ],
)
def test_no_bool_int_or_text_coercion(
    field: str, value: str, message: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = validate(tmp_path, HEAD + GROUP + f"    {field}: {value}\n", capsys)
    assert code == 2
    if message is None:
        assert lines == ["7: nodeGroups[0].up.min: false: Input should be a valid integer"]
    else:
        assert lines == [f"7: nodeGroups[0].{field}: {message}"]


def test_a_number_is_not_a_holiday_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  holidays: {dates: [0, 2026-12-24, '2026-12-31', '1999-12-31']}\n"
    assert validate(tmp_path, text, capsys) == (
        2,
        [
            "4: defaults.holidays.dates[0]: 0 is not a date: write YYYY-MM-DD, e.g. 2026-12-24",
            "4: defaults.holidays.dates[3]: 1999-12-31 is outside the years 2000-2100",
        ],
    )


def test_list_lengths_are_capped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + "defaults:\n  holidays:\n    dates: [" + ", ".join(["2026-01-01"] * 501) + "]\n"
    assert validate(tmp_path, text, capsys) == (2, ["5: defaults.holidays.dates: 501 items: at most 500"])


# --- calendar and schema flags --------------------------------------------------------------------------------

EXAMPLE = "gitops/policy.yaml"


@pytest.mark.parametrize("at", ["9999-12-30T00:00", "0001-01-02T00:00", "0001-01-01T00:00:00+14:00"])
def test_calendar_at_outside_the_supported_years(at: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calendar", "--policy", EXAMPLE, "--at", at]) == 2
    assert f"--at '{at}' is outside the years 2000-2100" in capsys.readouterr().err  # one JSON event: not a TTY


@pytest.mark.parametrize(
    ("days", "message"),
    [
        ("0", "argument --days: 0 is not between 1 and 366"),
        ("-3", "argument --days: -3 is not between 1 and 366"),
        ("99999999", "argument --days: 99999999 is not between 1 and 366"),
        ("seven", "argument --days: 'seven' is not a whole number of days"),
    ],
)
def test_calendar_days_out_of_range(days: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calendar", "--policy", EXAMPLE, "--days", days]) == 2  # with its run.summary
    assert message in capsys.readouterr().err


def test_calendar_of_a_year_is_quick(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["calendar", "--policy", EXAMPLE, "--days", "366", "--at", "2026-12-01T00:00"]) == 0
    elapsed = time.monotonic() - started
    assert capsys.readouterr().out.count("\u2588") > 0
    assert elapsed < 5, f"took {elapsed:.1f}s"  # was quadratic: 1500 days took 51 s


def test_calendar_of_the_last_supported_days(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calendar", "--policy", EXAMPLE, "--days", "366", "--at", "2100-12-31T23:59:00-12:00"]) == 0
    assert "training-a100" in capsys.readouterr().out


def test_calendar_of_a_policy_with_bad_bytes_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(HEAD.encode("utf-16"))
    assert main(["calendar", "--policy", str(path)]) == 2
    assert f"{path}:1: not UTF-8 text" in capsys.readouterr().err


def test_schema_write_creates_missing_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "new" / "dir" / "policy.schema.json"
    assert main(["schema", "--write", str(target)]) == 0
    assert target.read_text() == Path("gitops/policy.schema.json").read_text()


def test_schema_write_to_an_unwritable_place_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["schema", "--write", str(blocker / "policy.schema.json")]) == 2
    assert f"gpu-jobs: cannot write {blocker}/policy.schema.json: " in capsys.readouterr().err
