"""A job on account scopes (not shipped: it lives in this test) runs on the one loop with its state in the install's
own cluster: records in ConfigMaps and a Lease per account in the job's namespace of the emulated Kubernetes API,
the accounts faked at their port. Dry run, the Lease, the limit across accounts, a stop, and the exit codes come
from the runner; the job below writes none of that."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.lease import LeaseLock
from jobs.adapters.kube.state import ConfigMapState
from jobs.core.limits import ChangeLimit
from jobs.lease import RunLock
from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import parse_policy
from jobs.runner import STOPPED_BEFORE, Reconcile, RunSettings, ScopeReport, ScopeWork, Tally, Witness, outcome
from jobs.scopes import Scope, account_scopes
from jobs.stopping import STOP
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace
from tests.fakes import RecordingLog as Log

pytestmark = pytest.mark.integration
NOW = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)
SUB = "00000000-0000-0000-0000-000000000001"
POLICY = f"""\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
clusters:
  - {{name: ml-prod, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod}}}}
  - {{name: research, cloud: gcp, gcp: {{project: ml-research, location: europe-west4, cluster: research}}}}
  - {{name: aks-ml, cloud: azure, azure: {{subscription: {SUB}, resourceGroup: rg-ml, cluster: aks-ml}}}}
nodeGroups:
  - {{name: train, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}}}}
  - {{name: batch, cloud: aws, aws: {{region: us-east-1, autoScalingGroup: batch-g5}}, cluster: ml-prod}}
"""
FLOOR = 8  # every quota of every account should be at least this


@dataclass
class Account:
    """One cloud account's GPU quotas, at its port: what a cloud-quotas job would read and raise."""

    quotas: dict[str, int]
    raised: list[str] = field(default_factory=list)

    def raise_to(self, quota: str, value: int) -> None:
        self.quotas[quota] = value
        self.raised.append(quota)


@dataclass(frozen=True)
class Asked:
    value: int


class Requests:
    """The codec of this job's records: what it asked for, per quota, in the install's cluster."""

    kind = "test-request"

    def __init__(self, scope: Scope, quotas: tuple[str, ...]) -> None:
        self.scope, self.quotas = scope, quotas

    def keys(self) -> dict[str, str]:
        return {q: f"gpu-jobs-test-{self.scope.slug}-{q}" for q in self.quotas}

    def encode(self, key: str, value: Asked) -> tuple[dict[str, str], dict[str, str]]:
        return {}, {"asked.json": json.dumps({"value": value.value})}

    def decode(self, key: str, name: str, data: Mapping[str, str]) -> Asked:
        return Asked(json.loads(data["asked.json"])["value"])


@dataclass(frozen=True)
class Plan:
    items: tuple[str, ...]  # the quotas to raise
    considered: int

    @property
    def changes(self) -> int:
        return len(self.items)


@dataclass
class FloorJob(ScopeWork[tuple[tuple[str, int], ...], Plan, str, str]):
    scope: Scope
    cloud: Account
    state: ConfigMapState[Asked]
    lease: LeaseLock
    stop_after_first: bool = False
    _written: int = 0
    _guard: threading.Lock = field(default_factory=threading.Lock)

    @property
    def lock(self) -> RunLock:
        return self.lease

    @property
    def witness(self) -> Witness | None:
        return None  # no ports: the fake answers the runner itself

    def observe(self, first: tuple[tuple[str, int], ...] | None) -> tuple[tuple[str, int], ...]:
        self.state.load()  # the records' versions, for the writes below
        return tuple(sorted(self.cloud.quotas.items()))

    def plan(self, observed: tuple[tuple[str, int], ...]) -> Plan:
        return Plan(tuple(q for q, v in observed if v < FLOOR), len(observed))

    def apply(self, item: str, fence: Callable[[str], None]) -> str:
        fence(f"raise {item}")
        self.state.save(item, Asked(FLOOR))  # durable before the cloud is asked
        self.cloud.raise_to(item, FLOOR)
        with self._guard:
            self._written += 1
            if self.stop_after_first:
                STOP.set()
        return f"{item}: raised"

    def failed(self, item: str, message: str) -> str:
        return f"{item}: failed ({message})"


