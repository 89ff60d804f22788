"""Every shipped CronJob's run ends, undoes what is temporary and reports before Kubernetes kills it: its
``GPU_JOBS_DEADLINE`` plus the margin for start-up and the pod's ending fits inside its ``activeDeadlineSeconds``, in
the base and every overlay (rendered by the real kubectl), and the built-in default fits the smallest of them."""

from __future__ import annotations

import pytest

from jobs.deadline import CRONJOB_MARGIN_S, DEFAULT_DEADLINE_S, NODEGROUPS_DEADLINE_S
from tests.integration.test_deploy import JOBS, TARGETS, env, named, render

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
