"""The layers contracts cover the whole package and the core, and an import in the wrong direction breaks them."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = ROOT / ".tools" / "lint" / "bin" / "lint-imports"


def _layers(pyproject: Path, container: str | None = None) -> list[str]:
    """The layers of the package's contract, or of the one inside ``container``."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    layers: list[str] = next(
        c["layers"] for c in contracts if c["type"] == "layers" and c.get("containers", [None]) == [container]
    )
    return layers


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS)],
        check=False,
        cwd=tree,
        env={"PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_module_of_the_package_has_a_layer() -> None:
    named = {name.strip() for layer in _layers(ROOT / "pyproject.toml") for name in layer.split("|")}
    present = {
        f"jobs.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "jobs").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert present - named == set(), "add these to the layers contract in pyproject.toml"
    assert named - present == set(), "these layers name modules that do not exist"


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="make install builds the import-linter venv")
def test_a_job_importing_its_command_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    job = tmp_path / "jobs" / "new_job"
    job.mkdir()
    (job / "__init__.py").write_text("from jobs.commands import reconcile  # wrong way: a job driving its command\n")
    text = (ROOT / "pyproject.toml").read_text().replace('"jobs.nodegroups | ', '"jobs.nodegroups | jobs.new_job | ')
    (tmp_path / "pyproject.toml").write_text(text)
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "jobs.new_job -> jobs.commands.reconcile" in done.stdout


def test_every_module_of_the_core_has_a_layer() -> None:
    # lint-imports checks this too (exhaustive = true); said here so a new module fails with the fix in the message.
    named = {name.strip() for layer in _layers(ROOT / "pyproject.toml", "jobs.core") for name in layer.split("|")}
    present = {p.stem for p in (ROOT / "jobs" / "core").glob("*.py") if p.stem != "__init__"}
    assert present - named == set(), "add these to the core's layers contract in pyproject.toml"
    assert named - present == set(), "the core's layers contract names modules that do not exist"


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="make install builds the import-linter venv")
@pytest.mark.parametrize(
    ("leaf", "above"),
    [
        ("timespec", "policy"),  # the time-spec parser importing the policy model: the old circle
        ("quantity", "resolved"),  # a value type importing the resolved view
        ("policy", "resolved"),  # the model deriving its own view (Policy.resolved)
        ("schedule", "policy"),  # the schedule engine reading the policy (desired_state)
    ],
)
def test_a_core_module_importing_a_higher_layer_breaks_the_contract(tmp_path: Path, leaf: str, above: str) -> None:
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    module = tmp_path / "jobs" / "core" / f"{leaf}.py"
    module.write_text(module.read_text() + f"\nfrom jobs.core import {above}  # noqa: E402 - the wrong way\n")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "Core layers" in done.stdout
    assert "BROKEN" in done.stdout
    assert f"jobs.core.{leaf} -> jobs.core.{above}" in done.stdout
