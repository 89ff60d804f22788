"""Every shipped CronJob's run ends, undoes what is temporary and reports before Kubernetes kills it: its
``GPU_JOBS_DEADLINE`` plus the margin for start-up and the pod's ending fits inside its ``activeDeadlineSeconds``, in
the base and every overlay (rendered by the real kubectl), and the built-in default fits the smallest of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.deadline import CRONJOB_MARGIN_S, DEFAULT_DEADLINE_S, NODEGROUPS_DEADLINE_S
from tests.docs import shell_block
from tests.integration.test_deploy import JOBS, ROOT, TARGETS, env, named, render

pytestmark = pytest.mark.integration


def _deadlines(target: str) -> dict[str, tuple[float, int]]:
    """Each CronJob's (run deadline, activeDeadlineSeconds) as rendered."""
    objects = render(target)
    found = {}
    for job in JOBS:
        spec = named(objects, "CronJob", job)["spec"]["jobTemplate"]["spec"]
        found[job] = (float(env(objects, job)["GPU_JOBS_DEADLINE"]), int(spec["activeDeadlineSeconds"]))
    return found


@pytest.mark.parametrize("target", TARGETS)
def test_each_cronjob_run_deadline_fits_inside_its_active_deadline(target: str) -> None:
    for job, (deadline, active) in _deadlines(target).items():
        assert deadline + CRONJOB_MARGIN_S <= active, f"{target} {job}: {deadline:g} s + margin > {active} s"
        assert deadline >= active / 2, f"{target} {job}: a deadline far below the Job's wastes the run's time"


def test_the_built_in_default_fits_the_smallest_cronjob() -> None:
    smallest = min(active for target in TARGETS for _, active in _deadlines(target).values())
    assert smallest >= DEFAULT_DEADLINE_S + CRONJOB_MARGIN_S


@pytest.mark.parametrize("target", TARGETS)
def test_validate_checks_drain_timeouts_against_the_shipped_nodegroups_deadline(target: str) -> None:
    assert _deadlines(target)["nodegroups"][0] == NODEGROUPS_DEADLINE_S


def test_the_example_policy_fits_the_nodegroups_deadline_as_the_docs_check_it() -> None:
    script = shell_block("docs/deadline.md", "To check against the deadline of your own nodegroups CronJob")
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"  # gpu-jobs of this venv
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "gitops/policy.yaml: valid: " in done.stdout
    assert "warning" not in done.stdout  # every drainTimeout of the example fits the shipped CronJob's deadline
