"""``gpu-jobs diff BASE CHANGE``: what a policy change does, section by section, over a fixed reference week (the
same figures whenever CI runs): the pull-request comment."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.core.policy_diff import diff_policies, reference_week
from jobs.diff import report
from jobs.outcome import Outcome
from jobs.policy_file import load_policy
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


def run(args: argparse.Namespace, log: Any) -> Outcome:
    before, after = load_policy(args.base), load_policy(args.change)
    cluster = args.cluster or None
    known = {c.name for p in (before, after) for c in p.fleet}
    if cluster and cluster not in known:
        raise SettingsError(f"--cluster / GPU_JOBS_CLUSTER {cluster!r} is not a cluster of either policy")
    week = reference_week(after, parse_at(args.at, after.defaults.timezone))
    diff = diff_policies(before, after, week, cluster)
    print(_RENDER[args.output](diff, args.base, args.change), end="")
    log.info(
        "diff.done",
        week=week.start.isoformat(),
        node_groups_changed=len(diff.schedules),
        quota_changes=len(diff.quotas),
        sections_changed=[s.name for s in diff.sections],
    )
    return Outcome(planned=len(diff.schedules) + len(diff.quotas) + len(diff.node_group_fields))
