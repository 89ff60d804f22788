"""The skeleton every reconciling command shares, so a new command is its own options and wiring only:

settings from flags and env  ->  policy  ->  scopes  ->  one ScopeWork per scope  ->  the runner
->  each scope's result (the job's items and rows)  ->  the one report (text, or the JSON envelope) on stdout
->  an honest Outcome (the envelope's ``exitCode`` is the process's)
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from jobs.commands.after_run import after_run
from jobs.core.limits import DEFAULT_LIMIT, ChangeLimit
from jobs.core.policy import Policy
from jobs.deadline import Deadline
from jobs.envelope import ScopeResult, failures, notes, tally, to_json, to_text
from jobs.lease import run_holder
from jobs.outcome import Outcome
from jobs.policy_file import load_policy
from jobs.runner import SCOPES_AT_ONCE, Reconcile, RunSettings, ScopeReport, ScopeWork, outcome
from jobs.scopes import Scope

if TYPE_CHECKING:
    from jobs.adapters.kube.client import Kubeconfig

from jobs.settings import (
    choice_setting,
    deadline_setting,
    env_flag,
    int_setting,
    limit_setting,
    parse_at,
    seconds_setting,
)


def add_concurrency_arguments(parser: argparse.ArgumentParser, items: str, default_workers: int) -> None:
    """How much of the run happens at once: ``--workers`` items per scope, ``--scopes-at-once`` scopes (1 with 1:
    a serial run)."""
    parser.add_argument(
        "--workers",
        metavar="N",
        help=f"{items} worked on at once, per scope (default {default_workers}) [GPU_JOBS_WORKERS]",
    )
    parser.add_argument(
        "--scopes-at-once",
        metavar="N",
        help=f"clusters or accounts worked on at once, each with its workers; 1: one after the other (default"
        f" {SCOPES_AT_ONCE}) [GPU_JOBS_SCOPES_AT_ONCE]",
    )


def construct(path: str, *args: Any) -> Any:
    """An adapter from its ``module:Class`` path, its module imported now: a command imports only the SDKs of the
    clouds its policy names (an AWS-only policy never imports the Google SDK)."""
    module_name, _, class_name = path.partition(":")
    return getattr(importlib.import_module(module_name), class_name)(*args)


def peak_rss_mib() -> float | None:
    """This process's peak resident memory (VmHWM: of this program only, not what was forked before exec)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return round(kib / 1024, 1) if kib is not None else None


@dataclass(frozen=True)
class Run:
    """What every reconciling command knows before its own wiring: the policy, the instant, the shared settings."""

    args: argparse.Namespace
    policy: Policy
    now: datetime
    settings: RunSettings

    @cached_property
    def kubeconfig(self) -> Kubeconfig:
        """The run's one Kubernetes configuration, read on first use: the wiring, the notifications and the history
        reach every cluster through it, each request bounded by the run's deadline."""
        from jobs.adapters.kube.client import Kubeconfig  # noqa: PLC0415 - the Kubernetes client only when used
        from jobs.adapters.settings import AdapterSettings  # noqa: PLC0415

        return Kubeconfig(AdapterSettings.from_env(self.settings.deadline).request_timeout_s)


@dataclass(frozen=True)
class JobSpec:
    name: str
    noun: str  # what the change limit counts: "node groups"
    default_workers: int
    #: Checks the policy and settings (raising SettingsError) and builds one ScopeWork per scope.
    wire: Callable[[Run, Any], Mapping[Scope, ScopeWork[Any, Any, Any, Any]]]
    #: One scope's result: the runner's report with the job's items and rows.
    view: Callable[[ScopeReport[Any, Any], Run], ScopeResult]
    #: The text report of a run with no scope.
    nothing: str
    #: The change limit when neither --max-changes nor GPU_JOBS_MAX_CHANGES is given (a job's policy may say it).
    default_limit: Callable[[Policy], ChangeLimit] = field(default=lambda policy: DEFAULT_LIMIT)

    def run(self, args: argparse.Namespace, log: Any) -> Outcome:
        output = choice_setting(args.output, "OUTPUT", "text", ("text", "json"))  # before any work: a typo is exit 2
        results, result = self.reconcile(args, log)
        text = to_json(self.name, results, result) if output == "json" else to_text(results, self.nothing)
        print(text, end="")
        return result

    def reconcile(self, args: argparse.Namespace, log: Any) -> tuple[list[ScopeResult], Outcome]:
        # First: the run's deadline counts from its start, policy loading and the SDKs' imports included.
        deadline = Deadline.start(deadline_setting(args.deadline))
        policy = load_policy(args.policy)
        dry_run = bool(args.dry_run) or env_flag("DRY_RUN")
        settings = RunSettings(
            dry_run=dry_run,
            limit=limit_setting(args.max_changes, "MAX_CHANGES", self.default_limit(policy)),
            workers=int_setting(args.workers, "WORKERS", self.default_workers, minimum=1),
            scopes_at_once=int_setting(args.scopes_at_once, "SCOPES_AT_ONCE", SCOPES_AT_ONCE, minimum=1),
            holder=run_holder(),
            # Renewed every third of it, taken over from a holder two renewals late: the duration bounds how long a
            # killed run blocks the next one, not how long a run may take.
            lease_duration=timedelta(seconds=seconds_setting("LEASE_DURATION", 300.0, minimum=30.0)),
            deadline=deadline,
        )
        # In the policy's timezone, to the second: what the reports show a person.
        now = parse_at(args.at, policy.defaults.timezone) or datetime.now(UTC).replace(microsecond=0)
        run = Run(args, policy, now.astimezone(ZoneInfo(policy.defaults.timezone)), settings)
        work = self.wire(run, log)
        # A cluster scope is worked on only through an API that proves it is that cluster (jobs.runner).
        unproven = sorted(s.name for s, w in work.items() if s.kind == "cluster" and w.witness is None)
        if unproven:
            raise TypeError(f"{self.name}: no identity witness for cluster scopes {', '.join(unproven)}")
        started = time.monotonic()
        envelopes = Reconcile(dict(work), settings, run.now, log, self.noun).run()
        if deadline.expired():  # what it cut short failed with "deadline: ..."; said once for the whole run
            log.error(
                "run.deadline",
                deadline_s=deadline.seconds,
                message=f"the run's deadline of {deadline.seconds:g} s ran out: what was unfinished failed, the next"
                " run resumes",
            )
        # The job's own time, without interpreter start-up and SDK imports: what concurrency can change.
        log.info(
            f"{self.name}.timing",
            run_s=round(time.monotonic() - started, 3),
            workers=settings.workers,
            scopes=len(envelopes),
            scopes_at_once=settings.scopes_at_once,
            deadline_s=deadline.seconds,
            peak_rss_mib=peak_rss_mib(),
        )
        results = [self.view(e, run) for e in envelopes]
        ended = outcome([tally(r) for r in results], dry_run=dry_run)
        # Notifications, the history, the gauges: warnings at most, never a failure or another exit code.
        results = after_run(self.name, run, results, ended, log)
        # What run.summary's sentence names: the failed items, the limit's refusal, a Lease held by another run.
        return results, replace(ended, failures=failures(results), notes=notes(results))
