"""Loading policy files: YAML with line numbers, so every problem reads ``FILE:LINE: PATH: message``."""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml._yaml import CParser  # libyaml: in every PyYAML wheel
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from jobs.core.policy import KIND, Policy
from jobs.core.policy_checks import policy_problems, quota_warnings
from jobs.core.policy_wake import wake_problems, wake_warnings
from jobs.core.resolved import resolve
from jobs.core.shutdown_time import shutdown_time_warnings
from jobs.core.timespec import quoted
from jobs.deadline import NODEGROUPS_DEADLINE_S, reserve_for
from jobs.errors import ConfigError

PathParts = tuple[str | int, ...]


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    path: str
    message: str
    warning: bool = False  # allowed, but probably a mistake: shown, never fails the policy

    def __str__(self) -> str:
        # One problem is one line whatever the input held: a key or value with a newline must not split it.
        path, message = _one_line(self.path), _one_line(self.message)
        if self.warning:
            message = f"warning: {message}"
        return f"{self.file}:{self.line}: {path}: {message}" if path else f"{self.file}:{self.line}: {message}"


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class PolicyError(ConfigError):
    """The policy is invalid; nothing may be changed. Carries every problem found, not just the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = list(problems)


def format_path(parts: PathParts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


#: Limits on what a policy file may hold. A real policy is a few KiB with a few hundred values; these leave ample
#: room while keeping a hostile or broken file (a binary blob, a billion-laughs alias bomb, a 3,000-deep nesting)
#: to well under a second of work instead of minutes of CPU, gigabytes of memory or a RecursionError.
MAX_BYTES = 1024 * 1024
MAX_DEPTH = 100
MAX_ITEMS = 1000  # per list or mapping
MAX_VALUES = 20_000  # in the whole document, counting every value an alias repeats


class _Refused(yaml.MarkedYAMLError):
    """The document breaks one of the limits above (reported as is, not as invalid YAML)."""


class _Limits(Composer):
    """A composer that enforces the limits while it reads, so nothing unbounded is ever built.

    PyYAML composes recursively and lets an alias refer to the collection that contains it; both have to be
    caught here, before anything walks the result."""

    peek_event: Callable[[], Any]  # the parser's, mixed in after this class

    def _start_counting(self) -> None:
        self._open: list[int] = []  # items read so far in each collection being composed; its length is the depth
        self._open_anchors: set[str] = set()
        self._sizes: dict[int, int] = {}  # id(collection node) -> values in it, aliases expanded
        self._values = 0

    def _count(self, values: int, mark: Any) -> None:
        self._values += values
        if self._values > MAX_VALUES:
            raise _Refused(
                problem=f"more than {MAX_VALUES} values (aliases expanded): a policy holds a few hundred",
                problem_mark=mark,
            )

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event: Any = self.peek_event()
        mark: Any = event.start_mark
        # A mapping's key is composed with index None, its value with the key node: count each item once.
        if self._open and (index is None or isinstance(index, int)):
            self._open[-1] += 1
            if self._open[-1] > MAX_ITEMS:
                raise _Refused(problem=f"more than {MAX_ITEMS} items in one list or mapping", problem_mark=mark)
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open_anchors:
                raise _Refused(
                    problem=f"recursive alias *{event.anchor}: a value cannot contain itself",
                    problem_mark=mark,
                )
            node = super().compose_node(parent, index)
            self._count(self._sizes.get(id(node), 1), mark)
            return node
        if not isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            self._count(1, mark)
            return super().compose_node(parent, index)
        if len(self._open) >= MAX_DEPTH:
            raise _Refused(problem=f"nested deeper than {MAX_DEPTH} levels", problem_mark=mark)
        before = self._values
        self._count(1, mark)
        self._open.append(0)
        if event.anchor is not None:
            self._open_anchors.add(event.anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open.pop()
            self._open_anchors.discard(event.anchor or "")
        self._sizes[id(node)] = self._values - before
        return node


class _Loader(_Limits, yaml.SafeLoader):
    """PyYAML's own reader, scanner and parser: its errors are the ones reported."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._start_counting()


class _FastLoader(_Limits, CParser, SafeConstructor, Resolver):
    """libyaml's scanner and parser (most of the reading time) under the same composer, limits and constructor."""

    def __init__(self, stream: str) -> None:
        CParser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._start_counting()


def _load_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """The document's node tree (for line numbers) and its data, read once; a document libyaml refuses is read
    again by PyYAML, whose messages are the ones the tests and people know."""
    try:
        return _load_with(_FastLoader(text))
    except _Refused:
        raise
    except yaml.YAMLError:
        return _load_with(_Loader(text))


def _load_with(loader: _Limits) -> tuple[yaml.Node | None, Any]:
    try:
        root = loader.get_single_node()
        return root, (loader.construct_document(root) if root is not None else None)  # type: ignore[attr-defined]
    finally:
        loader.dispose()  # type: ignore[attr-defined]


class _Lines:
    """Maps a path inside the YAML document to the line it starts on (1-based)."""

    def __init__(self, root: yaml.Node | None) -> None:
        self._root = root
        self.duplicates: list[tuple[PathParts, int]] = []
        self._walked: set[int] = set()
        self._check_duplicates(root, ())

    def _check_duplicates(self, node: yaml.Node | None, path: PathParts) -> None:
        # Each node once: an alias shares its node, and walking it again per use is exponential (billion laughs).
        if node is None or id(node) in self._walked:
            return
        self._walked.add(id(node))
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

    def find(self, path: PathParts) -> tuple[yaml.Node | None, int]:
        """The node at ``path`` (None if it is not there) and the line of the deepest part that is."""
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
                return None, line
            node = child
        return node, line

    def line(self, path: PathParts) -> int:
        return self.find(path)[1]


