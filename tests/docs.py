"""The shell blocks of README.md and docs/*.md, for the tests that run them as typed.

A test reads a block with ``shell_block(page, after)``, with literal arguments: ``tests/unit/test_docs.py`` finds
those calls in the tests' source and fails on any shell block of the docs that no test reads, naming it. So a page
cannot add a command that no test runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The fence languages of commands a person types.
SHELL = ("bash", "sh", "console")
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_HEADING = re.compile(r"^#{1,6} .*$", re.M)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, e.g. "docs/quickstart.md"
    line: int  # of the opening fence
    lang: str
    heading: str  # the nearest heading above it ("" before the first)
    text: str

    def describe(self) -> str:
        first = next((line for line in self.text.splitlines() if line.strip()), "")
        under = f" under {self.heading!r}" if self.heading else ""
        return f"{self.page}:{self.line}: the ```{self.lang} block{under}, starting {first.strip()!r}"


def pages() -> list[str]:
    """README.md and every page of the manual."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("**/*.md"))]


def blocks(page: str) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    text = (ROOT / page).read_text()
    found = []
    for match in _FENCE.finditer(text):
        headings = _HEADING.findall(_outside_fences(text[: match.start()]))
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, match.start()) + 1,
                lang=match.group(1),
                heading=headings[-1] if headings else "",
                text=match.group(2),
            )
        )
    return found


def shell_blocks(page: str) -> list[Block]:
    return [b for b in blocks(page) if b.lang in SHELL]


def find_block(page: str, after: str) -> Block:
    """The first shell block of ``page`` after the first occurrence of ``after`` (a heading, or the words that lead
    into the block)."""
    text = (ROOT / page).read_text()
    at = text.find(after)
    assert at >= 0, f"{page} has no {after!r}: where did the block move?"
    line = text.count("\n", 0, at) + 1
    following = [b for b in shell_blocks(page) if b.line >= line]
    assert following, f"{page} has no shell block after {after!r}"
    return following[0]


def shell_block(page: str, after: str) -> str:
    """The text of the first shell block of ``page`` after ``after``, to run as typed."""
    return find_block(page, after).text


def _outside_fences(text: str) -> str:
    """``text`` without the fenced blocks (a ``# comment`` in a shell block is not a heading)."""
    return _FENCE.sub("", text)


def tables(page: str) -> list[list[dict[str, str]]]:
    """Every pipe table of ``page`` outside fenced blocks: its rows, each a mapping of header to cell text."""
    found: list[list[dict[str, str]]] = []
    lines = _outside_fences((ROOT / page).read_text()).splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|( *:?-+:? *\|)+", lines[i + 1]):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(dict(zip(header, _cells(lines[i]), strict=False)))
                i += 1
            found.append(rows)
        else:
            i += 1
    return found


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def _cells(line: str) -> list[str]:
    """The cells of a table row; ``\\|`` is a pipe inside a cell."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
