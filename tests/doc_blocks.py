"""The shell blocks of docs/release.md, docs/policy-repo.md and docs/install-values.md, for the tests that run them
as typed: ``shell_block(page, after)`` is the first ```bash block of ``page`` after the text ``after``. (The same
contract as the manual's tests/docs.py on the docs-site branch: a call with literal arguments per block.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```(bash|sh|console)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def shell_block(page: str, after: str) -> str:
    text = (ROOT / page).read_text()
    at = text.find(after)
    assert at >= 0, f"{page} has no {after!r}: where did the block move?"
    following = [m for m in _FENCE.finditer(text) if m.start() >= at]
    assert following, f"{page} has no shell block after {after!r}"
    return following[0].group(2)


def shell_block_count(page: str) -> int:
    return len(_FENCE.findall((ROOT / page).read_text()))
