"""``gpu-jobs validate`` imports only what validation needs: no cloud or Kubernetes SDK, no job, no logging library
(structlog pulled in asyncio). Pydantic's plugin discovery is off (PYDANTIC_DISABLE_PLUGINS, jobs/__main__.py): it
imports importlib.metadata but reads no entry points. bench/validate_startup.py measures
what it costs; this keeps what it loads from growing back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

NEVER = ("boto3", "botocore", "kubernetes", "google", "azure", "urllib3", "structlog", "asyncio")


def test_validate_loads_no_sdk_no_job_and_no_logging_library() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "jobs", "validate", "gitops/policy.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert ": valid:" in done.stdout
    loaded = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
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
