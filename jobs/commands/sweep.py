"""``gpu-jobs sweep``: idle GPU pods and leaked VRAM in each cluster (``--part pods``), GPU instances missing their
owner tags in each account (``--part instances``); both when ``--part`` is omitted, in one run with one limit."""

from __future__ import annotations

import argparse
import os
from typing import Any

from jobs.adapters.settings import AdapterSettings
from jobs.commands.notifications import NOTIFY_PORTS
from jobs.commands.reconcile import JobSpec, Run, add_concurrency_arguments, construct
from jobs.core.limits import ChangeLimit
from jobs.core.policy import Policy
from jobs.core.policy_fields import check_url
from jobs.core.policy_sweep import Sweep
from jobs.envelope import ScopeResult
from jobs.labels import SWEEP_INSTANCES_LEASE, SWEEP_PODS_LEASE
from jobs.retry import Backoff
from jobs.runner import ScopeReport, ScopeWork
from jobs.scopes import Scope, account_scopes, cluster_scopes
from jobs.settings import SettingsError, add_run_arguments, choice_setting, seconds_setting
from jobs.sweep import instances, pods, report
from jobs.sweep.ports import Instances, Metrics

#: The ``jobs.adapters.kube`` modules each part is wired with: each CronJob's ServiceAccount is granted exactly the
#: union of their ``RBAC`` (checked against the rendered Roles by tests/integration/test_deploy.py). The pods part
#: writes to the pods of its cluster (annotations, deletes, the owners' scale, Events); the instances part keeps only
#: its Lease in the install's cluster (its marks are the clouds' tags).
KUBE_PORTS_PODS = ("identity", "pods", "lease", "history", *NOTIFY_PORTS)
KUBE_PORTS_INSTANCES = ("lease", "secrets", "history")  # secrets: notify (an instance has no namespace); history
#: Added where ``idlePods.action`` is ``scale-owner`` (kustomize/components/sweep-scale-owner): apps writes for no one
#: else.
KUBE_PORTS_SCALE_OWNER = ("owners",)
KUBE_PORTS = tuple(dict.fromkeys(KUBE_PORTS_PODS + KUBE_PORTS_INSTANCES))

