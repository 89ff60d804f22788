"""Node groups: their configuration as the job sees it, and where each provider's rules let it go (the steps).

One generic shape serves every provider; ``Provider`` rules say what "down" means for each and what a
provider cannot do (EKS keeps maxSize >= 1, AKS system pools are never scaled to zero):

=========  ======================  ========================================  ============================
provider   min/desired/max          autoscaling                               down
=========  ======================  ========================================  ============================
eks        group bounds and size   Cluster Autoscaler discovery tags on ASG  0/0/1, tags removed
asg        group bounds and size   Cluster Autoscaler discovery tags         0/0/0, tags removed
gke        autoscaler bounds,      node pool autoscaling                     autoscaling off, 0 per zone
           node count per zone
aks        autoscaler bounds,      agent pool autoscaler                     autoscaler off, count 0
           node count                                                        (or power state Stopped)
=========  ======================  ========================================  ============================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from jobs.core.policy_fleet import WorkingSize
from jobs.core.providers import PROVIDERS, ProviderKind, ProviderRules
from jobs.core.timespec import ECHO_LIMIT, quoted
from jobs.errors import CloudError
from jobs.labels import CA_CLUSTER_TAG, CA_ENABLED_TAG

Phase = Literal["stopping", "down", "up"]


@dataclass(frozen=True)
class GroupConfig:
    """What the cloud says about a group; also what is recorded before a shutdown and restored after.

    ``desired`` is None where the provider reports no live size (a GKE node pool). ``autoscaler_tags`` holds the
    Cluster Autoscaler discovery tags of EKS/ASG groups exactly as found, so that restoring re-creates them.
    """

    min: int
    desired: int | None
    max: int
    autoscaling: bool = False
    autoscaler_tags: Mapping[str, str] = field(default_factory=dict)
    propagated_tags: frozenset[str] = frozenset()  # EKS/ASG: discovery tags with PropagateAtLaunch
    autoscaler_profile: str | None = None  # GKE: the autoscaler's location policy (BALANCED, ANY)
    stopped: bool = False
    system: bool = False  # AKS System mode pool: refused
    zones: int = 1  # GKE: node counts are per zone
    busy: bool = False  # an update is running on the group right now (read-only hint)
    # Why the provider has fewer nodes than it was asked for (stockout, quota, no free IPs), in its own words;
    # None when it reports nothing missing. Read-only, never recorded.
    shortfall: str | None = None
    # Nodes asked for that the provider has not launched (yet): a fact without a cause, e.g. a plain ASG's
    # instances short of its desired capacity. Read-only, never recorded.
    missing: int = 0

    def describe(self) -> str:
        """The configuration as a person reads it (an Event's): ``min 1, desired 3, max 8, autoscaler on``."""
        desired = "unknown" if self.desired is None else str(self.desired)
        parts = [f"min {self.min}", f"desired {desired}", f"max {self.max}"]
        if not self.autoscaling and self.desired is not None and self.max < self.desired:
            parts = [f"desired {desired}"]  # bounds the provider keeps but does not use (an AKS manual pool: 0, 0)
        if self.zones > 1:
            parts[-1] += f" (per zone, {self.zones} zones)"
        if self.autoscaling:
            profile = f" ({self.autoscaler_profile})" if self.autoscaler_profile else ""
            tags = f" with {len(self.autoscaler_tags)} discovery tags" if self.autoscaler_tags else ""
            parts.append(f"autoscaler on{profile}{tags}")
        if self.stopped:
            parts.append("stopped")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "min": self.min,
            "desired": self.desired,
            "max": self.max,
            "autoscaling": self.autoscaling,
            "autoscalerTags": dict(self.autoscaler_tags),
            "propagatedTags": sorted(self.propagated_tags),
            "autoscalerProfile": self.autoscaler_profile,
            "stopped": self.stopped,
            "system": self.system,
            "zones": self.zones,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupConfig:
        return cls(
            min=int(data["min"]),
            desired=None if data.get("desired") is None else int(data["desired"]),
            max=int(data["max"]),
            autoscaling=bool(data.get("autoscaling", False)),
            autoscaler_tags=dict(data.get("autoscalerTags", {})),
            propagated_tags=frozenset(data.get("propagatedTags", ())),
            autoscaler_profile=data.get("autoscalerProfile"),
            stopped=bool(data.get("stopped", False)),
            system=bool(data.get("system", False)),
            zones=int(data.get("zones", 1)),
        )


class NotDelivered(CloudError):
    """The provider accepted a scale-up but could not bring the nodes (a stockout, a quota, no free addresses).
    Not retried within a run: it does not clear in seconds, and resending a size already set changes nothing."""


# --- the steps a provider adapter knows how to apply, one API change each ---------------------------------


@dataclass(frozen=True)
class CloudGroup:
    """A GPU node group found in a cloud, for reporting the ones the policy does not list."""

    cloud: str
    locator: Mapping[
        str, str
    ]  # the policy locator fields that would select it, e.g. {"region", "cluster", "nodegroup"}
    instance_type: str
    gpus_per_node: int | None = None


@dataclass(frozen=True)
class SetAutoscaling:
    """Switch the autoscaler off, or on with bounds (GKE/AKS) / with discovery tags (EKS/ASG)."""

    enabled: bool
    min: int = 0
    max: int = 0
    tags: Mapping[str, str] = field(default_factory=dict)
    propagate: frozenset[str] = frozenset()  # tags set with PropagateAtLaunch
    profile: str | None = None  # GKE location policy

    def describe(self) -> str:
        if not self.enabled:
            return "autoscaler off"
        return f"autoscaler on ({self.min}..{self.max})" if not self.tags else "autoscaler discovery tags restored"

    def done(self) -> str:
        """The step once applied, as a sentence's start (an Event's)."""
        if not self.enabled:
            return "Turned the autoscaler off"
        if self.tags:
            return "Restored the autoscaler discovery tags"
        return f"Turned the autoscaler on (min {self.min}, max {self.max})"


@dataclass(frozen=True)
class SetSize:
    """EKS/ASG: min/desired/max together. GKE: node count per zone (``desired``). AKS: count (``desired``)."""

    min: int
    desired: int
    max: int

    def describe(self) -> str:
        return f"size {self.min}/{self.desired}/{self.max}"

    def done(self) -> str:
        return f"Set the size to min {self.min}, desired {self.desired}, max {self.max}"


@dataclass(frozen=True)
class SetPower:
    """AKS agent pool power state."""

    stopped: bool

    def describe(self) -> str:
        return "power Stopped" if self.stopped else "power Running"

    def done(self) -> str:
        return "Stopped the pool" if self.stopped else "Started the pool"


Step = SetAutoscaling | SetSize | SetPower


RECORD_SCHEMA = 2  # 2: records say which group they describe


class RecordError(ValueError):
    """A stored record that cannot be used: malformed, of another schema, or describing another group."""


@dataclass(frozen=True)
class GroupIdentity:
    """What a record describes: the cloud's group in its cluster, not the policy's name for it. A record is applied
    only to the group it was taken from: a renamed group keeps its record, a name pointed elsewhere does not."""

    cluster: str
    cloud: str
    locator: tuple[tuple[str, str], ...]  # sorted (key, value) pairs, e.g. (("nodePool", "h100"), ...)

    @classmethod
    def of(cls, cluster: str, cloud: str, locator: Mapping[str, Any]) -> GroupIdentity:
        return cls(cluster, cloud, tuple(sorted((k, str(v)) for k, v in locator.items() if v is not None)))

    def describe(self) -> str:
        order = ("region", "project", "subscription", "location", "resourceGroup", "cluster")
        values = sorted(self.locator, key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
        return f"{self.cloud} {'/'.join(v for _, v in values)} in cluster {self.cluster}"

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "cloud": self.cloud, "locator": dict(self.locator)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupIdentity:
        locator = data["locator"]
        if not isinstance(locator, Mapping):
            raise RecordError("describes.locator is not a mapping")
        return cls.of(str(data["cluster"]), str(data["cloud"]), locator)


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

    def to_json(self) -> dict[str, Any]:
        blocked = {"drainBlocked": self.drain_blocked.to_json()} if self.drain_blocked else {}
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
            )
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RecordError(f"malformed: {type(exc).__name__}: {exc}") from None


# --- provider rules: where a group can go, and the steps that take it there ---------------------------------


def down_config(kind: ProviderKind, current: GroupConfig, *, stop: bool = False, wake_up: bool = False) -> GroupConfig:
    """The configuration a group has while down."""
    rules = PROVIDERS[kind]
    if rules.autoscaler_by_tags:
        # maxSize stays at the provider's floor (EKS 1, an ASG 0); the discovery tags stay only if the autoscaler may
        # wake the group.
        keep_tags = rules.wake_up and wake_up and current.autoscaling
        return replace(current, min=0, desired=0, max=rules.min_max_size, autoscaling=keep_tags)
    if rules.can_stop and stop:
        # Stopping an AKS pool stops its autoscaler too, and starting it restarts it (Azure docs, "Start and stop
        # an AKS node pool"): the autoscaler settings stay as they are.
        return replace(current, stopped=True)
    return replace(current, desired=0, autoscaling=False)


def restore_target(
    rules: ProviderRules,
    current: GroupConfig,
    record: Record | None,
    up: WorkingSize | None,
    cloud_cluster: str | None,
) -> GroupConfig | None:
    """What "up" means for a group: the policy's working size over the recorded configuration; None without
    either (never guessed)."""
    if record is None and up is None:
        return None
    base = record.config if record is not None else current
    target = replace(base, stopped=False, busy=False, shortfall=None, missing=0)
    if up is None:
        return target
    target = replace(target, min=up.min, desired=up.desired, max=up.max)
    if record is not None:
        return target
    # A policy size but no record: the autoscaler comes back on the way the provider normally has it.
    if rules.autoscaler_by_tags:
        if cloud_cluster is None:
            return target  # a plain ASG names no cluster: its discovery tags are unknown
        tags = {CA_ENABLED_TAG: "true", CA_CLUSTER_TAG.format(cluster=cloud_cluster): "owned"}
        return replace(target, autoscaling=True, autoscaler_tags=tags)
    return replace(target, autoscaling=target.min < target.max)


def record_problem(rules: ProviderRules, record: Record, up: WorkingSize | None) -> str | None:
    """Why a record the job works from (phase stopping or down) cannot be used, or None: sizes the provider would
    refuse or that could never be right (a record edited by hand, or written by a bug). With a policy ``up`` size
    the record's sizes are not restored, so they cannot do harm and are not checked."""
    if up is not None:
        return None
    config = record.config
    sizes = f"{config.min}/{config.desired}/{config.max}"
    if min(config.min, config.max, config.desired or 0) < 0:
        return f"sizes {sizes} are negative"
    # The provider's own autoscaler reports no bounds while it is off (GKE 0..0): only the count matters then.
    bounded = rules.autoscaler_by_tags or config.autoscaling
    if bounded and not config.min <= (config.desired if config.desired is not None else config.min) <= config.max:
        return f"sizes {sizes} are not min <= desired <= max"
    if max(config.min, config.max, config.desired or 0) > rules.node_limit:
        return f"sizes {sizes} are above {rules.describe_limit()}"
    return None


@dataclass(frozen=True)
class Moves:
    """Where a group can go from what was observed, per its provider's rules (one call per group and run)."""

    current: GroupConfig  # as observed, a size the provider does not report filled in from this job's record
    down: GroupConfig
    down_steps: tuple[Step, ...]
    up: GroupConfig | None  # None: no record and no policy size (never guessed)
    up_steps: tuple[Step, ...]
    record_problem: str | None  # the record in force cannot be worked from

    @property
    def looks_down(self) -> bool:
        return not self.down_steps

    @property
    def brings_nodes(self) -> bool:
        """Whether going up asks the provider for nodes (a size or a power state), not only the autoscaler."""
        return any(isinstance(s, SetSize | SetPower) for s in self.up_steps)


def moves(
    rules: ProviderRules,
    observed: GroupConfig,
    record: Record | None,
    *,
    up: WorkingSize | None,
    stop: bool,
    wake_up: bool,
    cloud_cluster: str | None,
) -> Moves:
    current = _known(observed, record)
    down = down_config(rules.kind, current, stop=stop, wake_up=wake_up)
    target = restore_target(rules, current, record, up, cloud_cluster)
    in_force = record is not None and record.phase in ("stopping", "down")
    return Moves(
        current=current,
        down=down,
        down_steps=tuple(steps_between(rules.kind, current, down)),
        up=target,
        up_steps=tuple(steps_between(rules.kind, current, target)) if target is not None else (),
        record_problem=record_problem(rules, record, up) if in_force and record is not None else None,
    )


def _known(config: GroupConfig, record: Record | None) -> GroupConfig:
    """Fill a size the provider does not report (GKE) from what this job itself did last."""
    if config.desired is not None or record is None:
        return config
    if record.phase == "down" and not config.autoscaling:
        return replace(config, desired=0)
    return config  # phase stopping: unknown, so the resize is sent again (it is idempotent)


def steps_between(kind: ProviderKind, current: GroupConfig, target: GroupConfig) -> list[Step]:
    """The ordered steps from ``current`` to ``target``; empty when nothing differs.

    Going down, the autoscaler goes off first so it cannot fight the resize (GKE: disable autoscaling, then
    resize); going up, the size comes first and the autoscaler last (AKS cannot scale and enable its autoscaler
    in one update; GKE: resize, then re-enable).
    """
    rules = PROVIDERS[kind]
    steps: list[Step] = []
    autoscaler_differs = current.autoscaling != target.autoscaling or (
        target.autoscaling and _bounds(rules, current) != _bounds(rules, target)
    )
    if autoscaler_differs and not target.autoscaling:
        steps.append(SetAutoscaling(False))
    if current.stopped and not target.stopped:
        steps.append(SetPower(False))
    if _size_differs(rules, current, target):
        steps.append(SetSize(target.min, target.desired or 0, target.max))
    if autoscaler_differs and target.autoscaling:
        steps.append(
            SetAutoscaling(
                True,
                target.min,
                target.max,
                dict(target.autoscaler_tags),
                target.propagated_tags,
                target.autoscaler_profile,
            )
        )
    if target.stopped and not current.stopped:
        steps.append(SetPower(True))
    return steps


def step_applied(kind: ProviderKind, live: GroupConfig, step: Step) -> bool:
    """Whether the live configuration already shows ``step``: after a write whose answer was lost, it is resent
    only if not."""
    rules = PROVIDERS[kind]
    if isinstance(step, SetPower):
        return live.stopped == step.stopped
    if isinstance(step, SetSize):
        target = replace(live, min=step.min, desired=step.desired, max=step.max, autoscaling=False)
        return not _size_differs(rules, live, target)
    if not step.enabled:
        return not live.autoscaling
    if rules.autoscaler_by_tags:
        return all(live.autoscaler_tags.get(key) == value for key, value in step.tags.items())
    return live.autoscaling and (live.min, live.max) == (step.min, step.max)


def _bounds(rules: ProviderRules, config: GroupConfig) -> tuple[object, ...]:
    """What the autoscaler's configuration consists of, per provider: restored only when it differs."""
    if rules.autoscaler_by_tags:
        return (dict(config.autoscaler_tags), config.propagated_tags)
    return (config.min, config.max, config.autoscaler_profile)


def _size_differs(rules: ProviderRules, current: GroupConfig, target: GroupConfig) -> bool:
    if rules.autoscaler_by_tags:
        if (current.min, current.max) != (target.min, target.max):
            return True
        # While an autoscaler owns the group, desired is its business within the bounds.
        if target.autoscaling and current.desired is not None:
            return not target.min <= current.desired <= target.max
        return current.desired != target.desired
    if target.stopped or (target.autoscaling and current.autoscaling) or target.desired is None:
        return False  # a stopped pool keeps its count; an autoscaled one sizes itself
    # Restoring: the size comes back before the autoscaler does, so the group starts at its recorded size.
    return current.desired is None or current.desired != target.desired
