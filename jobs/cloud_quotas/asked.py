"""How what was asked is written in the install's cluster: one ConfigMap per ``cloudQuotas`` entry, read with one
list per scope (the ``Codec`` of ``jobs.adapters.kube.state.ConfigMapState``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime

from jobs.core.cloud_quotas import Asked, Unreadable
from jobs.labels import CLOUD_QUOTA_KEY, CLOUD_QUOTA_LABEL, CLOUD_QUOTA_RECORD_KIND, cloud_quota_record

_OUTCOMES = ("open", "approved", "partial", "denied")


class RequestCodec:
    """The records of one scope's entries (``kind`` selects them; other kinds of state never see them)."""

    kind = CLOUD_QUOTA_RECORD_KIND

    def __init__(self, entries: Iterable[str]) -> None:
        self._entries = tuple(entries)

    def keys(self) -> dict[str, str]:
        return {name: cloud_quota_record(name) for name in self._entries}

    def encode(self, key: str, value: Asked | Unreadable) -> tuple[dict[str, str], dict[str, str]]:
        if isinstance(value, Unreadable):
            raise ValueError(f"{key}: an unreadable record is never written back")
        body = {
            "value": value.value,
            "target": value.target,
            "max": value.max,
            "requestId": value.request_id,
            "status": value.status,
            "outcome": value.outcome,
            "at": value.at.isoformat(),
        }
        return {CLOUD_QUOTA_LABEL: key}, {CLOUD_QUOTA_KEY: json.dumps(body, sort_keys=True)}

    def decode(self, key: str, name: str, data: Mapping[str, str]) -> Asked | Unreadable:
        try:
            body = json.loads(data[CLOUD_QUOTA_KEY])
            outcome = body["outcome"]
            if outcome not in _OUTCOMES:
                raise ValueError(f"unknown outcome {outcome!r}")
            at = datetime.fromisoformat(body["at"])
            if at.tzinfo is None:
                raise ValueError("at has no UTC offset")
            return Asked(
                int(body["value"]),
                int(body["target"]),
                None if body.get("max") is None else int(body["max"]),
                None if body.get("requestId") is None else str(body["requestId"]),
                str(body["status"]),
                outcome,
                at,
            )
        except (KeyError, ValueError, TypeError) as exc:
            return Unreadable(f"ConfigMap {name}: {exc!r}")
