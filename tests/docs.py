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
