"""``gpu-jobs schema``: the policy's JSON Schema, generated from the typed models (for editors and CI)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from jobs.core.policy import Policy
from jobs.outcome import Outcome

SCHEMA_ID = "https://gpu-jobs.dev/schemas/policy-v1.json"


def policy_schema() -> dict[str, Any]:
    schema = Policy.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def render() -> str:
    return json.dumps(policy_schema(), indent=2, sort_keys=False) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--write", metavar="PATH", help="write to PATH instead of stdout (e.g. gitops/policy.schema.json)"
    )


def run(args: argparse.Namespace, log: Any) -> Outcome:
    text = render()
    if args.write:
        with open(args.write, "w", encoding="utf-8") as out:
            out.write(text)
        log.info("schema.written", path=args.write)
    else:
        print(text, end="")
    return Outcome()
