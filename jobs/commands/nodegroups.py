"""``gpu-jobs nodegroups``: converge every GPU node group to the state its schedule wants now."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from jobs.adapters.settings import AdapterSettings
from jobs.commands.notifications import NOTIFY_PORTS
from jobs.commands.reconcile import JobSpec, Run, add_concurrency_arguments
from jobs.core.policy import Policy
from jobs.core.providers import ProviderKind
from jobs.core.resolved import view_of
from jobs.envelope import ScopeResult
from jobs.nodegroups import job
from jobs.nodegroups import report as render
from jobs.nodegroups.observe import identities
from jobs.nodegroups.ports import NodeGroupCloud
from jobs.nodegroups.settings import NodeGroupsSettings, Ports
from jobs.retry import Backoff
from jobs.scopes import Scope, cluster_scopes
from jobs.settings import SettingsError, add_run_arguments, env, seconds_setting

if TYPE_CHECKING:
    from jobs.adapters.kube.client import Kubeconfig

#: The ``jobs.adapters.kube`` modules this job is wired with: its ServiceAccount is granted exactly the union of
#: their ``RBAC`` (checked against the rendered Roles by tests/integration/test_deploy.py).
# records: a kind of state (kube/state.py); history: jobs/commands/after_run.py
KUBE_PORTS = ("identity", "workloads", "records", "events", "lease", "karpenter", "history", *NOTIFY_PORTS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, "node groups", "the schedule")
    parser.add_argument("--only", default=env("ONLY"), metavar="GROUP", help="one node group only [GPU_JOBS_ONLY]")
    add_concurrency_arguments(parser, "groups", 16)


def _clouds(kinds: set[ProviderKind], settings: AdapterSettings) -> dict[ProviderKind, NodeGroupCloud]:
    # SDKs are imported here, and only for the provider kinds the policy uses.
    from jobs.commands.nodegroup_clouds import nodegroup_cloud  # noqa: PLC0415

    return {kind: nodegroup_cloud(kind, settings) for kind in sorted(kinds)}


def _ports(
    policy: Policy,
    scope: Scope,
    clouds: dict[ProviderKind, NodeGroupCloud],
    kube: Kubeconfig,
    log: Any,
    adapters: AdapterSettings,
) -> Ports:
    """One cluster's ports, through a client of its own (its context, or the in-cluster / current config)."""
    from jobs.adapters.kube import client, events, identity, lease, records, workloads  # noqa: PLC0415
    from jobs.labels import nodegroups_lease  # noqa: PLC0415

    api = kube.client(scope.context, cluster=scope.name)
    namespace = client.job_namespace()
    known = identities(policy, scope.name)
    from jobs.commands.nodegroup_clouds import nodegroup_cloud  # noqa: PLC0415
    from jobs.core.providers import PROVIDERS  # noqa: PLC0415

    # A kind reached through the cluster's own API (Karpenter) acts on this cluster only, through its client.
    own = {kind: nodegroup_cloud(kind, adapters, api) for kind in clouds if PROVIDERS[kind].cloud is None}
    return Ports(
        clouds={**clouds, **own},
        cluster=workloads.KubeCluster(api),
        records=records.ConfigMapRecords(api, namespace, known),
        lock=lease.LeaseLock(api, namespace, nodegroups_lease(scope.name)),
        events=events.KubeEvents(api, "nodegroups", log),
        witness=identity.ClusterWitness(api, namespace, scope.context),
    )


def _settings(run: Run, adapters: AdapterSettings, only: str | None, cluster: str) -> NodeGroupsSettings:
    return NodeGroupsSettings(
        run=run.settings,
        only=only,
        cluster=cluster,
        # Well inside the CronJob's activeDeadlineSeconds, with room for the writes: a cloud that is down fails the
        # run after minutes, and the next run tries again.
        backoff=Backoff(deadline_s=seconds_setting("RETRY_DEADLINE", 180.0), run=run.settings.deadline),
        drain_poll_s=adapters.poll_interval_s,
        settle_timeout_s=adapters.operation_timeout_s,
    )


def _wire(run: Run, log: Any) -> dict[Scope, job.NodeGroupsWork]:
    policy, args = run.policy, run.args
    only = args.only or None  # an empty value in a manifest means "not set", never "match nothing"
    if only and only not in {g.name for g in policy.node_groups}:
        raise SettingsError(f"--only {only!r}: no such node group in {args.policy}")
    scopes = [
        s
        for s in cluster_scopes(policy, args.cluster or None, log)
        if only is None or policy.cluster_of(policy.group(only)).name == s.name
    ]
    adapters = AdapterSettings.from_env(run.settings.deadline)
    groups = [g for s in scopes for g in policy.groups_in(s.name) if only in (None, g.name)]
    clouds = _clouds({view_of(policy).group(g.name).kind for g in groups}, adapters)
    kube = run.kubeconfig  # read once for every cluster of the run
    return {
        s: job.NodeGroupsWork(
            policy,
            run.now,
            _settings(run, adapters, only, s.name),
            _ports(policy, s, clouds, kube, log.bind(cluster=s.name), adapters),
            log.bind(cluster=s.name),
        )
        for s in scopes
    }


def _view(envelope: job.Envelope, run: Run) -> ScopeResult:
    settings = NodeGroupsSettings(only=run.args.only or None, cluster=envelope.scope.name)
    return render.result(render.report_of(envelope, run.policy, settings))


SPEC = JobSpec(
    name="nodegroups",
    noun="node groups",
    default_workers=16,
    wire=_wire,
    view=_view,
    nothing="gpu-jobs nodegroups: no cluster to act on (the policy has no node groups in reach)",
)
run = SPEC.run
