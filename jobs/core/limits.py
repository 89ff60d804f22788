"""The blast-radius limit every job applies before it changes anything: a plan changing more items than this needs a
person to raise the limit (exit 3). A limit is a count (``50``) or a share of the items the run considered
(``25%``, rounded up, so a small fleet can still change one item)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_LIMIT = re.compile(r"(?P<number>\d+(?:\.\d+)?)(?P<percent>%?)")


@dataclass(frozen=True)
class ChangeLimit:
    count: int | None = 50
    percent: float | None = None  # of the items considered; with a count too, whichever allows fewer

    @classmethod
    def parse(cls, text: str) -> ChangeLimit:
        """``"20"`` or ``"25%"``; raises ValueError with the reason."""
        match = _LIMIT.fullmatch(text.strip())
        if match is None:
            raise ValueError("a whole number (20) or a percentage of the items considered (25%)")
        if match["percent"]:
            percent = float(match["number"])
            if not 0 < percent <= 100:
                raise ValueError("a percentage must be more than 0% and at most 100%")
            return cls(count=None, percent=percent)
        if "." in match["number"]:
            raise ValueError("a whole number (20) or a percentage of the items considered (25%)")
        return cls(count=int(match["number"]))

    def allowed(self, considered: int) -> int:
        share = max(1, math.ceil(considered * self.percent / 100)) if self.percent is not None else considered
        return min(share, self.count) if self.count is not None else share

    def refusal(self, changes: int, considered: int, noun: str, scope: str = "") -> str | None:
        """Why a plan changing ``changes`` of ``considered`` items is refused, or None when it is within the limit."""
        allowed = self.allowed(considered)
        if changes <= allowed:
            return None
        limit = f"{self}" + (f" ({allowed} of {considered})" if self.percent is not None else "")
        return (
            f"the plan changes {changes} {noun}{scope}, more than the limit of {limit} per run"
            " (raise --max-changes / GPU_JOBS_MAX_CHANGES if this is intended)"
        )

    def __str__(self) -> str:
        parts = ([str(self.count)] if self.count is not None else []) + (
            [f"{self.percent:g}%"] if self.percent is not None else []
        )
        return " and ".join(parts)


#: 50 items per run: enough for a fleet's evening, small enough that a mistaken policy cannot touch everything at once.
DEFAULT_LIMIT = ChangeLimit()
