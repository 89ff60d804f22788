"""The typed policy model: what people write in ``gitops/policy.yaml``.

Field names are a contract (other tools read the same file), so the Python names are snake_case with camelCase
aliases that match the YAML. Unknown keys are rejected everywhere. Validators raise ``ValueError`` with a message
that reads well after ``FILE:LINE: PATH:``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from jobs.core import holiday_regions
from jobs.core.cloud_quota_policy import CloudQuota, cloud_quota_problems
from jobs.core.quantity import STANDARD_RESOURCES, is_extended_resource, parse_quantity
from jobs.core.timespec import parse_clock, parse_days, parse_duration, quoted

API_VERSION = "gpu-jobs/v1"
KIND = "GpuPolicy"


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        # The cached_property helpers below are derived, not fields.
        ignored_types=(cached_property,),
    )


# The shape of every IANA name (Area/Location[/Sub], Etc/GMT+5, EST5EDT), checked before ZoneInfo sees the text:
# ZoneInfo turns "a/a/a/..." into a chain of package imports that ends in RecursionError.
_TIMEZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9][A-Za-z0-9_+-]*){0,2}")


def _check_timezone(value: str) -> str:
    unknown = f"{quoted(value)} is not a known IANA timezone (e.g. Europe/Berlin)"
    if len(value) > 64 or not _TIMEZONE.fullmatch(value):
        raise ValueError(unknown)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(unknown) from None
    return value


def _check_days(value: str) -> str:
    parse_days(value)
    return value


def _check_clock(value: str) -> str:
    parse_clock(value)
    return value


#: The longest warmUp, maxDelay and drainTimeout: each is about one night or weekend, never weeks.
MAX_SETTING_DURATION = timedelta(days=7)


def _check_duration(value: str) -> str:
    parse_duration(value, MAX_SETTING_DURATION)
    return value


_ZERO = re.compile(r"0+[dhms]")


def warm_up_of(value: str | None) -> timedelta:
    """A warm-up: ``0s`` (or ``0m``...) switches a default warm-up off for one group."""
    if value is None or _ZERO.fullmatch(value):
        return timedelta(0)
    return parse_duration(value, MAX_SETTING_DURATION)


def _check_warm_up(value: str) -> str:
    warm_up_of(value)
    return value


def _check_window_duration(value: str) -> str:
    parse_duration(value)
    return value


# croniter's R (random) and H (hashed) pick a value when the expression is read: the schedule would change from
# one run to the next. The lookarounds keep day and month names (FRI, THU, MAR) out of it.
_RANDOM_CRON_FIELD = re.compile(r"(?<![A-Za-z])[RrHh](?![A-Za-z])")
# A leap year's start, so that a cron for 29 February fires within the year checked.
_CRON_CHECK_FROM = datetime(2028, 1, 1) - timedelta(minutes=1)  # noqa: DTZ001 - crons run on naive wall time


def _check_cron(value: str) -> str:
    fields = value.split()
    if len(value) > 100 or len(fields) != 5 or not croniter.is_valid(value):
        raise ValueError(f'{quoted(value)} is not a 5-field cron expression (e.g. "0 22 * * 1-5")')
    if any(_RANDOM_CRON_FIELD.search(f) for f in fields):
        raise ValueError(f"{quoted(value)}: R and H (random or hashed) would move the window from run to run")
    try:
        croniter(value, _CRON_CHECK_FROM, max_years_between_matches=1).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(f"{quoted(value)} never fires (no such date within a year)") from None
    return value


#: Dates and override expiries outside these years are typos, and near year 1 or 9999 the UTC arithmetic of the
#: schedule overflows.
MIN_YEAR, MAX_YEAR = 2000, 2100


def _check_year(value: date) -> date:
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise ValueError(f"{value.isoformat()} is outside the years {MIN_YEAR}-{MAX_YEAR}")
    return value


def _not_a_number(what: str) -> Any:
    """Pydantic reads a number as a Unix timestamp; in a policy it is a typo (the JSON Schema says string)."""

    def check(value: Any) -> Any:
        if isinstance(value, bool | int | float):
            raise ValueError(f"{json.dumps(value)} is not a {what}: write {_EXAMPLES[what]}")
        return value

    return BeforeValidator(check)


_EXAMPLES = {"date": "YYYY-MM-DD, e.g. 2026-12-24", "date-time": 'e.g. "2026-12-02T23:00:00+01:00"'}


def _check_aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("needs a UTC offset, e.g. 2026-12-02T23:00:00+01:00")
    return value


Timezone = Annotated[str, AfterValidator(_check_timezone)]


def _check_name(value: str) -> str:
    # fullmatch: with match, the pattern's $ also accepts "vision-t4\n".
    if not _NAME.fullmatch(value):
        raise ValueError(f'{quoted(value)} is not a valid name (lowercase letters, digits and "-", at most 63)')
    return value


# Patterns appear in the JSON Schema for editors; validation itself goes through the checks above so that the
# messages name the problem instead of quoting a regular expression.
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
DaySet = Annotated[
    str,
    AfterValidator(_check_days),
    WithJsonSchema({"type": "string", "examples": ["Mon-Fri", "Sat,Sun", "daily"]}),
]
Clock = Annotated[str, AfterValidator(_check_clock), WithJsonSchema({"type": "string", "pattern": r"^\d{2}:\d{2}$"})]
_DURATION_SCHEMA = {"type": "string", "pattern": r"^(\d+d)?(\d+h)?(\d+m)?(\d+s)?$", "examples": ["15m", "8h"]}
Duration = Annotated[str, AfterValidator(_check_duration), WithJsonSchema(_DURATION_SCHEMA)]
WarmUp = Annotated[str, AfterValidator(_check_warm_up), WithJsonSchema(_DURATION_SCHEMA)]
WindowDuration = Annotated[str, AfterValidator(_check_window_duration), WithJsonSchema(_DURATION_SCHEMA)]
Cron = Annotated[str, AfterValidator(_check_cron), WithJsonSchema({"type": "string", "examples": ["0 22 * * 1-5"]})]
AwareDatetime = Annotated[
    datetime,
    _not_a_number("date-time"),
    AfterValidator(_check_aware),
    AfterValidator(_check_year),
    PlainSerializer(lambda v: v.isoformat(), return_type=str),
]
PolicyDate = Annotated[date, _not_a_number("date"), AfterValidator(_check_year)]
Name = Annotated[str, AfterValidator(_check_name), WithJsonSchema({"type": "string", "pattern": _NAME.pattern})]


class Holidays(Model):
    """Public holidays (``holidays`` package) plus explicit dates; windows that start on them are off."""

    country: str | None = Field(default=None, description="ISO 3166-1 alpha-2 code, e.g. DE")
    subdivision: str | None = Field(default=None, description="e.g. BE for Berlin")
    dates: tuple[PolicyDate, ...] = Field(default=(), max_length=500)

    @model_validator(mode="after")
    def _known_country(self) -> Holidays:
        if self.subdivision and not self.country:
            raise ValueError("subdivision needs a country")
        if self.country:
            subdivisions = holiday_regions.subdivisions(self.country)
            if subdivisions is None:
                raise ValueError(f'country "{self.country}" is not known to the holidays package')
            if self.subdivision and self.subdivision not in subdivisions:
                raise ValueError(f'"{self.subdivision}" is not a subdivision of {self.country}')
        return self


class WorkingHours(Model):
    """A window: ``days`` + ``start`` + ``end`` local to the group, or ``cron`` + ``duration``."""

    days: DaySet | None = None
    start: Clock | None = None
    end: Clock | None = None
    cron: Cron | None = None
    duration: WindowDuration | None = None

    @model_validator(mode="after")
    def _one_form(self) -> WorkingHours:
        clock_form = (self.days, self.start, self.end)
        cron_form = (self.cron, self.duration)
        if any(v is not None for v in clock_form) and any(v is not None for v in cron_form):
            raise ValueError("use either days/start/end or cron/duration, not both")
        if all(v is None for v in clock_form + cron_form):
            raise ValueError("a window needs days/start/end or cron/duration")
        if any(v is not None for v in clock_form) and any(v is None for v in clock_form):
            raise ValueError("days, start and end go together")
        if any(v is not None for v in cron_form) and any(v is None for v in cron_form):
            raise ValueError("cron and duration go together")
        if self.start is not None and self.start == self.end:
            raise ValueError(f"start and end are both {self.start}: the window is empty")
        return self

    @field_validator("start")
    @classmethod
    def _start_not_24(cls, value: str | None) -> str | None:
        if value is not None and parse_clock(value) is None:
            raise ValueError('"24:00" can only end a window')
        return value

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron!r} for {self.duration}"
        return f"{self.days} {self.start}-{self.end}"


class WorkingSize(Model):
    """The size a group has while up. Without it, the job restores what the group had before shutdown."""

    # Strict: YAML's true is not 1, and "4" is not a number (the JSON Schema agrees).
    min: StrictInt = Field(ge=0)
    desired: StrictInt = Field(ge=0)
    max: StrictInt = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> WorkingSize:
        if not self.min <= self.desired <= self.max:
            raise ValueError(f"needs min <= desired <= max, got {self.min} <= {self.desired} <= {self.max}")
        return self


class AwsLocator(Model):
    """An EKS managed node group (``cluster`` + ``nodegroup``) or a plain ASG (``autoScalingGroup``)."""

    region: str
    cluster: str | None = None
    nodegroup: str | None = None
    auto_scaling_group: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> AwsLocator:
        eks = self.cluster is not None or self.nodegroup is not None
        if eks and self.auto_scaling_group is not None:
            raise ValueError("give cluster+nodegroup (EKS) or autoScalingGroup (plain ASG), not both")
        if eks and (self.cluster is None or self.nodegroup is None):
            raise ValueError("an EKS node group needs both cluster and nodegroup")
        if not eks and self.auto_scaling_group is None:
            raise ValueError("needs cluster+nodegroup (EKS) or autoScalingGroup (plain ASG)")
        return self


class GcpLocator(Model):
    project: str
    location: str
    cluster: str
    node_pool: str


class AzureLocator(Model):
    subscription: str
    resource_group: str
    cluster: str
    agent_pool: str


def _check_context(value: str) -> str:
    # kubeconfig context names are free-form (EKS ARNs, gke_<project>_<zone>_<name>), but never empty, padded or
    # carrying whitespace/control characters: such a name is a copy-paste accident.
    if not value or len(value) > 253 or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"{value!r} is not a kubeconfig context name (no spaces or control characters, at most 253)")
    return value


def _check_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f'"{value}" is not an http(s) URL without query or fragment (e.g. http://prometheus:9090)')
    if parts.username or parts.password:
        raise ValueError("credentials do not belong in a URL in Git: use the job's identity or a Secret")
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ValueError(f'"{value}" has a malformed port') from None
    return value


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _check_matchers(value: dict[str, str]) -> dict[str, str]:
    for label in value:
        if not _LABEL_NAME.fullmatch(label):
            raise ValueError(f'"{label}" is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)')
    return value


KubeContext = Annotated[str, AfterValidator(_check_context)]


class AwsCluster(Model):
    """An EKS cluster (its plain ASGs of self-managed nodes join it by ``cluster:``)."""

    region: str
    cluster: str


class GcpCluster(Model):
    project: str
    location: str
    cluster: str


class AzureCluster(Model):
    subscription: str
    resource_group: str
    cluster: str


ClusterLocator = AwsCluster | GcpCluster | AzureCluster


class PrometheusSource(Model):
    """Where the cluster's DCGM metrics are; ``matchers`` select this cluster's series in a shared Prometheus/Thanos."""

    url: Annotated[str, AfterValidator(_check_url)]
    matchers: Annotated[dict[str, str], AfterValidator(_check_matchers)] = Field(default_factory=dict)


class Cluster(Model):
    """One Kubernetes cluster of the fleet. What its API shows is true of it only."""

    name: Name = Field(description="unique id used by --cluster, logs and records")
    cloud: Literal["aws", "gcp", "azure"]
    aws: AwsCluster | None = None
    gcp: GcpCluster | None = None
    azure: AzureCluster | None = None
    kube_context: KubeContext | None = Field(
        default=None, description="the kubeconfig context that reaches it (a central install acts through it)"
    )
    prometheus: PrometheusSource | None = None

    @model_validator(mode="after")
    def _locator_matches_cloud(self) -> Cluster:
        given = [c for c in ("aws", "gcp", "azure") if getattr(self, c) is not None]
        if given and given != [self.cloud]:
            raise ValueError(f"cloud {self.cloud} takes only the locator `{self.cloud}:` (found: {given})")
        return self

    @property
    def locator(self) -> ClusterLocator | None:
        """None for a cluster the cloud does not manage (e.g. kOps on EC2): only plain ASGs can join it."""
        return self.aws or self.gcp or self.azure


class Schedule(Model):
    """The schedule fields a node group may override from ``defaults``."""

    timezone: Timezone | None = None
    holidays: Holidays | None = None
    working_hours: Annotated[tuple[WorkingHours, ...], Field(max_length=50)] | None = None
    warm_up: WarmUp | None = None
    on_busy: Literal["wait", "drain", "force"] | None = Field(
        default=None, description="GPU pods still running at shutdown: wait (default), drain or force"
    )
    max_delay: Duration | None = Field(default=None, description="with onBusy wait: how long to postpone (default 2h)")
    after_delay: Literal["drain", "force", "stay"] | None = Field(
        default=None, description="with onBusy wait, once maxDelay has passed: drain (default), force, or stay up"
    )
    drain_timeout: Duration | None = Field(default=None, description="how long evictions may take (default 10m)")


class Defaults(Schedule):
    timezone: Timezone = "UTC"


class NodeGroup(Schedule):
    name: Name = Field(description="unique id used everywhere else (overrides, logs, records)")
    cloud: Literal["aws", "gcp", "azure"]
    cluster: str | None = Field(
        default=None,
        description="the cluster (in `clusters`) the group's nodes join; implied by EKS, GKE and AKS locators",
    )
    aws: AwsLocator | None = None
    gcp: GcpLocator | None = None
    azure: AzureLocator | None = None
    always_on: StrictBool = False
    gpus_per_node: StrictInt | None = Field(default=None, ge=1, description="for GPU-hour estimates")
    up: WorkingSize | None = None
    strategy: Literal["scale", "stop"] = Field(
        default="scale", description="AKS only: scale the pool to 0, or stop it (power state Stopped)"
    )
    autoscaler_wake_up: StrictBool = Field(
        default=False,
        description="EKS: keep the Cluster Autoscaler discovery tags at night, so pending pods can wake the group",
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="labels of the group's nodes, where the provider sets none (plain ASGs)"
    )

    @model_validator(mode="after")
    def _locator_matches_cloud(self) -> NodeGroup:
        given = [c for c in ("aws", "gcp", "azure") if getattr(self, c) is not None]
        if given != [self.cloud]:
            raise ValueError(f"cloud {self.cloud} needs exactly one locator `{self.cloud}:` (found: {given or 'none'})")
        return self

    @model_validator(mode="after")
    def _provider_options(self) -> NodeGroup:
        if self.strategy == "stop" and self.cloud != "azure":
            raise ValueError("strategy stop is for AKS agent pools only")
        return self

    @property
    def locator(self) -> AwsLocator | GcpLocator | AzureLocator:
        found = self.aws or self.gcp or self.azure
        assert found is not None  # guaranteed by _locator_matches_cloud
        return found

    @property
    def cluster_locator(self) -> ClusterLocator | None:
        """The cluster the cloud says the group belongs to; None for a plain ASG (it names its cluster)."""
        if self.aws is not None:
            if self.aws.cluster is None:
                return None
            return AwsCluster(region=self.aws.region, cluster=self.aws.cluster)
        if self.gcp is not None:
            return GcpCluster(project=self.gcp.project, location=self.gcp.location, cluster=self.gcp.cluster)
        assert self.azure is not None
        return AzureCluster(
            subscription=self.azure.subscription, resource_group=self.azure.resource_group, cluster=self.azure.cluster
        )


class Override(Model):
    """A temporary state for one node group; it expires by itself at ``until``."""

    node_group: str
    state: Literal["up", "down"]
    until: AwareDatetime
    reason: str = Field(min_length=1)


def _check_hard(value: dict[str, str | int | float]) -> dict[str, str]:
    """Quota limits by resource name: the policy speaks in resource names, the job writes the enforced keys."""
    hard: dict[str, str] = {}
    for name, amount in value.items():
        if name.startswith(("limits.", "requests.")):
            raise ValueError(
                f"{quoted(name)}: give the resource name ({name.split('.', 1)[1]}); the job writes the key"
                " Kubernetes enforces (requests.<name> for extended resources, which are never enforced as limits.)"
            )
        if name.startswith("count/"):
            # It looks like an extended resource, so it would be written as requests.count/..., which Kubernetes
            # stores and never enforces.
            raise ValueError(
                f"{quoted(name)}: object counts (count/<resource>) are not managed by the quotas job: keep them in a"
                " ResourceQuota of your own"
            )
        if name not in STANDARD_RESOURCES and not is_extended_resource(name):
            raise ValueError(f"{quoted(name)} is not a resource name (e.g. nvidia.com/gpu, cpu, memory, pods)")
        quantity = parse_quantity(repr(amount) if isinstance(amount, float) else amount)
        if quantity < 0:
            raise ValueError(f"{name}: {amount} is negative")
        if is_extended_resource(name) and quantity.denominator != 1:
            raise ValueError(f"{name}: {amount} is not a whole number (extended resources are counted in units)")
        hard[name] = repr(amount) if isinstance(amount, float) else str(amount)
    return hard


def _no_booleans(value: Any) -> Any:
    # Before pydantic's lax union turns YAML's true (or yes, on) into 1 and false into 0.
    if isinstance(value, dict):
        for name, amount in value.items():
            if isinstance(amount, bool):
                raise ValueError(f"{name}: {json.dumps(amount)} is not a quantity (e.g. 4, 500m, 256Gi)")
    return value


Hard = Annotated[
    dict[str, str | int | float],
    BeforeValidator(_no_booleans),
    AfterValidator(_check_hard),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": ["string", "number"]}}),
]
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_NAMESPACE_PATTERN = re.compile(r"[a-z0-9*?\[\]-]{1,63}")


def _check_label_key(value: str) -> str:
    if not _LABEL_KEY.fullmatch(value):
        raise ValueError(f"{quoted(value)} is not a label key")
    return value


def _check_namespace_pattern(value: str) -> str:
    if not _NAMESPACE_PATTERN.fullmatch(value):
        raise ValueError(f"{quoted(value)} is not a namespace name or glob (e.g. ml-team, team-*)")
    return value


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _check_label_value(value: str) -> str:
    # Kubernetes refuses such a value on a namespace, so a selector asking for it could never match.
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{quoted(value)} is not a label value (at most 63 letters, digits, '-', '_' or '.', starting and ending"
            " with a letter or digit): no namespace can carry it"
        )
    return value


LabelKey = Annotated[str, AfterValidator(_check_label_key)]
LabelValue = Annotated[str, AfterValidator(_check_label_value)]
NamespacePattern = Annotated[str, AfterValidator(_check_namespace_pattern)]


class LabelRequirement(Model):
    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[LabelValue, ...] = ()

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> LabelRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs values")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(Model):
    """As in Kubernetes: every label of ``matchLabels`` and every requirement of ``matchExpressions``."""

    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    match_expressions: tuple[LabelRequirement, ...] = ()

    @model_validator(mode="after")
    def _not_empty(self) -> LabelSelector:
        if not self.match_labels and not self.match_expressions:
            raise ValueError("an empty selector would match every namespace: give matchLabels or matchExpressions")
        return self


class QuotaOffHours(Model):
    """Different limits outside these working hours (timezone and holidays as for node groups)."""

    working_hours: tuple[WorkingHours, ...] = Field(min_length=1, max_length=50)
    timezone: Timezone | None = None
    holidays: Holidays | None = None
    hard: Hard


class QuotaRule(Model):
    namespaces: tuple[NamespacePattern, ...] | None = Field(default=None, description="names or globs")
    selector: LabelSelector | None = None
    clusters: tuple[str, ...] | None = Field(default=None, description="only in these clusters")
    hard: Hard
    off_hours: QuotaOffHours | None = None

    @model_validator(mode="after")
    def _matches_something(self) -> QuotaRule:
        if self.namespaces is None and self.selector is None:
            raise ValueError("a rule needs namespaces or a selector (or both)")
        return self


class NamespaceQuotas(Model):
    """One managed ResourceQuota per namespace, in every cluster of the fleet; the first matching rule wins."""

    quota_name: Name = "gpu-quota"
    default: Hard | None = Field(default=None, description="every namespace no rule matches and not excluded")
    exclude: tuple[NamespacePattern, ...] = ()
    rules: tuple[QuotaRule, ...] = Field(default=(), max_length=500)


class Policy(Model):
    api_version: Literal["gpu-jobs/v1"]
    kind: Literal["GpuPolicy"]
    defaults: Defaults = Defaults()
    clusters: tuple[Cluster, ...] = Field(
        default=(),
        max_length=100,
        description="the fleet; may be omitted when the node groups' locators say it (one cluster per locator)",
    )
    node_groups: tuple[NodeGroup, ...] = Field(default=(), max_length=500)
    overrides: tuple[Override, ...] = Field(default=(), max_length=500)
    namespace_quotas: NamespaceQuotas | None = None
    cloud_quotas: tuple[CloudQuota, ...] = Field(default=(), max_length=200)

    def group(self, name: str) -> NodeGroup:
        for group in self.node_groups:
            if group.name == name:
                return group
        raise KeyError(name)

    @cached_property
    def _fleet(self) -> _Fleet:
        return _resolve_fleet(self)

    @property
    def fleet(self) -> tuple[Cluster, ...]:
        """The declared clusters, or those the node groups imply when ``clusters`` is omitted."""
        return self._fleet.clusters

    def cluster(self, name: str) -> Cluster:
        for cluster in self.fleet:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    def cluster_of(self, group: NodeGroup) -> Cluster:
        """The cluster whose Kubernetes API sees the group's nodes (always resolves in a validated policy)."""
        return self.cluster(self._fleet.membership[group.name])

    def groups_in(self, cluster: str) -> tuple[NodeGroup, ...]:
        return tuple(g for g in self.node_groups if self._fleet.membership.get(g.name) == cluster)