@pytest.fixture
def api(kube: KubeHandle, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    kube.create(namespace("gpu-jobs"))
    return api_client()


@pytest.fixture
def accounts() -> dict[str, Account]:
    return {
        "aws/eu-west-1": Account({"p-ondemand": 0, "g-ondemand": 16}),
        "aws/us-east-1": Account({"g-spot": 4}),
        "gcp/ml-research": Account({"h100": 0}),
        f"azure/{SUB}": Account({"ncads-a100": 8}),
    }


def run(
    api: Any, accounts: dict[str, Account], *, limit: str = "10", dry_run: bool = False, workers: int = 8, **job: Any
) -> tuple[list[ScopeReport[Plan, str]], Outcome]:
    scopes = account_scopes(parse_policy(POLICY, "policy.yaml"))
    work = {
        s: FloorJob(
            s,
            accounts[s.name],
            ConfigMapState(api, "gpu-jobs", Requests(s, tuple(accounts[s.name].quotas))),
            LeaseLock(api, "gpu-jobs", f"gpu-jobs-test-{s.slug}"),
            **job,
        )
        for s in scopes
    }
    settings = RunSettings(dry_run=dry_run, limit=ChangeLimit.parse(limit), workers=workers, holder="test-run")
    runner: Reconcile[Any, Plan, str, str] = Reconcile(work, settings, NOW, Log(), "quotas")
    reports = runner.run()
    tallies = [
        Tally(
            planned=len(r.plan.items) if r.plan else 0,
            applied=sum(x.endswith("raised") for x in r.results),
            failed=sum("failed" in x for x in r.results) + (r.state == "failed"),
            refused=r.state == "refused",
        )
        for r in reports
    ]
    return reports, outcome(tallies, dry_run=dry_run)


def test_account_scopes_come_from_the_policy_each_once(accounts: dict[str, Account]) -> None:
    scopes = account_scopes(parse_policy(POLICY, "policy.yaml"))
    assert [(s.kind, s.name, s.context) for s in scopes] == [("account", name, None) for name in sorted(accounts)]


def test_a_dry_run_writes_nothing_anywhere(kube: KubeHandle, api: Any, accounts: dict[str, Account]) -> None:
    kube.log.clear()
    reports, result = run(api, accounts, dry_run=True)
    assert [r.state for r in reports] == ["planned"] * 4
    assert (result.exit_code, result.planned) == (ExitCode.OK, 3)
    assert kube.log.writes() == []
    assert all(not a.raised for a in accounts.values())


def test_a_run_raises_records_in_the_install_cluster_and_a_second_run_plans_nothing(
    kube: KubeHandle, api: Any, accounts: dict[str, Account]
) -> None:
    reports, result = run(api, accounts)
    assert (result.exit_code, result.applied) == (ExitCode.OK, 3)
    assert [r.state for r in reports] == ["applied", "applied", "planned", "applied"]  # azure: at its floor
    saved = {cm["metadata"]["name"] for cm in kube.list("ConfigMap", "gpu-jobs")}
    assert saved == {
        "gpu-jobs-test-aws-eu-west-1-p-ondemand",
        "gpu-jobs-test-aws-us-east-1-g-spot",
        "gpu-jobs-test-gcp-ml-research-h100",
    }
    leases = {lease["metadata"]["name"] for lease in kube.list("Lease", "gpu-jobs")}
    assert leases == {"gpu-jobs-test-aws-eu-west-1", "gpu-jobs-test-aws-us-east-1", "gpu-jobs-test-gcp-ml-research"}
    assert all(not (lease["spec"].get("holderIdentity")) for lease in kube.list("Lease", "gpu-jobs"))  # released
    kube.log.clear()
    again, second = run(api, accounts)
    assert [r.state for r in again] == ["planned"] * 4
    assert (second.exit_code, kube.log.writes()) == (ExitCode.OK, [])


def test_one_limit_across_accounts_refuses_everything(kube: KubeHandle, api: Any, accounts: dict[str, Account]) -> None:
    reports, result = run(api, accounts, limit="2")
    assert result.exit_code == ExitCode.REFUSED
    assert "the plan changes 3 quotas across 4 accounts, more than the limit of 2" in (reports[0].reason or "")
    assert all(not a.raised for a in accounts.values())


def test_a_lease_held_by_another_run_leaves_that_account_alone(
    kube: KubeHandle, api: Any, accounts: dict[str, Account]
) -> None:
    other = LeaseLock(api, "gpu-jobs", "gpu-jobs-test-gcp-ml-research")
    assert other.acquire("manual-run", datetime.now(UTC), timedelta(minutes=30)) is None
    reports, result = run(api, accounts)
    assert [(r.scope.name, r.state, r.reason) for r in reports if r.state == "locked"] == [
        ("gcp/ml-research", "locked", "manual-run")
    ]
    assert accounts["gcp/ml-research"].quotas["h100"] == 0
    assert accounts["aws/us-east-1"].quotas["g-spot"] == FLOOR
    assert result.exit_code == ExitCode.OK  # a live run holds it: that run is acting


def test_a_stop_ends_the_run_with_what_was_not_done_failed(
    kube: KubeHandle, api: Any, accounts: dict[str, Account]
) -> None:
    only = {"aws/eu-west-1": Account({"p-ondemand": 0, "g-ondemand": 0})}  # two quotas to raise in one account
    try:
        reports, result = run(
            api, only | dict.fromkeys(accounts.keys() - only.keys(), Account({})), workers=1, stop_after_first=True
        )
    finally:
        STOP.clear()
    (aws,) = [r for r in reports if r.scope.name == "aws/eu-west-1"]
    assert aws.results == ("g-ondemand: raised", f"p-ondemand: failed ({STOPPED_BEFORE})")
    assert (result.exit_code, result.failed) == (ExitCode.ITEM_FAILED, 1)
    assert only["aws/eu-west-1"].raised == ["g-ondemand"]
