"""Structured logs on stderr: JSON lines for machines (CronJob logs), readable console output on a terminal.

One event is a name and key-value pairs, the logger's bound context first (``log.bind(cluster=...)``), then the
call's, then ``event``, ``level`` and ``timestamp`` (UTC, ISO 8601), and ``exception`` (the traceback) when asked
with ``exc_info``. The standard library only: every command logs, ``validate`` included, and a logging library's
import (structlog pulls in asyncio) was a sixth of that command's start-up.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from datetime import UTC, datetime
from typing import Any, TextIO

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_PAD_LEVEL = len("exception")
_PAD_EVENT = 30
_ESCAPE_IN_CONSOLE = frozenset(" \t=\r\n\"'")

_COLOURS = {"debug": "\x1b[32m", "info": "\x1b[32m", "warning": "\x1b[33m", "error": "\x1b[31m", "critical": "\x1b[31m"}
_DIM, _BRIGHT, _CYAN, _MAGENTA, _RESET = "\x1b[2m", "\x1b[1m", "\x1b[36m", "\x1b[35m", "\x1b[0m"


class _Config:
    """How events are rendered now; read at every call, so a logger made before :func:`configure` follows it."""

    def __init__(self) -> None:
        self.level = LEVELS["info"]
        self.json_lines = True
        self.colours = False
        self.stream: TextIO = sys.stderr


_CONFIG = _Config()
# One event, one line: the jobs log from several threads at once, and a line written in parts interleaves.
_WRITE = threading.Lock()


def configure(level: str = "info", *, json_lines: bool | None = None) -> None:
    """``level``: the least severe level written. ``json_lines`` None: JSON unless stderr is a terminal."""
    stream = sys.stderr
    if json_lines is None:
        json_lines = not stream.isatty()
    _CONFIG.level = LEVELS[level.lower()]
    _CONFIG.json_lines = json_lines
    # Colours only into a terminal: a pipe or a file gets plain text.
    _CONFIG.colours = not json_lines and stream.isatty()
    _CONFIG.stream = stream


def json_lines() -> bool:
    """Whether the logs are JSON lines (a pod): then nothing else may be written to stderr between them."""
    return _CONFIG.json_lines


def get_logger(**context: Any) -> Logger:
    return Logger(context)


class Logger:
    """``log.info("event", key=value)``; ``log.bind(key=value)`` is a logger whose events carry those pairs too."""

    def __init__(self, context: dict[str, Any]) -> None:
        self._context = context

    def bind(self, **context: Any) -> Logger:
        return Logger({**self._context, **context})

    def debug(self, event: str, **pairs: Any) -> None:
        self._write("debug", event, pairs)

    def info(self, event: str, **pairs: Any) -> None:
        self._write("info", event, pairs)

    def warning(self, event: str, **pairs: Any) -> None:
        self._write("warning", event, pairs)

    warn = warning

    def error(self, event: str, **pairs: Any) -> None:
        self._write("error", event, pairs)

    def exception(self, event: str, **pairs: Any) -> None:
        pairs.setdefault("exc_info", True)
        self._write("error", event, pairs)

    def critical(self, event: str, **pairs: Any) -> None:
        self._write("critical", event, pairs)

    def _write(self, level: str, event: str, pairs: dict[str, Any]) -> None:
        if LEVELS[level] < _CONFIG.level:
            return
        fields = {**self._context, **pairs}
        exc_info = fields.pop("exc_info", None)
        fields |= {"event": event, "level": level, "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z")}
        trace = _traceback(exc_info)
        if _CONFIG.json_lines:
            if trace is not None:
                fields["exception"] = trace
            line = json.dumps(fields, default=repr)
        else:
            line = _console(fields, trace)
        with _WRITE:
            _CONFIG.stream.write(line + "\n")
            _CONFIG.stream.flush()


def _traceback(exc_info: Any) -> str | None:
    """The traceback ``exc_info`` asks for: True (the exception being handled), an exception, or a sys.exc_info()
    tuple; None when it asks for none."""
    if not exc_info:
        return None
    if isinstance(exc_info, BaseException):
        exc: BaseException | None = exc_info
    elif isinstance(exc_info, tuple):
        exc = exc_info[1]
    else:
        exc = sys.exc_info()[1]
    if exc is None:
        return None
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip("\n")


def _console(fields: dict[str, Any], trace: str | None) -> str:
    """``TIMESTAMP [level    ] event    key=value ...``, keys sorted, for a person at a terminal."""
    timestamp, level, event = fields.pop("timestamp"), fields.pop("level"), fields.pop("event")
    colours = _CONFIG.colours
    head = [
        f"{_DIM}{timestamp}{_RESET}" if colours else timestamp,
        f"[{_COLOURS[level]}{_BRIGHT}{level:<{_PAD_LEVEL}}{_RESET}]" if colours else f"[{level:<{_PAD_LEVEL}}]",
        f"{_BRIGHT}{event:<{_PAD_EVENT}}{_RESET}" if colours else f"{event:<{_PAD_EVENT}}",
    ]
    pairs = [
        f"{_CYAN}{key}{_RESET}={_MAGENTA}{_shown(value)}{_RESET}" if colours else f"{key}={_shown(value)}"
        for key, value in sorted(fields.items())
    ]
    line = " ".join(head + pairs).rstrip(" ")
    return f"{line}\n{trace}" if trace is not None else line


def _shown(value: Any) -> str:
    """A text as it is unless it holds a space, a quote or ``=`` (then quoted, so the pairs stay apart)."""
    if isinstance(value, str):
        return repr(value) if _ESCAPE_IN_CONSOLE & set(value) else value
    return repr(value)
