"""Each outside system is reached one way: its SDK is imported only by that system's adapter package, and the
Kubernetes client only by ``jobs/adapters/kube/client.py`` (the other kube modules call the API through it).

The import contracts in pyproject.toml keep SDKs out of the core and the runner; this keeps each SDK inside its
own package, read from the sources (an import inside a function counts too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

JOBS = Path(__file__).resolve().parents[2] / "jobs"

#: SDK (top-level module) -> the only place under jobs/ allowed to import it.
HOMES = {
    "kubernetes": "adapters/kube/client.py",
    "botocore": "adapters/aws/",
    "google": "adapters/gcp/",
    "azure": "adapters/azure/",
}


def imported_modules(source: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def importers(sdk: str) -> set[str]:
    return {
        path.relative_to(JOBS).as_posix()
        for path in JOBS.rglob("*.py")
        if any(name == sdk or name.startswith(f"{sdk}.") for name in imported_modules(path))
    }


@pytest.mark.parametrize("sdk", HOMES)
def test_each_sdk_is_imported_only_by_its_own_adapter(sdk: str) -> None:
    found = importers(sdk)

    assert found  # the SDK is still used, and the scan sees it
    assert {path for path in found if not path.startswith(HOMES[sdk])} == set()


#: Installed with the SDKs, imported by no module under jobs/: boto3 (and the s3transfer it imports) would cost every
#: AWS run's start time for nothing the jobs use (aws/session.py creates botocore's clients directly).
NOWHERE = ("boto3", "s3transfer")


@pytest.mark.parametrize("module", NOWHERE)
def test_modules_no_job_needs_are_imported_nowhere(module: str) -> None:
    assert importers(module) == set()


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from kubernetes import client\n    import boto3.session\n")

    assert imported_modules(module) == {"kubernetes", "boto3.session"}
