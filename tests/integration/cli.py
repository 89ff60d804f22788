"""``gpu-jobs`` as its CronJob runs it, for the integration tests: a process of this venv's Python, JSON logs on
stderr (the ``run.summary`` event among them), the report on stdout. :func:`run_cli` forks it from the tests' fork
server (:mod:`tests.forkserver`: the imports paid once); :func:`start_cli` (the signal tests) starts the real one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests import forkserver

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
    done = forkserver.run(
        [*GPU_JOBS, *args], env={**os.environ, **env}, capture_output=True, text=True, check=False, timeout=120
    )
    return CliRun(done.returncode, summary_of(done.stderr), done.stdout, done.stderr)


def summaries_of(stderr: str) -> list[dict[str, Any]]:
    """Every ``run.summary`` event of a run: there must be exactly one."""
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [e for e in events if e["event"] == "run.summary"]


@dataclass
class LiveCli:
    """``gpu-jobs ARGS`` running, for a test that acts at a known moment of the run (when an event is logged, or
    while the run waits on a request an emulator holds), then reads how it ended."""

    process: subprocess.Popen[str]
    stderr_lines: list[str]

    def wait_for(self, event: str) -> dict[str, Any]:
        """Read the logs until ``event`` is logged; the process goes on meanwhile."""
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line)
            if line.startswith("{") and (logged := json.loads(line))["event"] == event:
                return dict(logged)
        raise AssertionError(f"{event} never logged:\n{''.join(self.stderr_lines)}")

    def send(self, signum: int) -> None:
        self.process.send_signal(signum)

    def send_until_exit(self, signum: int) -> int:
        """Send ``signum`` again and again until the process has exited: every moment from now on is hit."""
        sent = 0
        while self.process.poll() is None:
            self.process.send_signal(signum)
            sent += 1
        return sent

    def finish(self) -> tuple[int, str, str]:
        """Its exit code, stdout and whole stderr."""
        stdout, rest = self.process.communicate(timeout=120)
        return self.process.returncode, stdout, "".join(self.stderr_lines) + rest


def start_cli(args: Sequence[str], env: Mapping[str, str]) -> LiveCli:
    """``gpu-jobs ARGS`` started, not waited for (``env`` on top of this process's environment)."""
    process = subprocess.Popen(
        [*GPU_JOBS, *args], env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return LiveCli(process, [])
