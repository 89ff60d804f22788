"""The ``gpu-jobs`` command line: parse, run one command, log ``run.summary``, exit with an honest code."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence
from types import ModuleType

from jobs import __version__, logs
from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import PolicyError
from jobs.settings import SettingsError, env

# name -> one-line help. Only the module of the command being run is imported, so a command pulls in only
# what it uses (``validate`` must start in well under a second and never loads a cloud SDK).
COMMANDS = {
    "validate": "check policy files (exit 2 with FILE:LINE: PATH: message per problem)",
    "calendar": "show desired states, next changes and a week grid per node group",
    "nodegroups": "scale GPU node groups to zero outside working hours and back (EKS, ASG, GKE, AKS)",
    "schema": "print the policy's JSON Schema (generated from the models)",
}


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"jobs.commands.{name.replace('-', '_')}")


def build_parser(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    parser = argparse.ArgumentParser(prog="gpu-jobs", description="GPU cost controls from one policy file in Git.")
    parser.add_argument("--version", action="version", version=f"gpu-jobs {__version__}")
    parser.add_argument("--log-level", default=env("LOG_LEVEL", "info"), help="[GPU_JOBS_LOG_LEVEL]")
    parser.add_argument(
        "--log-format",
        choices=("auto", "json", "console"),
        default=env("LOG_FORMAT", "auto"),
        help="auto: console on a terminal, JSON lines otherwise [GPU_JOBS_LOG_FORMAT]",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if a in COMMANDS), None)
    modules = {}
    for name, text in COMMANDS.items():
        command_parser = sub.add_parser(name, help=text, description=text)
        if name == chosen:
            modules[name] = _load(name)
            modules[name].add_arguments(command_parser)
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, modules = build_parser(argv)
    args = parser.parse_args(argv)
    logs.configure(args.log_level, json_lines={"auto": None, "json": True, "console": False}[args.log_format])
    log = logs.get_logger(job=args.command)
    try:
        outcome: Outcome = modules[args.command].run(args, log)
    except PolicyError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        log.error("policy.invalid", problems=len(exc.problems))
        outcome = Outcome(ExitCode.BAD_CONFIG)
    except SettingsError as exc:
        print(f"gpu-jobs: {exc}", file=sys.stderr)
        log.error("settings.invalid", error=str(exc))
        outcome = Outcome(ExitCode.BAD_CONFIG)
    log.info(
        "run.summary",
        dry_run=outcome.dry_run,
        planned=outcome.planned,
        applied=outcome.applied,
        failed=outcome.failed,
        skipped=outcome.skipped,
        exit_code=int(outcome.exit_code),
        duration_s=round(time.monotonic() - started, 3),
    )
    return int(outcome.exit_code)


if __name__ == "__main__":
    sys.exit(main())