#: The cluster a policy without ``clusters`` gives to plain ASGs when no other group implies one.
DEFAULT_CLUSTER = "default"


class _Fleet:
    """The resolved fleet: clusters, each group's cluster, and what did not resolve (as (path, message))."""

    def __init__(self) -> None:
        self.clusters: tuple[Cluster, ...] = ()
        self.membership: dict[str, str] = {}
        self.problems: list[tuple[tuple[str | int, ...], str]] = []


def _describe_locator(locator: ClusterLocator) -> str:
    fields = locator.model_dump(by_alias=True)
    return ", ".join(f"{k} {v}" for k, v in fields.items() if k != "cluster")


def _implied_clusters(policy: Policy, fleet: _Fleet) -> Iterator[Cluster]:
    seen: dict[ClusterLocator, int] = {}
    names: dict[str, int] = {}
    for i, group in enumerate(policy.node_groups):
        locator = group.cluster_locator
        if locator is None or locator in seen:
            continue
        seen[locator] = i
        if locator.cluster in names:
            other = policy.node_groups[names[locator.cluster]]
            fleet.problems.append(
                (
                    ("nodeGroups", i, group.cloud),
                    f'cluster "{locator.cluster}" ({_describe_locator(locator)}) has the same name as the cluster of'
                    f" nodeGroups[{names[locator.cluster]}] ({other.name}): declare `clusters:` with distinct names",
                )
            )
            continue
        names[locator.cluster] = i
        yield Cluster.model_validate({"name": locator.cluster, "cloud": group.cloud, group.cloud: locator})


