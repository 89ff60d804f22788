"""A SIGTERM (or Ctrl-C) at any moment of a real ``gpu-jobs`` process ends with exactly one ``run.summary`` whose
``exit_code`` is the process's: during start-up, while it plans, while it writes, and after the summary.

Each moment is reached for sure, not by timing: start-up when ``run.started`` is logged (before the policy is read),
planning and writing while the Kubernetes emulator holds the run's first list or first write (a :class:`Gate`).
The one moment reached by repetition is the exit after the summary (a few milliseconds): retried until hit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.docs import shell_block
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node, namespace
from tests.envelope import items
from tests.integration.cli import LiveCli, start_cli, summaries_of

pytestmark = pytest.mark.integration

POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults: {timezone: Europe/Berlin}
    clusters:
      - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}}
    namespaceQuotas:
      default: {nvidia.com/gpu: 0}
      exclude: [kube-system, kube-public, kube-node-lease, default, gpu-jobs]
      rules:
        - namespaces: ["team-*"]
          hard: {nvidia.com/gpu: 4}
    """)
TEAMS = ("team-a", "team-b", "team-c")
STOPPED = "not started: the run was asked to stop"


@pytest.fixture
def cluster(kube: KubeHandle) -> KubeHandle:
    for name in ("gpu-jobs", *TEAMS):
        kube.create(namespace(name))
    kube.create(gpu_node("gpu-1"))
    kube.identify("ml-prod")
    kube.log.clear()
    return kube


def quotas(kube: KubeHandle, tmp_path: Path, *args: str) -> LiveCli:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {"KUBECONFIG": str(kube.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", "GPU_JOBS_WORKERS": "1"}
    return start_cli(["--log-level", "debug", "quotas", "--policy", str(policy), "--output", "json", *args], env)


def ended(run: LiveCli) -> tuple[int, dict[str, Any], str, str]:
    """Exit code, the one summary, stdout, stderr."""
    code, stdout, stderr = run.finish()
    summaries = summaries_of(stderr)
    assert len(summaries) == 1, stderr
    assert summaries[0]["exit_code"] == code, stderr
    return code, summaries[0], stdout, stderr


def events(stderr: str, name: str) -> list[dict[str, Any]]:
    return [e for line in stderr.splitlines() if line.startswith("{") and (e := json.loads(line))["event"] == name]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_during_start_up_ends_at_once_with_a_failed_summary_and_nothing_written(
    cluster: KubeHandle, tmp_path: Path, signum: signal.Signals
) -> None:
    run = quotas(cluster, tmp_path)
    run.wait_for("run.started")  # logged before the policy is read or the cluster reached
    run.send(signum)
    code, summary, stdout, _ = ended(run)
    assert code == 1
    assert summary["stopped"] == signum.name
    assert summary["reason"] == f"stopped by {signum.name} during start-up: nothing was changed"
    assert (summary["applied"], summary["failed"]) == (0, 0)
    assert cluster.log.writes() == []
    assert stdout == ""  # no report: there was no run to report on


def test_a_stop_while_planning_starts_no_write_and_says_why_for_every_item(cluster: KubeHandle, tmp_path: Path) -> None:
    gate = cluster.emulator.hold("list namespaces")
    run = quotas(cluster, tmp_path)
    assert gate.arrived.wait(60)
    run.send(signal.SIGTERM)
    gate.open()
    code, summary, stdout, stderr = ended(run)
    assert (code, summary["stopped"], summary["failed"], summary["applied"]) == (1, "SIGTERM", 3, 0)
    assert cluster.log.writes() == []  # not even the Lease
    report = json.loads(stdout)
    assert {(n["namespace"], n["status"], n["reason"]) for n in items(report, "namespace quota")} == {
        (team, "failed", STOPPED) for team in TEAMS
    }
    assert sorted((e["namespace"], e["error"]) for e in events(stderr, "quota.failed")) == [
        (team, STOPPED) for team in TEAMS
    ]


def test_a_stop_while_writing_finishes_the_write_under_way_and_starts_no_other(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    gate = cluster.emulator.hold("patch resourcequotas")
    run = quotas(cluster, tmp_path)  # one worker: the other two namespaces wait behind the held write
    assert gate.arrived.wait(60)
    run.send(signal.SIGTERM)
    gate.open()
    code, summary, stdout, stderr = ended(run)
    assert (code, summary["stopped"], summary["applied"], summary["failed"]) == (1, "SIGTERM", 1, 2)
    statuses = sorted(
        (n["status"], n["reason"] if n["status"] == "failed" else "")
        for n in items(json.loads(stdout), "namespace quota")
    )
    assert statuses == [("applied", ""), ("failed", STOPPED), ("failed", STOPPED)]
    assert len(events(stderr, "quota.failed")) == 2
    assert [r.method for r in cluster.log.writes() if "resourcequotas" in r.path] == ["PATCH"]
    lease = cluster.get("Lease", "gpu-jobs-quotas-ml-prod", "gpu-jobs", "coordination.k8s.io/v1")
    assert lease is not None
    assert not lease["spec"].get("holderIdentity")  # given back on the way out


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_signals_after_the_summary_leave_the_exit_code_it_states(
    cluster: KubeHandle, tmp_path: Path, signum: signal.Signals
) -> None:
    # The moment after the summary is the process's exit, a few milliseconds: a run whose exit beat the first signal
    # is run again (every run must end as its summary says), at most 5 times, until signals landed in that moment.
    sent = 0
    for attempt in range(5):
        run = quotas(cluster, tmp_path)
        summary = run.wait_for("run.summary")
        sent = run.send_until_exit(signum)  # from the summary's line to the process's last instant
        code, _, _ = run.finish()
        applied = 3 if attempt == 0 else 0  # the first run writes the three quotas, a run again finds them so
        assert (code, summary["exit_code"], summary["applied"], summary["stopped"]) == (0, 0, applied, None)
        if sent > 0:
            break
    assert sent > 0


def test_the_pages_start_up_stop_runs_as_typed(tmp_path: Path) -> None:
    block = shell_block("docs/run-summary.md", "To see a start-up stop for yourself")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # gpu-jobs
    run = ["bash", "-c", block]
    done = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "exit code 1", done.stderr
    (summary,) = summaries_of(done.stderr)
    assert (summary["job"], summary["exit_code"], summary["stopped"]) == ("validate", 1, "SIGTERM")
    assert list(tmp_path.iterdir()) == []  # the pipe removed
