"""The nodegroups record format: one record per node group (a ConfigMap in its cluster), what the group looked like
before it went down and which group it describes, so a crash mid-run never loses what is needed to restore it.
Versioned (``RECORD_SCHEMA``); a stored record that cannot be used is a :class:`RecordError`, never half-read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from jobs.core.group_config import GroupConfig
from jobs.core.group_identity import GroupIdentity, RecordError
from jobs.core.timespec import ECHO_LIMIT, quoted
from jobs.core.wake import KeepUp, NodeShape, WakeRecord

Phase = Literal["stopping", "down", "up"]


RECORD_SCHEMA = 2  # 2: records say which group they describe


def _instant(data: Mapping[str, Any], key: str) -> datetime:
    value = datetime.fromisoformat(str(data[key]))
    if value.tzinfo is None:
        raise RecordError(f"{key} {quoted(data[key], ECHO_LIMIT)} has no UTC offset")
    return value


#: A drain that gave up is tried again after this back-off (doubling per give-up on the same blockers, capped), or
#: as soon as what blocked it changes: not every run, which would cordon and evict all night for nothing.
DRAIN_BACKOFF_FIRST = timedelta(minutes=30)
DRAIN_BACKOFF_CAP = timedelta(hours=4)


def drain_backoff(attempts: int) -> timedelta:
    """How long after its ``attempts``-th consecutive give-up on the same blockers a drain waits: 30 min, 1 h, 2 h,
    then 4 h for every later one."""
    return min(DRAIN_BACKOFF_FIRST * (1 << max(0, min(attempts, 16) - 1)), DRAIN_BACKOFF_CAP)


def _names(pods: tuple[str, ...]) -> tuple[str, ...]:
    """``namespace/name`` of each ``namespace/name/uid``."""
    return tuple(sorted(p.rsplit("/", 1)[0] for p in pods))


@dataclass(frozen=True)
class DrainBlock:
    """Why the last drain of a group gave up, durably (in its record): the pods it could not evict and the
    PodDisruptionBudgets that refused, with the disruptions each allowed then. The drain is not tried again before
    ``retry_at`` unless one of these changed (no blocking pod left on the group's nodes, a budget allowing another
    number)."""

    at: datetime
    attempts: int  # consecutive give-ups on the same blockers
    pods: tuple[str, ...]  # namespace/name/uid
    budgets: tuple[tuple[str, int], ...]  # (namespace/name, disruptionsAllowed then)

    @property
    def retry_at(self) -> datetime:
        return self.at + drain_backoff(self.attempts)

    def same_blockers(self, other: DrainBlock) -> bool:
        """The same obstacles, for the back-off: the same budgets allowing the same, and pods of the same names. A
        pod a controller recreated under its name (new uid) is the same obstacle again, so the back-off keeps
        doubling instead of starting over."""
        return (_names(self.pods), self.budgets) == (_names(other.pods), other.budgets)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "attempts": self.attempts,
            "pods": list(self.pods),
            "budgets": [{"name": n, "disruptionsAllowed": a} for n, a in self.budgets],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DrainBlock:
        return cls(
            at=_instant(data, "at"),
            attempts=int(data["attempts"]),
            pods=tuple(sorted(str(p) for p in data.get("pods") or ())),
            budgets=tuple(sorted((str(b["name"]), int(b["disruptionsAllowed"])) for b in data.get("budgets") or ())),
        )


@dataclass(frozen=True)
class Record:
    """The durable record of a group's pre-shutdown configuration (a ConfigMap per group in its cluster)."""

    config: GroupConfig
    phase: Phase
    recorded_at: datetime
    busy_since: datetime | None = None  # when a shutdown was first postponed because GPU pods were running
    describes: GroupIdentity | None = None  # set by the store when it saves the record
    drain_blocked: DrainBlock | None = None  # the last drain gave up (phase up: nothing was changed)
    # Wake on demand (``jobs.core.wake``): the wake in force (its config stays the pre-shutdown one), what the
    # group's nodes looked like when it went down, and, until the morning restore, the controllers (uids) of the
    # pods this job evicted or whose nodes it removed, and the pods (uids) that woke it.
    wake: WakeRecord | None = None
    shape: NodeShape | None = None
    displaced: tuple[str, ...] = ()
    woke: tuple[str, ...] = ()
    kept_up: tuple[KeepUp, ...] = ()  # each gpu-jobs/keep-up-until seen at this shutdown, with when (its cap's start)

    def to_json(self) -> dict[str, Any]:
        blocked: dict[str, Any] = {"drainBlocked": self.drain_blocked.to_json()} if self.drain_blocked else {}
        if self.wake is not None:
            blocked["wake"] = self.wake.to_json()
        if self.shape is not None:
            blocked["nodeShape"] = self.shape.to_json()
        if self.displaced:
            blocked["displaced"] = list(self.displaced)
        if self.woke:
            blocked["woke"] = list(self.woke)
        if self.kept_up:
            blocked["keptUp"] = [k.to_json() for k in self.kept_up]
        return blocked | {
            "schemaVersion": RECORD_SCHEMA,
            "describes": self.describes.to_json() if self.describes else None,
            "config": self.config.to_json(),
            "phase": self.phase,
            "recordedAt": self.recorded_at.isoformat(),
            "busySince": self.busy_since.isoformat() if self.busy_since else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> Record:
        """Parse a stored record; anything unusable is a RecordError saying what (never a half-read record)."""
        try:
            if not isinstance(data, Mapping):
                raise RecordError("not a JSON object")
            if data.get("schemaVersion") != RECORD_SCHEMA:
                raise RecordError(
                    f"schemaVersion {quoted(data.get('schemaVersion'), ECHO_LIMIT)}, expected {RECORD_SCHEMA}"
                )
            if data.get("phase") not in ("stopping", "down", "up"):
                raise RecordError(f"phase {quoted(data.get('phase'), ECHO_LIMIT)} is not stopping, down or up")
            describes = data.get("describes")
            return cls(
                config=GroupConfig.from_json(data["config"]),
                phase=data["phase"],
                recorded_at=_instant(data, "recordedAt"),
                busy_since=_instant(data, "busySince") if data.get("busySince") else None,
                describes=GroupIdentity.from_json(describes) if describes is not None else None,
                drain_blocked=DrainBlock.from_json(data["drainBlocked"]) if data.get("drainBlocked") else None,
                wake=WakeRecord.from_json(data["wake"]) if data.get("wake") else None,
                shape=NodeShape.from_json(data["nodeShape"]) if data.get("nodeShape") else None,
                displaced=tuple(str(u) for u in data.get("displaced") or ()),
                woke=tuple(str(u) for u in data.get("woke") or ()),
                kept_up=tuple(KeepUp.from_json(k) for k in data.get("keptUp") or ()),
            )
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RecordError(f"malformed: {type(exc).__name__}: {exc}") from None
