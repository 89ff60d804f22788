"""``gpu-jobs validate`` imports only what validation needs: no cloud or Kubernetes SDK, no job, no logging library
(structlog pulled in asyncio). Pydantic's plugin discovery is off (PYDANTIC_DISABLE_PLUGINS, jobs/__main__.py): it
imports importlib.metadata but reads no entry points. A job's command module imports no SDK either (its wiring
imports those of the providers the policy names) and nothing only a run that changed something uses.
bench/validate_startup.py measures what it costs; this keeps what it loads from growing back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

NEVER = ("boto3", "botocore", "kubernetes", "google", "azure", "urllib3", "structlog", "asyncio")


#: What only a run that changed something uses: its history (jobs/commands/after_run.py), the Pushgateway's gauges
#: and notifications (never sent by a dry run). A dry run's start-up does not import them.
AFTER_A_CHANGE = ("jobs.history", "jobs.metrics", "jobs.notify")


def imported(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The process ``python -X importtime ARGS`` and the modules it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done, loaded


def test_validate_loads_no_sdk_no_job_and_no_logging_library() -> None:
    done, loaded = imported("-m", "jobs", "validate", "gitops/policy.yaml")
    assert ": valid:" in done.stdout
    assert "jobs.core.policy" in loaded  # the measurement saw the imports
    assert sorted(m for m in loaded if m.split(".")[0] in NEVER or m in NEVER) == []
    jobs = {m for m in loaded if m.startswith("jobs.")}
    assert (
        sorted(
            m
            for m in jobs
            if m.split(".")[1] in ("nodegroups", "quotas", "cloud_quotas", "sweep", "adapters", "runner")
        )
        == []
    )


@pytest.mark.parametrize("command", ["nodegroups", "quotas", "cloud_quotas", "sweep"])
def test_a_job_command_loads_no_sdk_and_nothing_only_a_change_needs(command: str) -> None:
    _, loaded = imported("-c", f"import jobs.commands.{command}")

    assert f"jobs.commands.{command}" in loaded  # the measurement saw the imports
    assert sorted(m for m in loaded if m.split(".")[0] in (*NEVER, "s3transfer")) == []
    assert sorted(m for m in loaded if m in AFTER_A_CHANGE) == []
