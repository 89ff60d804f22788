"""Placeholders left in a rendered install: the example values the shipped overlays and examples carry (an example
AWS account, ``PROJECT_ID``, an all-zero Azure id, the example image registry and repository), which a team replaces
in its install's one file (install.yaml) and once for the image (docs/release.md). Pure: objects in, findings out."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: What a placeholder looks like, and what it is (said in the finding). Word boundaries: a real account id that
#: merely contains 111122223333 in a longer number is not one.
PLACEHOLDERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:111122223333|123456789012)\b"), "an example AWS account id"),
    (re.compile(r"\bPROJECT_ID\b"), "the GCP project placeholder"),
    (re.compile(r"\b00000000-0000-0000-0000-000000000000\b"), "an all-zero Azure id"),
    (re.compile(r"\bghcr\.io/example/"), "the example image registry"),
    (re.compile(r"\bgithub\.com/example/"), "the example repository"),
)


@dataclass(frozen=True)
class Placeholder:
    """One placeholder value in one field of one object."""

    obj: str  # Kind/name
    path: str  # where in the object, e.g. metadata.annotations[eks.amazonaws.com/role-arn]
    found: str  # the placeholder text itself
    what: str
    value: str  # the field's whole value, for context (a long one, e.g. the policy's text, is not repeated)

    def __str__(self) -> str:
        shown = f"{self.value!r} holds {self.found}" if len(self.value) <= 100 else f"holds {self.found}"
        return f"{self.obj} {self.path}: {shown}, {self.what}"


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = str(key)
            yield from _strings(item, f"{path}.{name}" if re.fullmatch(r"[\w-]+", name) else f"{path}[{name}]")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def find_placeholders(objects: Sequence[Mapping[str, Any]]) -> list[Placeholder]:
    """Every distinct placeholder in every string of every object, in document order."""
    found: list[Placeholder] = []
    for obj in objects:
        metadata = obj.get("metadata") or {}
        name = f"{obj.get('kind', '?')}/{metadata.get('name', '?') if isinstance(metadata, Mapping) else '?'}"
        for path, text in _strings({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}, ""):
            seen: set[str] = set()
            for pattern, what in PLACEHOLDERS:
                for match in pattern.finditer(text):
                    if match.group(0) not in seen:
                        seen.add(match.group(0))
                        found.append(Placeholder(name, path.removeprefix("."), match.group(0), what, text))
    return found
