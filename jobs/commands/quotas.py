"""``gpu-jobs quotas``: make every namespace's GPU ResourceQuota what the policy says, in each cluster."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from jobs.commands.reconcile import JobSpec, Run, add_concurrency_arguments
from jobs.envelope import ScopeResult
from jobs.quotas import job
from jobs.quotas import report as render
from jobs.retry import Backoff
from jobs.scopes import Scope, cluster_scopes
from jobs.settings import SettingsError, add_run_arguments, seconds_setting

if TYPE_CHECKING:
    from jobs.adapters.kube.client import Kubeconfig

#: The ``jobs.adapters.kube`` modules this job is wired with: its ServiceAccount is granted exactly the union of
#: their ``RBAC`` (checked against the rendered Roles by tests/integration/test_deploy.py).
KUBE_PORTS = ("identity", "quotas", "lease")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, "namespace quotas", "off-hours limits")
    add_concurrency_arguments(parser, "quotas written", 8)


def _ports(scope: Scope, kube: Kubeconfig, log: Any) -> job.Ports:
    from jobs.adapters.kube import client, events, identity, lease, quotas  # noqa: PLC0415

    api = kube.client(scope.context, cluster=scope.name)
    namespace = client.job_namespace()
    lock = lease.LeaseLock(api, namespace, f"gpu-jobs-quotas-{scope.slug}")
    witness = identity.ClusterWitness(api, namespace, scope.context)
    return job.Ports(quotas.KubeQuotas(api), lock, events.KubeEvents(api, "quotas", log), witness)


def _wire(run: Run, log: Any) -> dict[Scope, job.QuotasWork]:
    policy, s = run.policy, run.settings
    if policy.namespace_quotas is None:
        raise SettingsError(f"{run.args.policy} has no namespaceQuotas: nothing for the quotas job to do")
    # The Kubernetes client is imported only by the jobs, not by validate or calendar.
    from jobs.adapters.kube.client import Kubeconfig  # noqa: PLC0415

    kube = Kubeconfig(s.deadline.request_timeout(seconds_setting("REQUEST_TIMEOUT", 30.0, minimum=0.1)))
    backoff = Backoff(deadline_s=seconds_setting("RETRY_DEADLINE", 120.0), run=s.deadline)
    return {
        scope: job.QuotasWork(
            policy,
            run.now,
            job.QuotasSettings(scope.name, backoff),
            _ports(scope, kube, log.bind(cluster=scope.name)),
            log.bind(cluster=scope.name),
        )
        for scope in cluster_scopes(policy, run.args.cluster or None, log)
    }


def _view(envelope: job.Envelope, run: Run) -> ScopeResult:
    return render.result(envelope)


SPEC = JobSpec(
    name="quotas",
    noun="namespace quotas",
    default_workers=8,
    wire=_wire,
    view=_view,
    nothing="gpu-jobs quotas: no cluster to act on",
)
run = SPEC.run
