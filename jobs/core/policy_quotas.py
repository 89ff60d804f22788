"""The ``namespaceQuotas`` section of the policy: quota limits by resource name, namespace selectors, rules."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator

from jobs.core.policy_fields import Model, Name, NamespacePattern, Timezone
from jobs.core.policy_schedule import Holidays, WorkingHours
from jobs.core.quantity import STANDARD_RESOURCES, is_extended_resource, parse_quantity
from jobs.core.timespec import quoted


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


def _check_label_key(value: str) -> str:
    if not _LABEL_KEY.fullmatch(value):
        raise ValueError(f"{quoted(value)} is not a label key")
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
