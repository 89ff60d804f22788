"""``gpu-jobs validate``: check policy files, one ``FILE:LINE: PATH: message`` line per problem, and one
``FILE:LINE: PATH: warning: message`` line per warning (a warning does not change the exit code)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import PolicyError, policy_paths, read_policy
from jobs.settings import DEFAULT_POLICY, env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="files or directories (every *.yaml in it) [GPU_JOBS_POLICY]")


def run(args: argparse.Namespace, log: Any) -> Outcome:
    paths = policy_paths(args.paths or [env("POLICY", DEFAULT_POLICY) or DEFAULT_POLICY])
    if not paths:
        print("no policy files found", file=sys.stderr)
        return Outcome(ExitCode.BAD_CONFIG)
    failed = 0
    for path in paths:
        try:
            checked = read_policy(path)
        except PolicyError as exc:
            failed += 1
            for problem in exc.problems:
                print(problem)
            log.error("policy.invalid", file=str(path), problems=len(exc.problems))
            continue
        for warning in checked.warnings:
            print(warning)
        policy = checked.policy
        log.info(
            "policy.valid",
            file=str(path),
            node_groups=len(policy.node_groups),
            overrides=len(policy.overrides),
            warnings=len(checked.warnings),
        )
    return Outcome(ExitCode.BAD_CONFIG if failed else ExitCode.OK, planned=len(paths), failed=failed)
