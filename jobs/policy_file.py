"""Loading policy files: YAML with line numbers, so every problem reads ``FILE:LINE: PATH: message``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from jobs.core.policy import KIND, Policy, cross_reference_problems

PathParts = tuple[str | int, ...]


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    path: str
    message: str

    def __str__(self) -> str:
        return (
            f"{self.file}:{self.line}: {self.path}: {self.message}"
            if self.path
            else f"{self.file}:{self.line}: {self.message}"
        )


class PolicyError(Exception):
    """The policy is invalid; nothing may be changed. Carries every problem found, not just the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = list(problems)


def format_path(parts: PathParts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class _Lines:
    """Maps a path inside the YAML document to the line it starts on (1-based)."""

    def __init__(self, root: yaml.Node | None) -> None:
        self._root = root
        self.duplicates: list[tuple[PathParts, int]] = []
        self._check_duplicates(root, ())

    def _check_duplicates(self, node: yaml.Node | None, path: PathParts) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                if key.value in seen:
                    self.duplicates.append(((*path, key.value), key.start_mark.line + 1))
                seen.add(key.value)
                self._check_duplicates(value, (*path, key.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._check_duplicates(item, (*path, i))

    def line(self, path: PathParts) -> int:
        node = self._root
        line = node.start_mark.line + 1 if node is not None else 1
        for part in path:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if key.value == part:
                        # An unknown or misspelt key is reported on the key's own line.
                        child, line = value, key.start_mark.line + 1
                        break
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                child = node.value[part]
                line = child.start_mark.line + 1
            if child is None:
                break
            node = child
        return line


def _message(error: Any) -> str:
    kind, msg, value = error["type"], error["msg"], error.get("input")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "value_error":
        return str(msg).removeprefix("Value error, ")
    shown = json.dumps(value, default=str) if not isinstance(value, dict | list) else type(value).__name__
    return f"{shown}: {msg}"


def parse_policy(text: str, filename: str) -> Policy:
    """Parse and validate one policy document; raise :class:`PolicyError` listing every problem."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc)
        raise PolicyError([Problem(filename, line, "", f"not valid YAML: {reason}")]) from None
    lines = _Lines(root)
    problems = [Problem(filename, line, format_path(path), "duplicate key") for path, line in lines.duplicates]
    if not isinstance(data, dict):
        raise PolicyError(
            [*problems, Problem(filename, lines.line(()), "", "a policy is a mapping (apiVersion, kind, ...)")]
        )
    try:
        policy = Policy.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            problems.append(Problem(filename, lines.line(loc), format_path(loc), _message(error)))
        raise PolicyError(sorted(problems)) from None
    problems += [
        Problem(filename, lines.line(path), format_path(path), msg) for path, msg in cross_reference_problems(policy)
    ]
    if problems:
        raise PolicyError(sorted(problems))
    return policy


_TOP_LEVEL_TYPE = re.compile(r"^(apiVersion|kind):[ \t]*['\"]?([^'\"#\s]+)", re.MULTILINE)


def is_other_manifest(path: Path) -> bool:
    """A YAML file that says it is something else (a kustomization, a Kubernetes object): its top-level
    ``apiVersion``/``kind`` name neither ``gpu-jobs/...`` nor ``GpuPolicy``. A file that says nothing is not skipped:
    a policy that lost its header must still be reported."""
    try:
        with path.open("rb") as handle:
            head = handle.read(64 * 1024).decode("utf-8", errors="replace")
    except OSError:
        return False
    found = dict(_TOP_LEVEL_TYPE.findall(head))
    if not found:
        return False
    return not (found.get("apiVersion", "").startswith("gpu-jobs/") or found.get("kind") == KIND)


def policy_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files named, with a directory meaning every ``*.yaml`` directly inside it that is not another kind of
    manifest (``gitops/`` also holds the kustomization that turns the policy into a ConfigMap)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(p for p in sorted(path.glob("*.yaml")) if not is_other_manifest(p))
        else:
            out.append(path)
    return out


def load_policy(path: str | Path) -> Policy:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError([Problem(str(path), 0, "", f"cannot read: {exc.strerror or exc}")]) from None
    return parse_policy(text, str(path))
