"""Every shell block of README.md and docs/*.md is run as typed by some test.

The tests that run a block read it with ``tests.docs.shell_block(page, after)``; this test finds those calls in the
tests' source (literal arguments only, so it can see them) and fails on a block that none of them reads. README's
own promises are checked here too: its length, its two commands and its quickstart link on the first screen.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.docs import ROOT, Block, blocks, code_spans, find_block, pages, shell_block, shell_blocks, tables

HOW = (
    "run it as typed in a test that reads it with tests.docs.shell_block({page!r}, <the heading or words just "
    "before it>) (see tests/integration/test_quickstart.py), or make it a plain ``` block if it is not a command"
)


@functools.cache  # parsing every test module takes seconds; two tests ask
def reader_calls() -> tuple[tuple[Path, int, str, str], ...]:
    """Every ``shell_block(page, after)`` call in the tests: (file, line, page, after)."""
    calls = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        constants = {  # module-level NAME = "text", which a call may pass (PAGE = "docs/quickstart.md")
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name != "shell_block" or path.name == "docs.py":
                continue
            args = [_literal(a, constants) for a in node.args]
            literal = len(args) == 2 and None not in args
            assert literal, (
                f"{path.relative_to(ROOT)}:{node.lineno}: shell_block takes two literal strings (or module-level "
                "constants), so that tests/unit/test_docs.py can see which block the test runs"
            )
            calls.append((path, node.lineno, str(args[0]), str(args[1])))
    return tuple(calls)


def _literal(node: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def read_blocks() -> dict[tuple[str, int], str]:
    """The blocks the tests read, by (page, line), with the test that reads each."""
    read = {}
    for path, line, page, after in reader_calls():
        block = find_block(page, after)
        read[(block.page, block.line)] = f"{path.relative_to(ROOT)}:{line}"
    return read


def test_every_shell_block_of_the_readme_and_the_docs_is_run_by_a_test() -> None:
    read = read_blocks()
    unread: list[Block] = [b for page in pages() for b in shell_blocks(page) if (b.page, b.line) not in read]
    assert not unread, "shell blocks that no test runs:\n" + "\n".join(
        f"  {b.describe()}: {HOW.format(page=b.page)}" for b in unread
    )


def test_the_check_sees_the_readers_and_names_an_unread_block() -> None:
    read = read_blocks()
    assert len(read) >= 10  # README's commands, the quickstart, the pull-request check, one-off runs, the sweep
    readme = find_block("README.md", "# gpu-jobs")
    assert readme.describe() == "README.md:5: the ```bash block under '# gpu-jobs', starting 'make demo       " + (
        "# run the jobs for real against a local sandbox: emulated Kubernetes API, AWS, GCP, Azure, a real Prometheus'"
    )


def test_a_heading_inside_a_block_is_not_a_heading() -> None:
    block = find_block("docs/deploying.md", "## First install of `quotas`")
    assert block.heading == "## First install of `quotas` on a cluster with many namespaces"
    assert block.text.startswith("# 1. What the first run would do")


def test_the_readme_is_the_entry_point() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 400
    first_screen = "\n".join(lines[:60])
    assert "make demo" in first_screen
    assert "make test" in first_screen
    assert "(docs/quickstart.md)" in first_screen


def test_the_readmes_two_commands_are_what_ci_and_the_sandbox_run() -> None:
    """``make test`` is what CI runs (``.ci/run``), ``make demo`` runs the sandbox's demo, which
    tests/integration/test_sandbox.py plays phase by phase. Here: each line is a ``make`` target of this Makefile
    whose recipe resolves (``make -n``: running them inside the suite would run the suite, and the demo, again)."""
    commands = [line.split("#", 1)[0].split() for line in shell_block("README.md", "# gpu-jobs").splitlines()]
    assert commands == [["make", "demo"], ["make", "test"]]
    for command in commands:
        done = subprocess.run([*command[:1], "-n", *command[1:]], cwd=ROOT, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        recipe = done.stdout.splitlines()
        if command[1] == "demo":
            assert recipe[-1] == ".venv/bin/python -m tests.sandbox.demo"
        else:
            assert recipe[-1] == ".venv/bin/pytest -q -n auto --dist loadfile"
            assert any("mkdocs build --strict" in line for line in recipe)
    assert "\nmake test\n" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("page", pages())
def test_every_page_opens_with_its_title(page: str) -> None:
    assert (ROOT / page).read_text().startswith("# ")


def read_variables() -> set[str]:
    """Every ``GPU_JOBS_*`` variable the code reads: named whole, or by the settings helpers without the prefix."""
    names: set[str] = set()
    for path in (ROOT / "jobs").rglob("*.py"):
        source = path.read_text()
        names |= set(re.findall(r"\bGPU_JOBS_[A-Z0-9_]*[A-Z0-9]\b", source))
        for node in ast.walk(ast.parse(source)):
            helper = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""
            if helper in {"env", "env_flag"} or helper.endswith("_setting"):
                names |= {
                    "GPU_JOBS_" + a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and re.fullmatch(r"[A-Z_]+", a.value)
                }
    return names


def test_the_settings_table_names_every_variable_the_code_reads_and_no_other() -> None:
    (rows,) = [t for page in ["docs/output.md"] for t in tables(page) if t and "variable" in t[0]]
    documented = {code_spans(row["variable"])[0] for row in rows}
    read = read_variables()
    assert {"GPU_JOBS_DRY_RUN", "GPU_JOBS_SWEEP_PART", "GPU_JOBS_LEASE_DURATION", "GPU_JOBS_NAMESPACE"} <= read
    assert sorted(read - documented) == [], "read by the code, missing from the settings table of docs/output.md"
    assert sorted(documented - read) == [], "in the settings table of docs/output.md, read nowhere"


def test_the_code_tree_of_development_names_every_package_and_module_of_jobs() -> None:
    entries: dict[str, str] = {}  # first column -> its text, continuation lines included
    last = ""
    for line in find_fenced("docs/development.md", "## The code").splitlines():
        if line.startswith(" "):
            entries[last] += " " + line.strip()
        elif line:
            last, _, text = line.partition(" ")
            entries[last] = text
    packages = {f"jobs/{p.name}/" for p in (ROOT / "jobs").iterdir() if (p / "__init__.py").is_file()}
    assert packages <= set(entries), f"packages missing from the tree: {sorted(packages - set(entries))}"
    modules = {p.name for p in (ROOT / "jobs").glob("*.py")} - {"__init__.py", "__main__.py"}
    named = {m for m in modules if f"jobs/{m}" in entries or re.search(rf"\b{re.escape(m)}\b", entries["jobs/"])}
    assert named == modules, f"modules of jobs/ missing from the tree: {sorted(modules - named)}"


def test_the_layers_table_of_development_is_the_import_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "layers" and "containers" not in c]  # the core's has its own
    expected = [sorted(p.strip() for p in layer.split("|")) for layer in contract["layers"]]
    (rows,) = [t for t in tables("docs/development.md") if t and "layer (top first)" in t[0]]
    assert [sorted(code_spans(row["packages"])) for row in rows] == expected


def find_fenced(page: str, after: str) -> str:
    """The first fenced block of any language after ``after``."""
    block = next(b for b in blocks(page) if b.line > find_line(page, after))
    return block.text


def find_line(page: str, text: str) -> int:
    source = (ROOT / page).read_text()
    return source.count("\n", 0, source.index(text)) + 1


def test_the_policy_reference_lists_every_top_level_section_of_the_schema() -> None:
    schema = json.loads((ROOT / "gitops" / "policy.schema.json").read_text())
    (rows,) = [t for t in tables("docs/policy.md") if t and "section" in t[0]]
    assert [code_spans(row["section"])[0] for row in rows] == [
        key for key in schema["properties"] if key not in {"apiVersion", "kind"}
    ]


def test_the_json_table_says_which_reports_are_one_line() -> None:
    from jobs.envelope import to_json
    from jobs.outcome import Outcome

    (rows,) = [t for t in tables("docs/output.md") if t and "lines" in t[0]]
    documented = {code_spans(row["command"])[0]: row["lines"] for row in rows}
    for command in ("nodegroups", "quotas", "cloud-quotas", "sweep"):
        printed = to_json(command, [], Outcome())
        one_line = len(printed.strip().splitlines()) == 1
        assert (documented[command] == "one") is one_line, f"docs/output.md: `{command}` prints {printed!r}"


def test_the_envelope_is_documented_once_with_every_key_and_kind() -> None:
    from jobs.envelope import API_VERSION, ENVELOPE_KEYS, KINDS

    (keys,) = [t for t in tables("docs/output.md") if t and "key" in t[0] and "what it is" in t[0]]
    assert tuple(code_spans(row["key"])[0].removesuffix("[]") for row in keys) == ENVELOPE_KEYS
    (kinds,) = [t for t in tables("docs/output.md") if t and "`kind`" in t[0]]
    assert tuple(code_spans(row["`kind`"])[0] for row in kinds) == KINDS
    assert API_VERSION in (ROOT / "docs" / "output.md").read_text()


def test_every_relative_link_of_the_readme_leads_to_a_file() -> None:
    """mkdocs --strict checks the links of docs/; README.md is outside it."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/quickstart.md" in local
    assert [link for link in local if not (ROOT / link).is_file()] == []
