"""``kubernetes_validate.validate``, with the schema files it reads parsed once per test process.

The library reads and parses the kind's schema and the 1.8 MB definitions file on every call: ~80 % of a strict
validation's ~17 ms, and the deploy tests validate well over a thousand rendered objects. The same function runs,
on the same schemas, with the same errors: only its file reads are cached (it never modifies what it parsed).
"""

from __future__ import annotations

import functools
from typing import Any

import kubernetes_validate
from kubernetes_validate import utils

utils.schema_contents = functools.cache(utils.schema_contents)  # type: ignore[assignment]
utils.all_versions = functools.cache(utils.all_versions)  # type: ignore[assignment]


def validate(obj: dict[str, Any], version: str, *, strict: bool) -> str:
    """The Kubernetes minor ``obj`` was validated for; raises ``kubernetes_validate.ValidationError``."""
    return str(kubernetes_validate.validate(obj, version, strict=strict))
