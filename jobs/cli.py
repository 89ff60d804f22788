"""The ``gpu-jobs`` command line: parse, run one command, log ``run.summary``, exit with an honest code."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from jobs import __version__, logs, stopping
from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import PolicyError
from jobs.settings import SettingsError, UsageError, choice_setting, env_flag

# name -> one-line help. Only the module of the command being run is imported, so a command pulls in only
# what it uses (``validate`` must start in well under a second and never loads a cloud SDK).
COMMANDS = {
    "validate": "check policy files (exit 2 with FILE:LINE: PATH: message per problem)",
    "calendar": "show desired states, next changes and a week grid per node group",
    "diff": "what a policy change does: hours and GPU-hours, quotas, every other section (for a pull request)",
    "nodegroups": "scale GPU node groups to zero outside working hours and back (EKS, ASG, GKE, AKS)",
    "quotas": "make every namespace's GPU ResourceQuota what the policy says, in each cluster",
    "cloud-quotas": "request cloud GPU quota increases (AWS, GCP, Azure) before the node groups need them",
    "sweep": "warn about, then act on idle GPU pods (DCGM metrics) and GPU instances missing their owner tags",
    "report": "GPU-hours and money saved, as measured from each cluster's history (--week 2026-W49, --since 7d)",
    "schema": "print the policy's JSON Schema (generated from the models)",
    "check-install": "flag placeholders left in a rendered install (kubectl kustomize DIR | gpu-jobs check-install)",
}


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"jobs.commands.{name.replace('-', '_')}")


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("auto", "json", "console")


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a bad command line before anything is logged; raise instead, so that the run still
    ends with its ``run.summary`` event."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(message)


def build_parser(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    parser = _Parser(prog="gpu-jobs", description="GPU cost controls from one policy file in Git.")
    parser.add_argument("--version", action="version", version=f"gpu-jobs {__version__}")
    parser.add_argument("--log-level", metavar="|".join(LOG_LEVELS), help="default info [GPU_JOBS_LOG_LEVEL]")
    parser.add_argument(
        "--log-format",
        metavar="|".join(LOG_FORMATS),
        help="auto (default): console on a terminal, JSON lines otherwise [GPU_JOBS_LOG_FORMAT]",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if a in COMMANDS), None)
    modules = {}
    for name, text in COMMANDS.items():
        command_parser = sub.add_parser(name, help=text, description=text)
        # The global flags after the command too (`gpu-jobs validate --log-format console`); SUPPRESS keeps a value
        # given before the command when they are not repeated.
        command_parser.add_argument("--log-level", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        command_parser.add_argument("--log-format", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        if name == chosen:
            modules[name] = _load(name)
            modules[name].add_arguments(command_parser)
    return parser, modules


def _dry_run_asked(argv: Sequence[str]) -> bool:
    """Whether the run was asked to be a dry run, for a summary logged before the flags could be read."""
    try:
        return "--dry-run" in argv or env_flag("DRY_RUN")
    except SettingsError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    argv = list(sys.argv[1:] if argv is None else argv)
    logger: list[Any] = []  # the run's logger, once logging is set up
    try:
        outcome = _run(argv, logger)
        stopping.settle()  # the work is done: a signal from here on is recorded, the summary still tells the truth
    except stopping.Interrupted as stop:
        # Only before anything could be written (stopping.py): nothing was changed, and that is not a success.
        outcome = Outcome(
            ExitCode.ITEM_FAILED,
            dry_run=_dry_run_asked(argv),
            reason=f"stopped by {stop.signal_name} during start-up: nothing was changed",
        )
    if not logger:
        logs.configure("info")
        logger.append(logs.get_logger(job=next((a for a in argv if a in COMMANDS), None)))
    return _finish(logger[0], outcome, started, next((a for a in argv if a in COMMANDS), None))


def _run(argv: list[str], logger: list[Any]) -> Outcome:
    parser, modules = build_parser(argv)
    try:
        args = parser.parse_args(argv)
        level = choice_setting(args.log_level, "LOG_LEVEL", "info", LOG_LEVELS)
        style = choice_setting(args.log_format, "LOG_FORMAT", "auto", LOG_FORMATS)
    except SettingsError as exc:
        logs.configure("info")
        logger.append(logs.get_logger(job=next((a for a in argv if a in COMMANDS), None)))
        return _settings_error(logger[0], exc, _dry_run_asked(argv))
    logs.configure(level, json_lines={"auto": None, "json": True, "console": False}[style])
    log = logs.get_logger(job=args.command)
    logger.append(log)
    log.debug("run.started", version=__version__, pid=os.getpid())
    if args.command not in JOBS:  # a job's start-up ends as its runner starts (stopping.settle), after its wiring
        stopping.resume_collection()
    try:
        outcome: Outcome = modules[args.command].run(args, log)
    except PolicyError as exc:
        if logs.json_lines():  # a pod: one event that carries every problem, nothing between the JSON lines
            log.error("policy.invalid", problems=[str(p) for p in exc.problems])
        else:
            for problem in exc.problems:
                print(problem, file=sys.stderr)
        outcome = Outcome(ExitCode.BAD_CONFIG, dry_run=_dry_run_asked(argv))
    except SettingsError as exc:
        outcome = _settings_error(log, exc, _dry_run_asked(argv))
    except Exception as exc:  # an outage or a bug nothing closer caught: still a summary and an honest code
        log.error("run.crashed", error=repr(exc), exc_info=True)
        outcome = Outcome(ExitCode.ITEM_FAILED, dry_run=_dry_run_asked(argv))
    return outcome


def _settings_error(log: Any, exc: SettingsError, dry_run: bool) -> Outcome:
    """Said once: a line for a person on a terminal, or one JSON event in a pod."""
    if logs.json_lines():
        log.error("settings.invalid", error=str(exc))
    else:
        print(f"gpu-jobs: {'error: ' if isinstance(exc, UsageError) else ''}{exc}", file=sys.stderr)
    return Outcome(ExitCode.BAD_CONFIG, dry_run=dry_run)


def _finish(log: Any, outcome: Outcome, started: float, command: str | None) -> int:
    """The one ``run.summary``; from its first byte on the process exits with the code it states."""
    stopping.ignore()
    stopped = stopping.received()
    log.info(
        "run.summary",
        dry_run=outcome.dry_run,
        planned=outcome.planned,
        applied=outcome.applied,
        failed=outcome.failed,
        skipped=outcome.skipped,
        exit_code=int(outcome.exit_code),
        stopped=stopped,
        reason=outcome.reason,
        duration_s=round(time.monotonic() - started, 3),
        summary=summary(command, outcome, stopped),
    )
    return int(outcome.exit_code)


#: The commands whose counts are items of a plan (the others count files, objects, groups shown).
JOBS = ("nodegroups", "quotas", "cloud-quotas", "sweep")
#: What an exit code means, for a command whose counts say nothing of it (or a job that ended before its counts).
MEANING = {
    ExitCode.OK: "all good",
    ExitCode.ITEM_FAILED: "failed (the error is logged above)",
    ExitCode.BAD_CONFIG: "bad policy or configuration: nothing changed",
    ExitCode.REFUSED: "refused: nothing changed",
}
#: How much of one failure's or refusal's words the sentence repeats (the report and the JSON have them whole).
SAID = 120


def _cut(text: str, limit: int = SAID) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def summary(command: str | None, outcome: Outcome, stopped: str | None) -> str:
    """``run.summary``'s sentence, the last line of a pod's log a person reads: ``nodegroups: 5 planned, 4 applied,
    1 failed (train: ...); exit 1``. A job says its counts, naming its first failure, and what else stopped it (the
    limit, another run's Lease); another command what its exit code means."""
    code = outcome.exit_code
    said: list[str] = []
    if command in JOBS:
        counts = []
        for word, n in (
            ("planned", outcome.planned),
            ("applied", outcome.applied),
            ("failed", outcome.failed),
            ("skipped", outcome.skipped),
        ):
            if n and word == "failed" and outcome.failures:
                more = len(outcome.failures) - 1
                counts.append(f"{n} failed ({_cut(outcome.failures[0])}{f', and {more} more' if more else ''})")
            elif n:
                counts.append(f"{n} {word}")
        said += [", ".join(counts)] if counts else []
        said += [_cut(note, 2 * SAID) for note in outcome.notes]
    if outcome.reason:  # a run that ended before it did anything (a start-up stop names its signal)
        said.append(outcome.reason)
    elif stopped:
        said.append(f"stopped by {stopped}")
    if not said or (command not in JOBS and not outcome.reason) or code == ExitCode.BAD_CONFIG:
        # Nothing counted says it: a job with nothing to do, a crash, a bad setting, a command that is no job.
        plain = "nothing to change" if command in JOBS and code == ExitCode.OK else MEANING[code]
        said.insert(0, plain)
    head = (command or "gpu-jobs") + (" (dry run)" if outcome.dry_run else "")
    return f"{head}: {'; '.join(said)}; exit {int(code)}"