def _resolve_fleet(policy: Policy) -> _Fleet:
    fleet = _Fleet()
    declared = bool(policy.clusters)
    clusters = list(policy.clusters) if declared else list(_implied_clusters(policy, fleet))
    by_locator = {c.locator: c for c in clusters if c.locator is not None}
    by_name = {c.name: c for c in clusters}
    for i, group in enumerate(policy.node_groups):
        locator = group.cluster_locator
        if locator is not None:
            found = by_locator.get(locator)
            if found is None:
                # Only reachable with declared clusters: implied ones cover every locator.
                fleet.problems.append(
                    (
                        ("nodeGroups", i, group.cloud),
                        f'cluster "{locator.cluster}" ({_describe_locator(locator)}) is not declared in `clusters`',
                    )
                )
                continue
            if group.cluster is not None and group.cluster != found.name:
                fleet.problems.append(
                    (("nodeGroups", i, "cluster"), f'"{group.cluster}": the locator says cluster "{found.name}"')
                )
                continue
            fleet.membership[group.name] = found.name
        elif group.cluster is not None:
            if group.cluster not in by_name:
                fleet.problems.append((("nodeGroups", i, "cluster"), f'unknown cluster "{group.cluster}"'))
                continue
            fleet.membership[group.name] = group.cluster
        elif len(clusters) == 1:
            fleet.membership[group.name] = clusters[0].name
        elif not clusters:
            # A single-cluster user with plain ASGs only: one anonymous cluster, reached through the current context.
            clusters.append(Cluster(name=DEFAULT_CLUSTER, cloud="aws"))
            by_name[DEFAULT_CLUSTER] = clusters[-1]
            fleet.membership[group.name] = DEFAULT_CLUSTER
        else:
            fleet.problems.append(
                (
                    ("nodeGroups", i, "cluster"),
                    "required: a plain Auto Scaling group names the cluster its nodes join"
                    f" (one of {', '.join(sorted(by_name))})",
                )
            )
    fleet.clusters = tuple(clusters)
    return fleet