_SEXAGESIMAL = re.compile(r"[-+]?\d+(?::[0-5]?\d)+")


def _misread(node: yaml.Node | None, value: Any) -> str | None:
    """What YAML 1.1 made of an unquoted scalar where text was expected (``08:00`` -> 480, ``NO`` -> false)."""
    if not isinstance(node, yaml.ScalarNode) or node.style or isinstance(value, str):  # plain: None, or "" (libyaml)
        return None
    text = str(node.value)
    if isinstance(value, int) and not isinstance(value, bool) and _SEXAGESIMAL.fullmatch(text):
        hours, _, minutes = text.partition(":")
        # 8:00 is read as 480 (08:00 is not: YAML 1.1 base-60 numbers do not start with 0), so suggest the HH:MM form.
        time = f"{int(hours):02d}:{minutes}" if ":" not in minutes and len(minutes) == 2 else text
        return f'{text} was read by YAML as the number {value}: quote times ("{time}")'
    if isinstance(value, bool):
        return f'{text} was read by YAML as {str(value).lower()}: quote it ("{text}")'
    if isinstance(value, int | float):
        return f'{text} was read by YAML as a number: quote it ("{text}")'
    return None


def _shown(value: Any) -> str:
    if isinstance(value, dict | list | tuple):
        return type(value).__name__
    return quoted(value, 80)


def _message(error: Any, node: yaml.Node | None) -> str:
    kind, msg, value = error["type"], error["msg"], error.get("input")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "value_error":
        return str(msg).removeprefix("Value error, ")
    if kind == "too_long":
        return f"{error['ctx']['actual_length']} items: at most {error['ctx']['max_length']}"
    if kind == "string_type" and (misread := _misread(node, value)):
        return misread
    return f"{_shown(value)}: {msg}"


_NUL = "not UTF-8 text: a NUL character (a binary or UTF-16 file?)"


def _refuse(filename: str, line: int, message: str) -> PolicyError:
    return PolicyError([Problem(filename, line, "", message)])


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


@dataclass(frozen=True)
class Checked:
    """A valid policy and what is allowed in it but probably a mistake (``Problem.warning``)."""

    policy: Policy
    warnings: tuple[Problem, ...] = ()


def parse_policy(text: str, filename: str) -> Policy:
    """Parse and validate one policy document; raise :class:`PolicyError` listing every problem."""
    return check_policy(text, filename).policy


def check_policy(text: str, filename: str, *, deadline_s: float = NODEGROUPS_DEADLINE_S) -> Checked:
    """:func:`parse_policy`, with the warnings of a valid policy (each drainTimeout checked against a nodegroups
    run's deadline of ``deadline_s``)."""
    if len(text) > MAX_BYTES:
        raise _refuse(filename, 1, f"larger than the limit of {MAX_BYTES // 1024} KiB for a policy file")
    if (nul := text.find("\0")) >= 0:
        raise _refuse(filename, _line_of(text, nul), _NUL)
    try:
        root, data = _load_yaml(text)
    except _Refused as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else 1
        raise _refuse(filename, line, str(exc.problem)) from None
    except yaml.reader.ReaderError as exc:
        raise _refuse(
            filename, _line_of(text, exc.position), f"not valid YAML: control character U+{exc.character:04X}"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc)
        raise _refuse(filename, line, f"not valid YAML: {reason}") from None
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
            node, line = lines.find(loc)
            problems.append(Problem(filename, line, format_path(loc), _message(error, node)))
        raise PolicyError(sorted(problems)) from None
    problems += [
        Problem(filename, lines.line(path), format_path(path), msg)
        for path, msg in [*policy_problems(policy), *wake_problems(policy.node_groups)]
    ]
    if problems:
        raise PolicyError(sorted(problems))
    resolve(policy)  # once, here at load: every planner reads this view (jobs.core.resolved.view_of)
    waits = timedelta(seconds=deadline_s - reserve_for(deadline_s))
    warnings = [
        Problem(filename, lines.line(path), format_path(path), msg, warning=True)
        for path, msg in [
            *quota_warnings(policy),
            *wake_warnings(policy.node_groups),
            *shutdown_time_warnings(policy, waits, f"{deadline_s:g} s"),
        ]
    ]
    return Checked(policy, tuple(sorted(warnings)))


def decode_policy(raw: bytes, filename: str) -> str:
    """UTF-8 only (YAML allows UTF-16/32, but Git diffs, editors and reviewers of the policy need UTF-8)."""
    # The first bad byte is reported: in a binary file a NUL often comes before any invalid UTF-8.
    if (nul := raw.find(b"\0")) >= 0:
        decode_policy(raw[:nul], filename)
        raise _refuse(filename, raw.count(b"\n", 0, nul) + 1, _NUL)
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise _refuse(filename, 1, "not UTF-8 text: it starts with a UTF-16/32 byte-order mark (save it as UTF-8)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise _refuse(filename, line, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} (save it as UTF-8)") from None


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
    return read_policy(path).policy


def read_policy(path: str | Path, *, deadline_s: float = NODEGROUPS_DEADLINE_S) -> Checked:
    """:func:`load_policy`, with the warnings of a valid policy."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            # Never more than the limit: a 50 MB file (or /dev/zero) is refused without reading it all.
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PolicyError([Problem(str(path), 0, "", f"cannot read: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_BYTES:
        raise _refuse(str(path), 1, f"larger than the limit of {MAX_BYTES // 1024} KiB for a policy file")
    return check_policy(decode_policy(raw, str(path)), str(path), deadline_s=deadline_s)
