"""Reading the JSON envelope every job prints (``jobs.envelope``) in tests: its items by kind and status, several
per-cluster runs as one, and its schema check."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema

from jobs.envelope import STATUSES, schema


def items(doc: Mapping[str, Any], kind: str, *statuses: str) -> list[dict[str, Any]]:
    """The items of ``kind`` (with one of ``statuses``, when given), in the order printed."""
    return [i for i in doc["items"] if i["kind"] == kind and (not statuses or i["status"] in statuses)]


def named(doc: Mapping[str, Any], kind: str, *statuses: str) -> dict[str, dict[str, Any]]:
    return {i["name"]: i for i in items(doc, kind, *statuses)}


def merge(docs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Several runs' envelopes (one per cluster) as one, as a central run would print it."""
    docs = list(docs)
    counts = {s: sum(d["counts"][s] for d in docs) for s in STATUSES}
    first = docs[0] if docs else {"apiVersion": None, "job": None, "at": None, "dryRun": False}
    return {
        **{k: first[k] for k in ("apiVersion", "job", "at", "dryRun")},
        "exitCode": max((d["exitCode"] for d in docs), default=0),
        "counts": counts,
        "scopes": [s for d in docs for s in d["scopes"]],
        "items": [i for d in docs for i in d["items"]],
    }


def validate(doc: Mapping[str, Any]) -> None:
    """Raises ``jsonschema.ValidationError`` when ``doc`` is not what ``gpu-jobs schema --output`` describes."""
    jsonschema.validate(doc, schema(), format_checker=jsonschema.FormatChecker())