def _cluster_problems(policy: Policy) -> list[tuple[tuple[str | int, ...], str]]:
    problems: list[tuple[tuple[str | int, ...], str]] = []
    names: dict[str, int] = {}
    locators: dict[ClusterLocator, int] = {}
    for i, cluster in enumerate(policy.clusters):
        if cluster.name in names:
            problems.append(
                (("clusters", i, "name"), f'"{cluster.name}" is already used by clusters[{names[cluster.name]}]')
            )
        names.setdefault(cluster.name, i)
        if cluster.locator is not None:
            if cluster.locator in locators:
                problems.append(
                    ((("clusters", i, cluster.cloud)), f"same cluster as clusters[{locators[cluster.locator]}]")
                )
            locators.setdefault(cluster.locator, i)
    return problems + policy._fleet.problems


def cross_reference_problems(policy: Policy) -> list[tuple[tuple[str | int, ...], str]]:
    """Rules that span entries (unique names, overrides that name a group), as (path, message) pairs."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    seen: dict[str, int] = {}
    for i, group in enumerate(policy.node_groups):
        if group.name in seen:
            problems.append(
                (("nodeGroups", i, "name"), f'"{group.name}" is already used by nodeGroups[{seen[group.name]}]')
            )
        seen.setdefault(group.name, i)
    locators: dict[Any, int] = {}
    for i, group in enumerate(policy.node_groups):
        key = group.locator
        if key in locators:
            problems.append(((("nodeGroups", i, group.cloud)), f"same node group as nodeGroups[{locators[key]}]"))
        locators.setdefault(key, i)
    for i, override in enumerate(policy.overrides):
        if override.node_group not in seen:
            problems.append((("overrides", i, "nodeGroup"), f'unknown node group "{override.node_group}"'))
    return problems + _cluster_problems(policy) + cloud_quota_problems(policy)


def effective_schedule(
    policy: Policy, group: NodeGroup
) -> tuple[ZoneInfo, Holidays | None, tuple[WorkingHours, ...], timedelta]:
    """A group's own schedule fields, each falling back to ``defaults``."""
    tz = ZoneInfo(group.timezone or policy.defaults.timezone)
    holidays = group.holidays if group.holidays is not None else policy.defaults.holidays
    windows = group.working_hours if group.working_hours is not None else (policy.defaults.working_hours or ())
    # A group's own warmUp, "0s" included, replaces the default's (None falls back).
    warm = group.warm_up if group.warm_up is not None else policy.defaults.warm_up
    return tz, holidays, windows, warm_up_of(warm)
