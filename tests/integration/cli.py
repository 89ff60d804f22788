"""``gpu-jobs`` as its CronJob runs it, for the integration tests: a process of this venv's Python, JSON logs on
stderr (the ``run.summary`` event among them), the report on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GPU_JOBS = (sys.executable, "-m", "jobs", "--log-format", "json")


@dataclass(frozen=True)
class CliRun:
    code: int
    summary: dict[str, Any]
    stdout: str
    stderr: str


def summary_of(stderr: str) -> dict[str, Any]:
    """The run's ``run.summary`` event: every run ends with one, whatever happened."""
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    summary: dict[str, Any] = next(e for e in events if e["event"] == "run.summary")
    return summary


def run_cli(args: Sequence[str], env: Mapping[str, str]) -> CliRun:
    """``gpu-jobs ARGS`` with ``env`` on top of this process's environment."""
    done = subprocess.run(
        [*GPU_JOBS, *args], env={**os.environ, **env}, capture_output=True, text=True, check=False, timeout=120
    )
    return CliRun(done.returncode, summary_of(done.stderr), done.stdout, done.stderr)
