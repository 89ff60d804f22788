"""Retries cut by the run's deadline, through the CLI: an API that throttles every quota write would be retried for
the retry deadline (120 s); the run's deadline (3 s here) ends the retries, each quota fails with a reason starting
``deadline:``, and the run reports, logs its summary and exits 1 in seconds. The next run, with the API well again,
writes them."""

from __future__ import annotations

from pathlib import Path

from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.quotas.test_quotas_job import cluster, quotas

__all__ = ["cluster"]  # the fixture


def test_throttled_writes_are_retried_until_the_run_deadline_and_fail_with_its_reason(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    cluster.inject("patch resourcequotas", "throttle", times=100_000)
    env = {"GPU_JOBS_DEADLINE": "3", "GPU_JOBS_RETRY_DEADLINE": "120", "GPU_JOBS_WORKERS": "1"}

    code, summary, out = quotas(cluster, tmp_path, env=env)

    assert (code, summary["exit_code"], summary["applied"], summary["failed"]) == (1, 1, 0, 3)
    assert summary["duration_s"] < 30  # the run's deadline, not the retries' 120 s
    reasons = [line.split("error: ", 1)[1] for line in out.splitlines() if line.strip().startswith("error: ")]
    assert len(reasons) == 3, out
    assert all(r.startswith("deadline: ") for r in reasons), reasons
    assert any("ran out retrying" in r for r in reasons), reasons  # the one being retried when time ran out
    assert cluster.get("ResourceQuota", "gpu-quota", "team-a") is None

    cluster.emulator.faults.clear()
    code, summary, _ = quotas(cluster, tmp_path)
    assert (code, summary["applied"], summary["failed"]) == (0, 3, 0)
