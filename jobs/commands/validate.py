"""``gpu-jobs validate``: check policy files, one ``FILE:LINE: PATH: message`` line per problem, and one
``FILE:LINE: PATH: warning: message`` line per warning (a warning does not change the exit code). ``--output github``
writes them as GitHub Actions workflow commands, which GitHub shows as annotations on those lines of the pull
request."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from jobs.core.policy import Policy
from jobs.core.policy_notify import DEFAULT_SECRET
from jobs.core.resolved import view_of
from jobs.core.timespec import format_duration
from jobs.deadline import NODEGROUPS_DEADLINE_S
from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import PolicyError, Problem, policy_paths, read_policy
from jobs.settings import DEFAULT_POLICY, env, seconds_setting


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="files or directories (every *.yaml in it) [GPU_JOBS_POLICY]")
    parser.add_argument(
        "--output",
        choices=("text", "github"),
        default="text",
        help="text: FILE:LINE: PATH: message; github: ::error file=...,line=...:: annotations",
    )
    parser.add_argument(
        "--deadline",
        metavar="SECONDS",
        help="the nodegroups run's deadline each drainTimeout must fit in, with the scale-down after it (a warning;"
        f" default {NODEGROUPS_DEADLINE_S:g}, the shipped nodegroups CronJob's) [GPU_JOBS_DEADLINE]",
    )


def _escape(text: str, *, property_value: bool = False) -> str:
    """GitHub's workflow-command escaping: a raw newline would end the command, and in a property ``,`` and ``:``
    end the value."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def github_annotation(problem: Problem) -> str:
    """``::error file=F,line=N,title=T::message`` (``::warning`` for a warning); line 0 (unreadable) is left out."""
    where = f"file={_escape(problem.file, property_value=True)}"
    if problem.line > 0:
        where += f",line={problem.line}"
    title = f"gpu-jobs validate: {problem.path}" if problem.path else "gpu-jobs validate"
    where += f",title={_escape(title, property_value=True)}"
    message = f"{problem.path}: {problem.message}" if problem.path else problem.message
    return f"::{'warning' if problem.warning else 'error'} {where}::{_escape(message)}"


def _counts(policy: Policy) -> str:
    def n(count: int, noun: str) -> str:
        return f"{count} {noun}{'' if count == 1 else 's'}"

    quotas = policy.namespace_quotas
    head = (
        f"{n(len(policy.node_groups), 'node group')} in {n(len(policy.fleet), 'cluster')},"
        f" {n(len(policy.overrides), 'override')}, {n(len(quotas.rules) if quotas else 0, 'namespace quota rule')},"
        f" {n(len(policy.cloud_quotas), 'cloud quota')}"
    )
    # What acts on people, one line each under the counts: a reviewer sees a behaviour turned on at a glance.
    said = (_warned(policy), _woken(policy), *_sweep(policy), _notify(policy))
    return "\n".join([head, *(f"  {line}" for line in said if line)])


def _warned(policy: Policy) -> str:
    """Which node groups warn their running GPU pods before going down (``warnBefore``), and how long ahead."""
    leads = sorted({format_duration(w) for g in view_of(policy).groups if (w := g.settings.warn_before)})
    count = sum(1 for g in view_of(policy).groups if g.settings.warn_before)
    groups = f"{count} node group{'' if count == 1 else 's'} warn{'s' if count == 1 else ''}"
    return f"{groups} running GPU pods {' or '.join(leads)} before shutdown" if count else ""


def _woken(policy: Policy) -> str:
    """Which node groups a Pending GPU pod may wake out of hours (``wake``), and for how long at most."""
    groups = [g for g in policy.node_groups if g.wake is not None and g.wake.on_pending_pods]
    if not groups:
        return ""
    longest = max((g.wake for g in groups if g.wake is not None), key=lambda w: w.duration)
    many = len(groups) != 1
    return f"{len(groups)} node group{'s' if many else ''} wake{'' if many else 's'} on demand (up to {longest.for_})"


def _sweep(policy: Policy) -> tuple[str, ...]:
    """What the sweep would do, in a few words: a reviewer sees an action turned on."""
    sweep = policy.sweep
    if sweep is None:
        return ()
    parts = []
    if sweep.idle_pods is not None:
        pods = sweep.idle_pods
        what = "annotate" if pods.action == "annotate" else f"{pods.action} after {pods.grace_period}"
        snooze = f"snoozes at most {pods.max_snooze}"
        parts.append(f"sweep: idle pods below {pods.below:g}% for {pods.window}: {what}, {snooze}")
    if sweep.untagged_instances is not None:
        inst = sweep.untagged_instances
        what = "tag only" if inst.action == "tag-only" else f"{inst.action} after {inst.grace_period}"
        parts.append(f"sweep: instances without {', '.join(inst.required_tags)}: {what}")
    return tuple(parts)


def _notify(policy: Policy) -> str:
    """Where notifications go: the Secret holding the webhook (never its value) and the owner label."""
    notify = policy.notify
    if notify is None:
        return ""
    ref = notify.webhook.secret_ref
    # The shipped Roles name the one Secret they let the jobs read: another name needs a grant of its own.
    grant = "" if ref.name == DEFAULT_SECRET else f" (the shipped RBAC reads only {DEFAULT_SECRET}: grant get on it)"
    return (
        f"notify: one message per owner (namespace label {notify.owner.namespace_label}) to the webhook in Secret"
        f" {ref.name} key {ref.key}{grant}"
    )


def run(args: argparse.Namespace, log: Any) -> Outcome:
    paths = policy_paths(args.paths or [env("POLICY", DEFAULT_POLICY) or DEFAULT_POLICY])
    if not paths:
        print("no policy files found", file=sys.stderr)
        return Outcome(ExitCode.BAD_CONFIG)
    show = github_annotation if args.output == "github" else str
    deadline_s = seconds_setting("DEADLINE", NODEGROUPS_DEADLINE_S, minimum=1.0, flag=args.deadline)
    failed = 0
    for path in paths:
        try:
            checked = read_policy(path, deadline_s=deadline_s)
        except PolicyError as exc:
            failed += 1
            for problem in exc.problems:
                print(show(problem))
            log.error("policy.invalid", file=str(path), problems=len(exc.problems))
            continue
        for warning in checked.warnings:
            print(show(warning))
        policy = checked.policy
        if args.output != "github":
            print(f"{path}: valid: {_counts(policy)}")
        log.info(
            "policy.valid",
            file=str(path),
            node_groups=len(policy.node_groups),
            overrides=len(policy.overrides),
            warnings=len(checked.warnings),
        )
    return Outcome(ExitCode.BAD_CONFIG if failed else ExitCode.OK, planned=len(paths), failed=failed)
