"""``gpu-jobs sweep``'s settings, before anything is read: which parts run, the limit, the Prometheus override."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobs.cli import COMMANDS, main
from jobs.commands import sweep
from jobs.commands.reconcile import Run
from jobs.core.limits import ChangeLimit
from jobs.core.policy import Policy
from jobs.deadline import Deadline
from jobs.runner import RunSettings
from jobs.settings import SettingsError
from tests.unit.policies import policy_from

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "gitops" / "policy.yaml")
CLUSTER = "clusters:\n  - {name: ml, cloud: aws, aws: {region: eu-west-1, cluster: ml}}\n"
PODS = "  idlePods: {action: delete}\n"
INSTANCES = "  untaggedInstances: {requiredTags: [owner]}\n"


def run_of(policy: Policy, part: str | None = None) -> Run:
    args = argparse.Namespace(policy="policy.yaml", part=part, cluster=None)
    return Run(args, policy, datetime(2026, 12, 2, 15, tzinfo=UTC), RunSettings())


def test_both_parts_when_omitted_each_only_with_its_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPU_JOBS_SWEEP_PART", raising=False)
    assert sweep.parts(run_of(policy_from(CLUSTER + "sweep:\n" + PODS + INSTANCES))) == ("pods", "instances")
    assert sweep.parts(run_of(policy_from(CLUSTER + "sweep:\n" + INSTANCES))) == ("instances",)
    assert sweep.parts(run_of(policy_from(CLUSTER + "sweep:\n" + PODS), "pods")) == ("pods",)
    monkeypatch.setenv("GPU_JOBS_SWEEP_PART", "instances")
    assert sweep.parts(run_of(policy_from(CLUSTER + "sweep:\n" + PODS + INSTANCES))) == ("instances",)


@pytest.mark.parametrize(
    ("body", "part", "words"),
    [
        (CLUSTER, None, "has no sweep section"),
        (CLUSTER + "sweep:\n" + INSTANCES, "pods", "--part pods: policy.yaml has no sweep.idlePods"),
        (CLUSTER + "sweep:\n" + PODS, "instances", "has no sweep.untaggedInstances"),
        (CLUSTER + "sweep:\n" + PODS, "nodes", "--part='nodes': use one of pods, instances"),
    ],
)
def test_a_part_without_its_section_is_a_settings_error(body: str, part: str | None, words: str) -> None:
    with pytest.raises(SettingsError, match=words.replace(".", r"\.")):
        sweep.parts(run_of(policy_from(body), part))


def test_the_limit_defaults_to_the_policys_sweep_limits() -> None:
    limits = "  limits: {maxActionsPerRun: 3, maxPercentPerRun: 10%}\n"
    assert sweep.default_limit(policy_from(CLUSTER + "sweep:\n" + PODS + limits)) == ChangeLimit(3, 10.0)
    assert sweep.default_limit(policy_from(CLUSTER + "sweep:\n" + PODS)) == ChangeLimit(10, 20.0)
    assert sweep.SPEC.default_limit(policy_from(CLUSTER + "sweep:\n" + PODS)).allowed(100) == 10
    assert sweep.SPEC.default_limit(policy_from(CLUSTER + "sweep:\n" + PODS)).allowed(20) == 4


def test_the_prometheus_override_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPU_JOBS_PROMETHEUS_URL", raising=False)
    assert sweep.prometheus_url() is None
    monkeypatch.setenv("GPU_JOBS_PROMETHEUS_URL", "http://127.0.0.1:9090")
    assert sweep.prometheus_url() == "http://127.0.0.1:9090"
    monkeypatch.setenv("GPU_JOBS_PROMETHEUS_URL", "http://user:secret@thanos:9090")
    with pytest.raises(SettingsError, match="GPU_JOBS_PROMETHEUS_URL"):
        sweep.prometheus_url()


def test_sweep_is_a_command_and_a_bad_part_is_exit_2_naming_the_flag_typed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GPU_JOBS_SWEEP_PART", raising=False)
    assert "sweep" in COMMANDS
    assert main(["--log-format", "json", "sweep", "--policy", EXAMPLE, "--part", "gpus", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--part='gpus': use one of pods, instances" in err
    assert "sweep-part" not in err
    monkeypatch.setenv("GPU_JOBS_SWEEP_PART", "gpus")  # the variable, when that is what was set
    assert main(["--log-format", "json", "sweep", "--policy", EXAMPLE, "--dry-run"]) == 2
    assert "GPU_JOBS_SWEEP_PART='gpus': use one of pods, instances" in capsys.readouterr().err


def test_kube_ports_cover_both_parts() -> None:
    assert set(sweep.KUBE_PORTS) == set(sweep.KUBE_PORTS_PODS) | set(sweep.KUBE_PORTS_INSTANCES)
    assert "pods" in sweep.KUBE_PORTS_PODS
    assert "lease" in sweep.KUBE_PORTS_INSTANCES


def test_a_run_reaches_its_clusters_through_one_configuration_bounded_by_its_deadline() -> None:
    """The wiring, the notifications and the history share the run's one Kubernetes configuration (the kubeconfig
    read once), and no request of it may outlast the reserve at the end of the run's deadline: the history and the
    notifications are written after the work, when little of the deadline is left."""
    deadline = Deadline.start(60)
    run = Run(
        argparse.Namespace(),
        policy_from(CLUSTER),
        datetime(2026, 12, 2, 15, tzinfo=UTC),
        RunSettings(deadline=deadline),
    )
    assert run.kubeconfig is run.kubeconfig
    assert run.kubeconfig.timeout_s == min(30.0, max(1.0, deadline.reserve_s)) < 30.0