PARTS = ("pods", "instances")
PROMETHEUS_URL = "GPU_JOBS_PROMETHEUS_URL"
#: Which adapter serves which cloud (``module:Class``, each taking ``AdapterSettings``), imported on first use: a
#: pods-only install never imports a cloud SDK, an AWS-only policy never the Google one. Each module declares its
#: ``PERMISSIONS`` (tests/unit/test_permissions.py: the IAM documents grant exactly those).
INSTANCE_ADAPTERS = {
    "aws": "jobs.adapters.aws.instances:AwsInstances",
    "gcp": "jobs.adapters.gcp.instances:GcpInstances",
    "azure": "jobs.adapters.azure.instances:AzureInstances",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(
        parser, "actions (delete, scale the owner, stop, terminate)", "the sweep", default="the policy's sweep.limits"
    )
    parser.add_argument(
        "--part",
        metavar="pods|instances",
        help="sweep only idle pods (per cluster) or only untagged instances (per account); both when omitted"
        " [GPU_JOBS_SWEEP_PART]",
    )
    add_concurrency_arguments(parser, "pods or instances", 8)


def parts(run: Run) -> tuple[str, ...]:
    """The parts this run sweeps: the one ``--part`` names (its policy section must exist), else those the policy
    has a section for."""
    section = run.policy.sweep
    if section is None:
        raise SettingsError(f"{run.args.policy} has no sweep section: nothing for the sweep job to do")
    chosen = choice_setting(getattr(run.args, "part", None), "SWEEP_PART", "", PARTS, option="--part")
    present = {"pods": section.idle_pods is not None, "instances": section.untagged_instances is not None}
    if chosen:
        if not present[chosen]:
            missing = "sweep.idlePods" if chosen == "pods" else "sweep.untaggedInstances"
            raise SettingsError(f"--part {chosen}: {run.args.policy} has no {missing}")
        return (chosen,)
    return tuple(p for p in PARTS if present[p])


def prometheus_url() -> str | None:
    url = os.environ.get(PROMETHEUS_URL) or None
    if url is None:
        return None
    try:
        return check_url(url)
    except ValueError as exc:
        raise SettingsError(f"{PROMETHEUS_URL}={url!r}: {exc}") from None


def _pods_work(run: Run, section: Sweep, backoff: Backoff, log: Any) -> dict[Scope, pods.SweepPodsWork]:
    # The Kubernetes client is imported only by the jobs, not by validate or calendar.
    from jobs.adapters.kube import client, events, identity, lease  # noqa: PLC0415
    from jobs.adapters.kube.pods import KubePods  # noqa: PLC0415
    from jobs.adapters.prometheus import PrometheusMetrics  # noqa: PLC0415

    idle = section.idle_pods
    assert idle is not None
    adapters = AdapterSettings.from_env(run.settings.deadline)
    override = prometheus_url()
    work = {}
    # One client per Prometheus: a shared Thanos (or GPU_JOBS_PROMETHEUS_URL) serves every cluster through one pool.
    clients: dict[str, Metrics] = {}
    kube = run.kubeconfig  # read once for every cluster of the run
    for scope in cluster_scopes(run.policy, run.args.cluster or None, log):
        source = run.policy.cluster(scope.name).prometheus
        url = override or (source.url if source is not None else None)
        api = kube.client(scope.context, cluster=scope.name)
        if url is not None and url not in clients:
            clients[url] = PrometheusMetrics(url, adapters)
        metrics = clients.get(url) if url is not None else None
        namespace = client.job_namespace()
        ports = pods.Ports(
            metrics,
            KubePods(api),
            lease.LeaseLock(api, namespace, _lease(SWEEP_PODS_LEASE, scope)),
            identity.ClusterWitness(api, namespace, scope.context),
            events.KubeEvents(api, "sweep", log.bind(cluster=scope.name, part="pods")),
        )
        work[scope] = pods.SweepPodsWork(
            scope,
            idle,
            section.leaked_memory,
            dict(source.matchers) if source is not None else {},
            run.now,
            backoff,
            ports,
            log.bind(cluster=scope.name, part="pods"),
            no_metrics=f"cluster {scope.name} has no prometheus.url in the policy and {PROMETHEUS_URL} is not set:"
            " nothing is judged idle",
        )
    return work


def _lease(prefix: str, scope: Scope) -> str:
    return f"{prefix}-{scope.slug}"


def _instances_work(run: Run, section: Sweep, backoff: Backoff, log: Any) -> dict[Scope, ScopeWork[Any, Any, Any, Any]]:
    from jobs.adapters.kube import client, lease  # noqa: PLC0415

    untagged = section.untagged_instances
    assert untagged is not None
    adapters = AdapterSettings.from_env(run.settings.deadline)
    api = run.kubeconfig.client()  # the install's own cluster: account state lives there
    namespace = client.job_namespace()
    scopes = account_scopes(run.policy, extra=instances.extra_scopes(untagged))
    clouds: dict[str, Instances] = {
        cloud: construct(INSTANCE_ADAPTERS[cloud], adapters) for cloud in sorted({s.cloud for s in scopes if s.cloud})
    }
    work: dict[Scope, ScopeWork[Any, Any, Any, Any]] = {}
    for scope in scopes:
        assert scope.cloud is not None
        ports = instances.Ports(
            clouds[scope.cloud], lease.LeaseLock(api, namespace, _lease(SWEEP_INSTANCES_LEASE, scope))
        )
        work[scope] = instances.SweepInstancesWork(
            scope, untagged, run.now, backoff, ports, log.bind(scope=scope.name, part="instances")
        )
    return work


def _wire(run: Run, log: Any) -> dict[Scope, ScopeWork[Any, Any, Any, Any]]:
    chosen = parts(run)
    section = run.policy.sweep
    assert section is not None
    backoff = Backoff(deadline_s=seconds_setting("RETRY_DEADLINE", 120.0), run=run.settings.deadline)
    work: dict[Scope, ScopeWork[Any, Any, Any, Any]] = {}
    if "pods" in chosen:
        work.update(_pods_work(run, section, backoff, log))
    if "instances" in chosen:
        work.update(_instances_work(run, section, backoff, log))
    return work


def _view(envelope: ScopeReport[Any, Any], run: Run) -> ScopeResult:
    if envelope.scope.kind == "cluster":
        return report.pods_result(pods.report_of(envelope))
    return report.instances_result(instances.report_of(envelope))


def default_limit(policy: Policy) -> ChangeLimit:
    """``sweep.limits``: maxActionsPerRun and maxPercentPerRun, whichever allows fewer."""
    return policy.sweep.limits.limit if policy.sweep is not None else ChangeLimit()


SPEC = JobSpec(
    name="sweep",
    noun="actions",
    default_workers=8,
    wire=_wire,
    view=_view,
    nothing="gpu-jobs sweep: no cluster or account to sweep",
    default_limit=default_limit,
)
run = SPEC.run
