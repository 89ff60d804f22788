"""``gpu-jobs diff BASE CHANGE``: what a policy change does, section by section, over a fixed reference week (the
same figures whenever CI runs): the pull-request comment."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from jobs import errors
from jobs.core.policy import Policy
from jobs.core.policy_diff import (
    NamespaceChange,
    PolicyDiff,
    Week,
    diff_policies,
    namespace_changes,
    quota_target_changes,
    reference_week,
)
from jobs.diff import cloud, report
from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import load_policy
from jobs.runner import identity_refusal
from jobs.scopes import cluster_scopes
from jobs.settings import SettingsError, env, parse_at

_RENDER = {"text": report.to_text, "json": report.to_json, "markdown": report.to_markdown}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", help="the policy before the change (e.g. from git show origin/main:gitops/policy.yaml)")
    parser.add_argument("change", help="the policy after the change")
    parser.add_argument(
        "--at",
        help="count the hours over the ISO week (Mon-Mon, policy timezone) containing this date-time instead of the"
        " fixed reference week 2026-W24",
    )
    parser.add_argument("--output", choices=sorted(_RENDER), default="text")
    parser.add_argument(
        "--cluster", default=env("CLUSTER"), metavar="NAME", help="only this cluster's node groups and quota rules"
    )
    parser.add_argument(
        "--namespaces",
        action="store_true",
        help="also read each cluster's namespaces (read-only: every cluster with a kubeContext, or --cluster through"
        " the current context) and list those whose quota changes",
    )
    parser.add_argument(
        "--cloud-quotas",
        action="store_true",
        help="also read the node groups that changed cloud quota targets count, and their shapes (read-only), to give"
        " those targets in the quota's unit (vCPU, GPUs) instead of nodes",
    )


def with_namespaces(
    before: Policy, after: Policy, diff: PolicyDiff, week: Week, cluster: str | None, log: Any
) -> tuple[PolicyDiff, int]:
    """The diff with the namespaces whose quota changes, per cluster read; and how many clusters could not be read."""
    # The Kubernetes client only when asked: a plain diff runs where no cluster is reachable (CI).
    from jobs.adapters.kube import client, identity, quotas  # noqa: PLC0415

    changes: list[NamespaceChange] = []
    read: list[tuple[str, int]] = []
    failed = 0
    kube = client.Kubeconfig()  # read once for every cluster
    for target in cluster_scopes(after, cluster, log):
        api = kube.client(target.context, cluster=target.name)
        try:
            # Another cluster's namespaces would list the wrong ones in a pull request: its API proves it first.
            refusal = identity_refusal(
                target, identity.ClusterWitness(api, client.job_namespace(), target.context).witness()
            )
            if refusal is not None:
                failed += 1
                log.error("diff.wrong_cluster", cluster=target.name, reason=refusal)
                continue
            namespaces = quotas.KubeQuotas(api).namespaces()
        except errors.CloudError as exc:
            failed += 1
            log.error("diff.namespaces_unreadable", cluster=target.name, error=str(exc))
            continue
        read.append((target.name, len(namespaces)))
        changes += namespace_changes(before, after, target.name, namespaces, week)
    return replace(diff, namespaces=tuple(changes), namespaces_read=tuple(read)), failed


def with_cloud_quotas(before: Policy, after: Policy, diff: PolicyDiff, log: Any) -> tuple[PolicyDiff, int]:
    """The diff with its derived cloud quota targets in the quota's unit; and how many entries could not be read."""
    # The cloud SDKs only when asked, and only those of the clouds the changed entries name.
    from jobs.adapters.settings import AdapterSettings  # noqa: PLC0415
    from jobs.commands.cloud_quotas import quota_cloud  # noqa: PLC0415

    settings = AdapterSettings.from_env()
    clouds: dict[str, cloud.ShapeReader] = {}

    def reader(name: str) -> cloud.ShapeReader:
        if name not in clouds:
            clouds[name] = quota_cloud(name, settings)
        return clouds[name]

    read, failed = cloud.read_conversions(before, after, diff.quota_targets, reader, log)
    targets = quota_target_changes(before, after, diff.cluster, read)
    return replace(diff, quota_targets=targets, quota_targets_read=True), failed


def run(args: argparse.Namespace, log: Any) -> Outcome:
    before, after = load_policy(args.base), load_policy(args.change)
    cluster = args.cluster or None
    known = {c.name for p in (before, after) for c in p.fleet}
    if cluster and cluster not in known:
        raise SettingsError(f"--cluster / GPU_JOBS_CLUSTER {cluster!r} is not a cluster of either policy")
    week = reference_week(after, parse_at(args.at, after.defaults.timezone))
    diff = diff_policies(before, after, week, cluster)
    failed = 0
    if args.namespaces:
        diff, failed = with_namespaces(before, after, diff, week, cluster, log)
    if args.cloud_quotas and diff.quota_targets:
        diff, unread = with_cloud_quotas(before, after, diff, log)
        failed += unread
    print(_RENDER[args.output](diff, args.base, args.change), end="")
    log.info(
        "diff.done",
        week=week.start.isoformat(),
        node_groups_changed=len(diff.schedules),
        quota_changes=len(diff.quotas),
        sections_changed=[s.name for s in diff.sections],
        namespaces_changed=sum(len(n.namespaces) for n in diff.namespaces),
        cloud_quota_targets_changed=[c.name for c in diff.quota_targets],
    )
    # A cluster or a quota's groups that could not be read is a failed item: the diff shown is missing them.
    return Outcome(
        ExitCode.ITEM_FAILED if failed else ExitCode.OK,
        planned=len(diff.schedules) + len(diff.quotas) + len(diff.node_group_fields),
        failed=failed,
    )
