"""Node groups: where each provider's rules let a group go, and the steps that take it there.

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
karpenter  NodePool limits,        Karpenter launches for pending pods       limits cpu 0 and nodes 0,
           NodeClaims                                                        then its NodeClaims deleted
=========  ======================  ========================================  ============================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import Record
from jobs.core.policy_fleet import WorkingSize
from jobs.core.providers import PROVIDERS, ProviderKind, ProviderRules
from jobs.labels import CA_CLUSTER_TAG, CA_ENABLED_TAG

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


#: The limits of a Karpenter NodePool at rest: ``cpu: "0"`` blocks every instance type (``nvidia.com/gpu: "0"`` alone
#: still launches types without GPUs), ``nodes: "0"`` also where Karpenter counts nodes (v1.11 on).
ZERO_LIMITS: Mapping[str, str] = {"cpu": "0", "nodes": "0"}


@dataclass(frozen=True)
class SetLimits:
    """Karpenter: the NodePool's ``spec.limits`` exactly as given (keys not given are removed; empty: no limits),
    and ``spec.replicas`` of a static pool."""

    limits: Mapping[str, str]
    replicas: int | None = None

    def _text(self) -> str:
        limits = ", ".join(f"{k} {v}" for k, v in sorted(self.limits.items())) or "none"
        return limits + (f", replicas {self.replicas}" if self.replicas is not None else "")

    def describe(self) -> str:
        return f"limits {self._text()}"

    def done(self) -> str:
        return f"Set the NodePool's limits to {self._text()}"


@dataclass(frozen=True)
class RemoveClaims:
    """Karpenter: delete the pool's NodeClaims (Karpenter drains each node through evictions, then its instance
    goes), NotReady ones included. A claim whose node runs work (GPU pods, ``karpenter.sh/do-not-disrupt`` pods) is
    kept with ``busy`` "keep" (onBusy wait); with "drain" it is deleted unless Karpenter would force pods off it (its
    ``terminationGracePeriod`` with GPU pods running) or stall (a do-not-disrupt pod): those are "force", which
    deletes the claim and the pods that would block it. Nodes in ``keep`` run pods that must not be evicted."""

    busy: Literal["keep", "drain", "force"] = "keep"
    keep: tuple[str, ...] = ()

    def describe(self) -> str:
        kept = f", keeping {', '.join(self.keep)}" if self.keep else ""
        return f"node claims removed (busy ones: {self.busy}{kept})"

    def done(self) -> str:
        return {
            "keep": "Deleted the NodeClaims without running work",
            "drain": "Deleted the NodeClaims (Karpenter drains them)",
            "force": "Deleted the NodeClaims and the pods that would block them",
        }[self.busy]


#: The names of ``prewarm`` placeholder pods start so (``gpu-jobs-prewarm-<pool>-<i>``, in the job's namespace): GPU
#: pods, but no work.
PREWARM_POD_PREFIX = "gpu-jobs-prewarm-"


@dataclass(frozen=True)
class SetPlaceholders:
    """Karpenter ``prewarm``: this many placeholder pods for the pool (a negative priority, so any real pod takes
    their place); 0 removes them."""

    count: int

    def describe(self) -> str:
        return f"{self.count} prewarm placeholder(s)"

    def done(self) -> str:
        return f"Set {self.count} prewarm placeholder pod(s)" if self.count else "Removed the prewarm placeholder pods"


CloudStep = SetAutoscaling | SetSize | SetPower  # what a cloud's node group API is asked
Step = CloudStep | SetLimits | RemoveClaims | SetPlaceholders


def cloud_step(step: Step) -> CloudStep:
    """``step`` for a cloud's adapter: a NodePool's steps reach only the Karpenter adapter (the table's wiring)."""
    if isinstance(step, SetLimits | RemoveClaims | SetPlaceholders):
        raise TypeError(f"{step.describe()}: a Karpenter step sent to a cloud's node group adapter")
    return step


# --- provider rules: where a group can go, and the steps that take it there ---------------------------------


def down_config(kind: ProviderKind, current: GroupConfig, *, stop: bool = False, wake_up: bool = False) -> GroupConfig:
    """The configuration a group has while down."""
    rules = PROVIDERS[kind]
    if rules.by_limits:
        replicas = 0 if current.replicas is not None else None
        zero = dict(ZERO_LIMITS)
        return replace(current, desired=0, limits=zero, replicas=replicas, autoscaling=False, placeholders=0)
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
    if rules.by_limits:  # a pool's record is its limits, written back as they were
        return "it keeps no NodePool limits" if config.limits is None else None
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
        """Nothing left to take down; a pool whose limit is down looks down while claims still go."""
        return all(isinstance(s, RemoveClaims) for s in self.down_steps)

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
    prewarm: int = 0,
) -> Moves:
    """``prewarm``: the placeholder pods a Karpenter pool should have now (while warming up for its window)."""
    current = _known(observed, record)
    down = down_config(rules.kind, current, stop=stop, wake_up=wake_up)
    target = restore_target(rules, current, record, up, cloud_cluster)
    if target is not None and rules.by_limits:
        target = replace(target, placeholders=prewarm)
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
    if rules.by_limits:
        if current.placeholders > target.placeholders:
            steps.append(SetPlaceholders(target.placeholders))  # before the claims go: they would hold them
        # The limit first: a claim deleted before it would be replaced at once by Karpenter for the same pods.
        if (dict(current.limits or {}), current.replicas) != (dict(target.limits or {}), target.replicas):
            steps.append(SetLimits(dict(target.limits or {}), target.replicas))
        if target.desired == 0 and current.desired:
            steps.append(RemoveClaims())  # on every run until none remain
        if current.placeholders < target.placeholders:
            steps.append(SetPlaceholders(target.placeholders))  # once the limits let Karpenter launch
        return steps
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
    if isinstance(step, SetLimits):
        return (dict(live.limits or {}), live.replicas) == (dict(step.limits), step.replicas)
    if isinstance(step, RemoveClaims):
        return not live.desired  # deletes are idempotent: resent while claims remain
    if isinstance(step, SetPlaceholders):
        return live.placeholders == step.count
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
