"""``validate`` warns when a node group's drain (``drainTimeout``) and the scale-down after it cannot fit in the
nodegroups run's deadline: the deadline would cut such a drain short every night. A warning (exit 0), named by
``FILE:LINE: PATH`` like every other ``validate`` message, at the drainTimeout a person would change."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.cli import main
from jobs.policy_file import check_policy

POLICY = """\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
defaults:
  timezone: Europe/Berlin
  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]
  drainTimeout: 10m
nodeGroups:
  - name: short
    cloud: aws
    aws: {region: eu-west-1, cluster: c, nodegroup: a}
  - name: long
    cloud: aws
    aws: {region: eu-west-1, cluster: c, nodegroup: b}
    onBusy: drain
    drainTimeout: 30m
  - name: never-drains
    cloud: aws
    aws: {region: eu-west-1, cluster: c, nodegroup: c}
    onBusy: force
    drainTimeout: 2h
  - name: waits-then-stays
    cloud: aws
    aws: {region: eu-west-1, cluster: c, nodegroup: d}
    afterDelay: stay
    drainTimeout: 2h
"""


def warnings(text: str, deadline_s: float) -> list[str]:
    return [str(w) for w in check_policy(text, "policy.yaml", deadline_s=deadline_s).warnings]


def test_a_drain_longer_than_the_run_is_named_at_its_drain_timeout() -> None:
    # The nodegroups CronJob's 1440 s: 1380 s for waits. 30m + 5m does not fit; 10m + 5m does; a group that never
    # drains (force, or stay after its delay) has no drain to fit.
    assert warnings(POLICY, 1440) == [
        "policy.yaml:15: nodeGroups[1].drainTimeout: warning: drainTimeout 30m plus about 5m for the scale-down does"
        " not fit in the nodegroups run's deadline (1440 s, 23m of it for waits): such a drain would be cut short,"
        " leaving the group up until a later run gets through it; lower drainTimeout, or raise GPU_JOBS_DEADLINE"
        " with the CronJob's activeDeadlineSeconds (docs/deadline.md)"
    ]


def test_a_default_many_groups_inherit_is_named_once_at_the_default() -> None:
    found = warnings(POLICY, 600)  # 540 s for waits: 10m + 5m does not fit either
    assert [w.split(": warning:")[0] for w in found] == [
        "policy.yaml:6: defaults.drainTimeout",
        "policy.yaml:15: nodeGroups[1].drainTimeout",
    ]


def test_a_deadline_long_enough_warns_of_nothing() -> None:
    assert warnings(POLICY, 3600) == []


@pytest.mark.parametrize(
    ("args", "env", "warned"), [((), {}, 1), (("--deadline", "600"), {}, 2), ((), {"GPU_JOBS_DEADLINE": "3600"}, 0)]
)
def test_validate_prints_the_warning_and_exits_0(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    env: dict[str, str],
    warned: int,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    assert main(["validate", str(path), *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(": warning: drainTimeout" in line for line in lines) == warned
    assert lines[-1].startswith(f"{path}: valid: 4 node groups")
