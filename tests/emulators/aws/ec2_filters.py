"""EC2 filter values as EC2 reads them: ``*`` matches zero or more characters, ``?`` exactly one, and a backslash
makes the next character literal (``\\*`` is a star). moto honours that for ``tag:`` filters only and compares every
attribute filter of DescribeInstances (``instance-type``, ``instance-state-name``, ``availability-zone``...)
literally, so ``instance-type=p4d.*`` would find nothing there and everything on EC2.

:func:`install` replaces moto's attribute comparison with one that reads the wildcards; values without them compare
exactly, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import moto.ec2.utils


@lru_cache(maxsize=1024)
def pattern(value: str) -> re.Pattern[str]:
    """The regex of one EC2 filter value."""
    out, escaped = [], False
    for char in value:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        else:
            out.append(re.escape(char))
    if escaped:  # a trailing backslash stands for itself
        out.append(re.escape("\\"))
    return re.compile("".join(out), re.DOTALL)


def matches(value: str, filter_values: Iterable[str]) -> bool:
    return any(pattern(str(v)).fullmatch(value) for v in filter_values)


def instance_value_in_filter_values(instance_value: Any, filter_values: Any) -> bool:
    """moto's ``instance_value_in_filter_values`` with EC2's wildcards (same cases: lists, booleans, scalars)."""
    values = [str(v) for v in filter_values]
    if isinstance(instance_value, list):
        return any(matches(str(item), values) for item in instance_value)
    if isinstance(instance_value, bool):
        return str(instance_value).lower() in values
    return instance_value is not None and matches(str(instance_value), values)


def install() -> None:
    moto.ec2.utils.instance_value_in_filter_values = instance_value_in_filter_values
