"""``gpu-jobs check-install``: read a rendered install (``kubectl kustomize <overlay>``, from a file or stdin) and
print one line per placeholder left in it (jobs.core.placeholders); exit 2 when there is any, 0 when there is none.
A CI gate for the repository that holds the install, next to ``gpu-jobs validate``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from jobs.core.placeholders import find_placeholders
from jobs.outcome import ExitCode, Outcome

#: Where each kind of placeholder is replaced (said once, after the lines).
FIX = (
    "set the install's account values in its install.yaml (docs/install-values.md);"
    " the image and repository once for your fork (docs/release.md)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", default="-", help="rendered YAML (kubectl kustomize <dir>); - or none: stdin"
    )


def run(args: argparse.Namespace, log: Any) -> Outcome:
    name = "stdin" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        print(f"{name}: cannot read a rendered install: {exc}", file=sys.stderr)
        log.error("install.unreadable", file=name, error=str(exc))
        return Outcome(ExitCode.BAD_CONFIG)
    objects = [d for d in documents if isinstance(d, Mapping)]
    if len(objects) != len(documents) or not objects:
        print(f"{name}: not a rendered install (expected Kubernetes objects, one YAML document each)", file=sys.stderr)
        log.error("install.unreadable", file=name, error="not Kubernetes objects")
        return Outcome(ExitCode.BAD_CONFIG)
    found = find_placeholders(objects)
    for placeholder in found:
        print(f"{name}: {placeholder}")
    if found:
        print(f"{name}: {len(found)} placeholder(s) left: {FIX}", file=sys.stderr)
        log.error("install.placeholders", file=name, placeholders=len(found), objects=len(objects))
        return Outcome(ExitCode.BAD_CONFIG, planned=len(objects), failed=len(found))
    print(f"{name}: no placeholders in {len(objects)} objects")
    log.info("install.clean", file=name, objects=len(objects))
    return Outcome(planned=len(objects))
