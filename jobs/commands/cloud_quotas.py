"""``gpu-jobs cloud-quotas``: keep each cloud GPU quota of ``cloudQuotas`` at or above its target by filing
increase requests before they are needed, and follow them until the cloud decides."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.adapters.settings import AdapterSettings
from jobs.cloud_quotas import job
from jobs.cloud_quotas import report as render
from jobs.cloud_quotas.asked import RequestCodec
from jobs.cloud_quotas.ports import QuotaCloud
from jobs.commands.reconcile import JobSpec, Run, add_concurrency_arguments, construct
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.envelope import ScopeResult, result_of
from jobs.labels import CLOUD_QUOTAS_LEASE
from jobs.retry import Backoff
from jobs.scopes import Scope, account
from jobs.settings import SettingsError, add_run_arguments, seconds_setting

#: The ``jobs.adapters.kube`` modules this job is wired with: its ServiceAccount is granted exactly the union of
#: their ``RBAC`` (checked against the rendered Roles by tests/integration/test_deploy.py).
KUBE_PORTS = ("state", "events", "lease")
#: Which adapter serves which cloud; imported on first use, so an AWS-only policy never imports the Google SDK.
QUOTA_ADAPTERS = {
    "aws": "jobs.adapters.aws.quotas:AwsQuotas",
    "gcp": "jobs.adapters.gcp.quotas:GcpQuotas",
    "azure": "jobs.adapters.azure.quotas:AzureQuotas",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # No --cluster: cloud quotas belong to accounts, and their state lives in this install's own cluster.
    add_run_arguments(parser, "quota requests", "the quota targets", clusters=False)
    add_concurrency_arguments(parser, "quotas", 4)


def quota_cloud(cloud: str, settings: AdapterSettings) -> QuotaCloud:
    adapter: QuotaCloud = construct(QUOTA_ADAPTERS[cloud], settings)
    return adapter


def scopes_of(entries: tuple[CloudQuota, ...]) -> dict[Scope, tuple[CloudQuota, ...]]:
    """The account scopes the entries name, each with its entries in policy order."""
    found: dict[Scope, list[CloudQuota]] = {}
    for entry in entries:
        found.setdefault(account(entry.cloud, entry.scope_name), []).append(entry)
    return {scope: tuple(found[scope]) for scope in sorted(found)}


def _wire(run: Run, log: Any) -> dict[Scope, job.CloudQuotasWork]:
    policy = run.policy
    if not policy.cloud_quotas:
        raise SettingsError(f"{run.args.policy} has no cloudQuotas: nothing for the cloud-quotas job to do")
    # The Kubernetes client and the cloud SDKs are imported only by the jobs, not by validate or calendar.
    from jobs.adapters.kube import client, events, lease, state  # noqa: PLC0415

    adapters = AdapterSettings.from_env(run.settings.deadline)
    api = run.kubeconfig.client()  # the install's own cluster: account state lives there
    namespace = client.job_namespace()
    backoff = Backoff(deadline_s=seconds_setting("RETRY_DEADLINE", 180.0), run=run.settings.deadline)
    scoped = scopes_of(policy.cloud_quotas)
    clouds = {cloud: quota_cloud(cloud, adapters) for cloud in sorted({s.cloud for s in scoped if s.cloud})}
    work = {}
    for scope, entries in scoped.items():
        assert scope.cloud is not None
        codec = RequestCodec(e.name for e in entries)
        ports = job.Ports(
            clouds[scope.cloud],
            state.ConfigMapState(api, namespace, codec),
            lease.LeaseLock(api, namespace, f"{CLOUD_QUOTAS_LEASE}-{scope.slug}"),
            events.KubeEvents(api, "cloud-quotas", log.bind(scope=scope.name)),
        )
        work[scope] = job.CloudQuotasWork(scope, policy, entries, run.now, backoff, ports, log.bind(scope=scope.name))
    return work


def _view(envelope: job.Envelope, run: Run) -> ScopeResult:
    report = job.report_of(envelope)
    return result_of("cloud-quotas", envelope, render.items(report), render.rows(report))


SPEC = JobSpec(
    name="cloud-quotas",
    noun="quota requests",
    default_workers=4,
    wire=_wire,
    view=_view,
    nothing="gpu-jobs cloud-quotas: no cloudQuotas in the policy",
)
run = SPEC.run
