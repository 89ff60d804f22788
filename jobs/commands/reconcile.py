"""The skeleton every reconciling command shares, so a new command is its own options and wiring only:

settings from flags and env  ->  policy  ->  scopes  ->  one ScopeWork per scope  ->  the runner
->  the job's view of each scope's envelope  ->  the report (text or JSON) on stdout  ->  an honest Outcome
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar
from zoneinfo import ZoneInfo

from jobs.core.limits import DEFAULT_LIMIT, ChangeLimit
from jobs.core.policy import Policy
from jobs.lease import run_holder
from jobs.outcome import Outcome
from jobs.policy_file import load_policy
from jobs.runner import Reconcile, RunSettings, ScopeReport, ScopeWork, Tally, outcome
from jobs.scopes import Scope
from jobs.settings import choice_setting, env_flag, int_setting, limit_setting, parse_at, seconds_setting

V = TypeVar("V")  # the job's view of one scope's report


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


@dataclass(frozen=True)
class JobSpec(Generic[V]):
    name: str
    noun: str  # what the change limit counts: "node groups"
    default_workers: int
    #: Checks the policy and settings (raising SettingsError) and builds one ScopeWork per scope.
    wire: Callable[[Run, Any], Mapping[Scope, ScopeWork[Any, Any, Any, Any]]]
    view: Callable[[ScopeReport[Any, Any], Run], V]
    tally: Callable[[V], Tally]
    to_text: Callable[[Sequence[V]], str]
    to_json: Callable[[Sequence[V]], str]
    #: The change limit when neither --max-changes nor GPU_JOBS_MAX_CHANGES is given (a job's policy may say it).
    default_limit: Callable[[Policy], ChangeLimit] = field(default=lambda policy: DEFAULT_LIMIT)

    def run(self, args: argparse.Namespace, log: Any) -> Outcome:
        output = choice_setting(args.output, "OUTPUT", "text", ("text", "json"))  # before any work: a typo is exit 2
        views, result = self.reconcile(args, log)
        print(self.to_json(views) if output == "json" else self.to_text(views), end="")
        return result

    def reconcile(self, args: argparse.Namespace, log: Any) -> tuple[list[V], Outcome]:
        policy = load_policy(args.policy)
        dry_run = bool(args.dry_run) or env_flag("DRY_RUN")
        settings = RunSettings(
            dry_run=dry_run,
            limit=limit_setting(args.max_changes, "MAX_CHANGES", self.default_limit(policy)),
            workers=int_setting(args.workers, "WORKERS", self.default_workers, minimum=1),
            holder=run_holder(),
            # Renewed every third of it, taken over from a holder two renewals late: the duration bounds how long a
            # killed run blocks the next one, not how long a run may take.
            lease_duration=timedelta(seconds=seconds_setting("LEASE_DURATION", 300.0, minimum=30.0)),
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
        # The job's own time, without interpreter start-up and SDK imports: what concurrency can change.
        log.info(
            f"{self.name}.timing",
            run_s=round(time.monotonic() - started, 3),
            workers=settings.workers,
            scopes=len(envelopes),
            peak_rss_mib=peak_rss_mib(),
        )
        views = [self.view(e, run) for e in envelopes]
        return views, outcome([self.tally(v) for v in views], dry_run=dry_run)
