"""The layers contract covers the whole package, and a job added in the wrong direction breaks it."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = ROOT / ".tools" / "lint" / "bin" / "lint-imports"


def _layers(pyproject: Path) -> list[str]:
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    layers: list[str] = next(c["layers"] for c in contracts if c["type"] == "layers")
    return layers


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
    done = subprocess.run(
        [str(LINT_IMPORTS)],
        check=False,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout
    assert "jobs.new_job -> jobs.commands.reconcile" in done.stdout
