"""``gpu-jobs schema``: the policy's JSON Schema, generated from the typed models (for editors and CI); with
``--output``, the JSON Schema of every job's ``--output json`` (the report envelope, ``jobs.envelope``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from jobs.core.policy import Policy
from jobs.outcome import ExitCode, Outcome

SCHEMA_ID = "https://gpu-jobs.dev/schemas/policy-v1.json"


def policy_schema() -> dict[str, Any]:
    schema = Policy.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def render(*, output: bool = False) -> str:
    return json.dumps(output_schema() if output else policy_schema(), indent=2, sort_keys=False) + "\n"


def output_schema() -> dict[str, Any]:
    from jobs.envelope import schema  # noqa: PLC0415  (the runner's side: not imported for the policy's schema)

    return schema()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        action="store_true",
        help="the schema of every job's --output json (the report envelope) instead of the policy's",
    )
    parser.add_argument(
        "--write", metavar="PATH", help="write to PATH instead of stdout (e.g. gitops/policy.schema.json)"
    )


def run(args: argparse.Namespace, log: Any) -> Outcome:
    text = render(output=args.output)
    if args.write:
        path = Path(args.write)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"gpu-jobs: cannot write {args.write}: {exc.strerror or exc}", file=sys.stderr)
            log.error("schema.not_written", path=args.write, error=str(exc))
            return Outcome(ExitCode.BAD_CONFIG)
        log.info("schema.written", path=args.write)
    else:
        print(text, end="")
    return Outcome()
