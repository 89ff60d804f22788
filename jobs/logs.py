"""structlog set-up: JSON lines for machines (CronJob logs), readable console output on a terminal."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_JSON = [True]  # how the logs are rendered now: one JSON object per line, or for a person


def configure(level: str = "info", *, json_lines: bool | None = None) -> None:
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    _JSON[0] = json_lines
    # Colours only into a terminal: a pipe or a file gets plain text.
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def json_lines() -> bool:
    """Whether the logs are JSON lines (a pod): then nothing else may be written to stderr between them."""
    return _JSON[0]


def get_logger(**context: Any) -> Any:
    return structlog.get_logger(**context)
