"""What ``validate`` says about ``sweep``: the issue's example passes and reads as written; every problem reads
``FILE:LINE: PATH: message`` at the line of the field at fault."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from fractions import Fraction

import pytest

from jobs.core.limits import ChangeLimit
from jobs.core.policy_sweep import LabelNames
from jobs.policy_file import PolicyError, load_policy, parse_policy

HEAD = """\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
"""
# The issue's example, line 3 on.
EXAMPLE = """\
sweep:
  idlePods:
    metric: DCGM_FI_DEV_GPU_UTIL
    below: 5
    window: 2h
    labels: auto
    gracePeriod: 30m
    action: delete
    exempt: {namespaces: [serving], annotation: gpu-jobs/keep-alive}
  leakedMemory: {utilBelow: 1, memoryUsedAbove: 90%}
  untaggedInstances:
    requiredTags: [owner, project]
    scopes:
      - {cloud: aws, regions: [us-east-1]}
    gracePeriod: 24h
    action: stop
    protectTag: gpu-jobs/protect
  limits: {maxActionsPerRun: 10, maxPercentPerRun: 20%}
"""


def errors(section: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(HEAD + textwrap.dedent(section), "policy.yaml")
    return [str(p) for p in raised.value.problems]


def test_the_issue_example_is_valid_and_reads_as_written() -> None:
    sweep = parse_policy(HEAD + EXAMPLE, "policy.yaml").sweep
    assert sweep is not None
    assert sweep.idle_pods is not None
    assert sweep.untagged_instances is not None
    pods = sweep.idle_pods
    assert (pods.window_td, pods.grace, pods.action, pods.labels) == (
        timedelta(hours=2),
        timedelta(minutes=30),
        "delete",
        "auto",
    )
    assert pods.exempt.namespaces == ("serving",)
    assert (pods.max_snooze, pods.max_snooze_td) == ("7d", timedelta(days=7))  # the default: snoozes end
    assert sweep.leaked_memory is not None
    assert sweep.leaked_memory.memory_ratio == Fraction(9, 10)
    instances = sweep.untagged_instances
    assert instances.scopes[0].accounts == ("us-east-1",)
    assert (instances.grace, instances.action) == (timedelta(hours=24), "stop")
    assert sweep.limits.limit == ChangeLimit(count=10, percent=20.0)


def test_max_snooze_reads_as_written() -> None:
    sweep = parse_policy(HEAD + "sweep:\n  idlePods: {maxSnooze: 36h}\n", "policy.yaml").sweep
    assert sweep is not None
    assert sweep.idle_pods is not None
    assert sweep.idle_pods.max_snooze_td == timedelta(hours=36)


def test_the_limits_allow_whichever_is_fewer() -> None:
    limit = ChangeLimit(count=10, percent=20.0)
    assert limit.allowed(20) == 4  # 20% of 20
    assert limit.allowed(500) == 10  # the count
    assert limit.refusal(5, 20, "actions") == (
        "the plan changes 5 actions, more than the limit of 10 and 20% (4 of 20) per run"
        " (raise --max-changes / GPU_JOBS_MAX_CHANGES if this is intended)"
    )


def test_explicit_label_names() -> None:
    sweep = parse_policy(
        HEAD + "sweep:\n  idlePods: {labels: {pod: exported_pod, namespace: exported_namespace}}\n", "p.yaml"
    ).sweep
    assert sweep is not None
    assert sweep.idle_pods is not None
    assert sweep.idle_pods.labels == LabelNames(pod="exported_pod", namespace="exported_namespace")
    assert sweep.idle_pods.action == "annotate"  # the default acts on nothing


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("sweep:\n  idlePods: {metric: DCGM_FI_DEV_SM_ACTIVE}\n", "policy.yaml:4: sweep.idlePods.metric"),
        ("sweep:\n  idlePods: {below: 0}\n", "policy.yaml:4: sweep.idlePods.below"),
        ("sweep:\n  idlePods: {window: 1m}\n", "policy.yaml:4: sweep.idlePods: "),
        ("sweep:\n  idlePods: {action: kill}\n", "policy.yaml:4: sweep.idlePods.action"),
        ("sweep:\n  idlePods: {gracePeriod: soon}\n", "policy.yaml:4: sweep.idlePods.gracePeriod"),
        ("sweep:\n  leakedMemory: {memoryUsedAbove: 90%}\n", "policy.yaml:3: sweep: "),
        (
            "sweep:\n  idlePods: {}\n  leakedMemory: {memoryUsedAbove: 190%}\n",
            "policy.yaml:5: sweep.leakedMemory: ",
        ),
        ("sweep:\n  untaggedInstances: {requiredTags: []}\n", "policy.yaml:4: sweep.untaggedInstances.requiredTags"),
        (
            "sweep:\n  untaggedInstances:\n    requiredTags: [owner]\n    scopes: [{cloud: gcp, regions: [x]}]\n",
            "policy.yaml:6: sweep.untaggedInstances.scopes[0]: ",
        ),
        ("sweep:\n  untaggedInstances: {requiredTags: [owner], action: delete}\n", "untaggedInstances.action"),
        ("sweep:\n  limits: {maxActionsPerRun: -1}\n", "policy.yaml:4: sweep.limits.maxActionsPerRun"),
        ("sweep:\n  limits: {maxPercentPerRun: lots}\n", "policy.yaml:4: sweep.limits.maxPercentPerRun"),
        ("sweep:\n  idlePods: {treshold: 5}\n", "policy.yaml:4: sweep.idlePods.treshold"),
        ("sweep:\n  idlePods: {maxSnooze: forever}\n", "policy.yaml:4: sweep.idlePods.maxSnooze"),
        ("sweep:\n  idlePods: {maxSnooze: 40d}\n", "policy.yaml:4: sweep.idlePods.maxSnooze"),
        ("sweep:\n  idlePods: {maxSnooze: 0m}\n", "policy.yaml:4: sweep.idlePods.maxSnooze"),
    ],
)
def test_problems_name_file_line_and_path(section: str, expected: str) -> None:
    problems = errors(section)
    assert any(p.startswith(expected) or expected in p for p in problems), problems


def test_the_shipped_example_policy_has_a_sweep_and_a_prometheus_for_every_cluster() -> None:
    policy = load_policy("gitops/policy.yaml")
    assert policy.sweep is not None
    assert policy.sweep.idle_pods is not None
    assert policy.sweep.untagged_instances is not None
    assert all(c.prometheus is not None and c.prometheus.matchers == {"cluster": c.name} for c in policy.fleet)
