"""The quotas job when the world moves between its lists and its writes: a namespace deleted (or being deleted)
after it was listed is a skip, not a failure. Real adapters against the Kubernetes API emulator; the race is
injected at the job's store port, which deletes the namespace through the API just before the job writes to it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.lease import LeaseLock
from jobs.adapters.kube.quotas import KubeQuotas
from jobs.envelope import tally
from jobs.outcome import ExitCode
from jobs.policy_file import parse_policy
from jobs.quotas import job
from jobs.quotas import report as render
from jobs.runner import Reconcile, RunSettings, outcome
from jobs.scopes import cluster
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace
from tests.fakes import RecordingLog as Log
from tests.integration.quotas.test_quotas_job import POLICY

pytestmark = pytest.mark.integration
DAY = datetime.fromisoformat("2026-12-01T12:00:00+01:00")


class DeletedOnWrite(KubeQuotas):
    """The real store; the first write to ``victim`` finds the namespace deleted a moment before."""

    def __init__(self, api: Any, victim: str) -> None:
        super().__init__(api)
        self.victim, self.core = victim, client.CoreV1Api(api)

    def apply(self, namespace: str, name: str, hard: dict[str, str]) -> None:
        if namespace == self.victim:
            self.core.delete_namespace(namespace)
        super().apply(namespace, name, hard)


@pytest.mark.parametrize(("termination_s", "why"), [(0.0, "404 namespaces not found"), (3600.0, "403 terminating")])
def test_a_namespace_deleted_after_the_lists_is_a_skip(
    kube: KubeHandle, monkeypatch: pytest.MonkeyPatch, termination_s: float, why: str
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    for name in ("gpu-jobs", "team-a", "team-gone"):
        kube.create(namespace(name))
    kube.cluster.namespace_termination_s = termination_s
    api = api_client()
    ports = job.Ports(
        DeletedOnWrite(api, "team-gone"),
        LeaseLock(api, "gpu-jobs", "gpu-jobs-quotas-ml-prod"),
        KubeEvents(api, "quotas", Log()),
    )
    work = job.QuotasWork(parse_policy(POLICY, "policy.yaml"), DAY, job.QuotasSettings("ml-prod"), ports, Log())
    scope = Reconcile({cluster("ml-prod"): work}, RunSettings(), DAY, Log(), "namespace quotas").run()[0]
    report = job.report_of(scope)
    assert {r.entry.namespace: r.status for r in report.results} == {"team-a": "applied", "team-gone": "skipped"}
    assert outcome([tally(render.result(scope))], dry_run=False).exit_code == ExitCode.OK, why
