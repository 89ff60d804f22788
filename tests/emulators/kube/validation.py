"""Validation like the real server's, in its two stages:

1. decoding against the official OpenAPI schema (bundled in ``kubernetes-validate``): a wrong type is a decode error,
   400 BadRequest ``... cannot be handled as a <Kind>``; an unknown field is dropped with a ``Warning`` header
   (``fieldValidation=Warn``, the default), dropped silently (``Ignore``) or refused with 400 (``Strict``);
2. semantic validation: 422 Invalid with field causes (required fields, names, labels, quantities, the rules the
   jobs meet on GPU pods and quotas).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
import json
import re
from fractions import Fraction
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from referencing import Registry, Resource

from . import apps, batch, crd_schema
from .errors import bad_request, invalid
from .quantity import QuantityError, canonical, parse
from .resources import ResourceType

Json = dict[str, Any]
Cause = tuple[str, str, str]

#: The Kubernetes minor whose schemas the emulator validates against (the kubectl shipped for tests is 1.37).
SCHEMA_DIR = "kubernetes-json-schema/v1.37.0-local-strict"


@functools.cache
def _registry() -> Registry:
    root = importlib.resources.files("kubernetes_validate").joinpath(SCHEMA_DIR)
    definitions = json.loads(root.joinpath("_definitions.json").read_text())
    return Resource.from_contents(definitions) @ Registry()


@functools.cache
def _validator(rt: ResourceType) -> Any:
    """The same schema files and validator ``kubernetes_validate.validate(obj, "1.37", strict=True)`` uses, built
    once per kind: that function re-reads the 1.8 MB definitions file on every call."""
    api = f"{rt.group.split('.')[0]}-{rt.version}" if rt.group else rt.version
    root = importlib.resources.files("kubernetes_validate").joinpath(SCHEMA_DIR)
    schema = json.loads(root.joinpath(f"{rt.kind.lower()}-{api}.json").read_text())
    registry = Resource.from_contents(schema) @ _registry()
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _dotted(path: list[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def decode(rt: ResourceType, obj: Json, field_validation: str) -> list[str]:
    """Check ``obj`` against the schema, dropping unknown fields unless strict. Returns ``Warning`` texts."""
    if rt.custom:
        return crd_schema.decode(rt.group, rt.plural, rt.kind, obj, field_validation)
    warnings: list[str] = []
    cannot = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
    unknown: list[tuple[list[Any], str]] = []
    for error in sorted(_validator(rt).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set(error.schema.get("properties") or {})
            unknown += [(path, name) for name in error.instance if name not in allowed]
        elif error.validator == "required":
            continue  # a semantic (422) matter, reported by validate_semantics
        elif error.validator == "enum" and path in (["kind"], ["apiVersion"]):
            raise bad_request(f"{cannot}: the {path[0]} field does not match the request path")
        else:
            shown = _dotted(path)
            raise bad_request(
                f"{cannot}: json: cannot unmarshal {_json_type(error.instance)} into Go struct field "
                f"{shown} ({error.message})"
            )
    if unknown and field_validation == "Strict":
        names = ", ".join(f'unknown field "{_dotted([*p, n])}"' for p, n in unknown)
        raise bad_request(f"{cannot}: strict decoding error: {names}")
    for path, name in unknown:
        container: Any = obj
        for part in path:
            container = container[part]
        container.pop(name, None)
        if field_validation != "Ignore":
            warnings.append(f'unknown field "{_dotted([*path, name])}"')
    return warnings


def check_seed(rt: ResourceType, obj: Json) -> None:
    """Seeded objects skip the API, so hold them to the whole schema (required fields included): a seed the
    typed client could not deserialize would otherwise fail far from its cause."""
    if rt.custom:
        defaulted = json.loads(json.dumps(obj))
        crd_schema.default(crd_schema.schema_of(rt.group, rt.plural), defaulted)
        try:
            crd_schema.validate(rt.group, rt.plural, rt.kind, defaulted, None)
        except Exception as error:
            raise ValueError(f"seeded {rt.kind} {obj.get('metadata', {}).get('name')!r}: {error}") from error
        return
    problems = [f"{_dotted(list(e.absolute_path)) or '<root>'}: {e.message}" for e in _validator(rt).iter_errors(obj)]
    if problems:
        raise ValueError(
            f"seeded {rt.kind} {obj.get('metadata', {}).get('name')!r} does not match the schema: {problems}"
        )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    return "number"


# Semantic validation --------------------------------------------------------------------------------------------

_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    f"and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{_DNS1123_SUBDOMAIN}')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    f"with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{_DNS1123_LABEL}')"
)
_STANDARD_QUOTA = frozenset(
    [
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
        "cpu",
        "memory",
        "ephemeral-storage",
        "storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
    ]
)


def is_extended_resource(name: str) -> bool:
    """``nvidia.com/gpu``: a resource outside the ``kubernetes.io`` namespace (and not hugepages). A quota key
    ``requests.nvidia.com/gpu`` is not one itself (helper.IsExtendedResourceName)."""
    return (
        "/" in name
        and not name.startswith("requests.")
        and not name.split("/", maxsplit=1)[0].endswith("kubernetes.io")
    )


def _invalid_value(field: str, value: Any, why: str) -> Cause:
    shown = json.dumps(value) if isinstance(value, str) else str(value)
    return ("FieldValueInvalid", field, f"Invalid value: {shown}: {why}")


def _name_causes(name: str, label: bool) -> list[Cause]:
    pattern, message, limit = (_DNS1123_LABEL, _LABEL_MSG, 63) if label else (_DNS1123_SUBDOMAIN, _SUBDOMAIN_MSG, 253)
    if len(name) > limit:
        return [_invalid_value("metadata.name", name, f"must be no more than {limit} characters")]
    if not re.fullmatch(pattern, name):
        return [_invalid_value("metadata.name", name, message)]
    return []


def _label_causes(labels: Any) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in (labels or {}).items():
        prefix, _, name = key.rpartition("/")
        if (
            (prefix and not re.fullmatch(_DNS1123_SUBDOMAIN, prefix))
            or not re.fullmatch(_QUALIFIED_NAME, name)
            or len(name) > 63
        ):
            causes.append(
                _invalid_value(
                    "metadata.labels",
                    key,
                    "name part must consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character",
                )
            )
        if not isinstance(value, str) or len(value) > 63 or not re.fullmatch(_LABEL_VALUE, value):
            causes.append(
                _invalid_value(
                    "metadata.labels",
                    value,
                    "a valid label must be an empty string or consist of "
                    "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                    f"alphanumeric character (regex used for validation is '{_LABEL_VALUE}')",
                )
            )
    return causes


def quantities(rt: ResourceType, mapping: Any, field: str) -> dict[str, Any]:
    """Parse a resource list; an unparseable quantity is a decode error (400), as on the real server."""
    parsed = {}
    for key, value in (mapping or {}).items():
        try:
            parsed[key] = parse(value)
        except QuantityError as error:
            raise bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {error}'
            ) from error
    return parsed


def _resource_lists(rt: ResourceType, obj: Json) -> list[Json]:
    """The ``ResourceList`` maps of an object whose quantities the server re-serialises."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    found: list[Any] = []
    if rt.kind == "Pod":
        for group in ("initContainers", "containers", "ephemeralContainers"):
            for container in spec.get(group) or []:
                resources = (container or {}).get("resources") or {}
                found += [resources.get("requests"), resources.get("limits")]
        pod_resources = spec.get("resources") or {}
        found += [spec.get("overhead"), pod_resources.get("requests"), pod_resources.get("limits")]
    elif rt.kind == "ResourceQuota":
        found += [spec.get("hard"), status.get("hard"), status.get("used")]
    elif rt.kind == "LimitRange":
        for item in spec.get("limits") or []:
            found += [(item or {}).get(part) for part in ("max", "min", "default", "defaultRequest")]
            found.append((item or {}).get("maxLimitRequestRatio"))
    elif rt.kind == "Node":
        found += [status.get("capacity"), status.get("allocatable")]
    return [mapping for mapping in found if isinstance(mapping, dict)]


def canonicalise(rt: ResourceType, obj: Json) -> None:
    """Rewrite quantities as the real server stores and returns them (``resource.Quantity`` decodes the JSON and
    re-encodes it: ``4000m`` -> ``4``). A value that does not parse is left for validation to refuse. A custom
    resource keeps what was sent (the apiextensions-apiserver stores unstructured JSON), with its schema's defaults."""
    if rt.custom:
        crd_schema.default(crd_schema.schema_of(rt.group, rt.plural), obj)
        return
    for mapping in _resource_lists(rt, obj):
        for key, value in mapping.items():
            with contextlib.suppress(QuantityError):
                mapping[key] = canonical(value)


def _container_causes(rt: ResourceType, container: Json, field: str) -> list[Cause]:
    causes: list[Cause] = []
    if not container.get("name"):
        causes.append(("FieldValueRequired", f"{field}.name", "Required value"))
    elif not re.fullmatch(_DNS1123_LABEL, container["name"]):
        causes.append(_invalid_value(f"{field}.name", container["name"], _LABEL_MSG))
    if not container.get("image"):
        causes.append(("FieldValueRequired", f"{field}.image", "Required value"))
    resources = container.get("resources") or {}
    requests = quantities(rt, resources.get("requests"), f"{field}.resources.requests")
    limits = quantities(rt, resources.get("limits"), f"{field}.resources.limits")
    # ValidateContainerResourceRequirements checks every limit, then every request; the shown values are the
    # quantities re-encoded (canonical by now), as field.Invalid JSON-encodes a Quantity.
    for kind, values in (("limits", limits), ("requests", requests)):
        for name, value in values.items():
            causes += _quantity_value_causes(name, value, resources[kind][name], f"{field}.resources.{kind}[{name}]")
    for name, request in requests.items():
        if not _overcommit_allowed(name):
            if name not in limits:
                causes.append(
                    (
                        "FieldValueRequired",
                        f"{field}.resources.limits",
                        "Required value: Limit must be set for non overcommitable resources",
                    )
                )
            elif limits[name] != request:
                # For GPUs requests may not be lower than limits either: they must be equal.
                causes.append(
                    _invalid_value(
                        f"{field}.resources.requests",
                        str(resources["requests"][name]),
                        f"must be equal to {name} limit of {resources['limits'][name]}",
                    )
                )
        elif name in limits and request > limits[name]:
            causes.append(
                _invalid_value(
                    f"{field}.resources.requests",
                    str(resources["requests"][name]),
                    f"must be less than or equal to {name} limit of {resources['limits'][name]}",
                )
            )
    return causes


#: helper.IsIntegerResourceName: these and every extended resource are counted in whole units.
_INTEGER_RESOURCES = frozenset(
    [
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    ]
)


def _overcommit_allowed(name: str) -> bool:
    """v1helper.IsOvercommitAllowed: native resources but hugepages; never an extended resource (a GPU)."""
    return not is_extended_resource(name) and not name.startswith("hugepages-")


def _quantity_value_causes(name: str, value: Fraction, raw: Any, field: str) -> list[Cause]:
    """ValidateResourceQuantityValue: non-negative, and whole for integer resources (``MilliValue() % 1000``)."""
    causes: list[Cause] = []
    if value < 0:
        causes.append(_invalid_value(field, str(raw), "must be greater than or equal to 0"))
    if (name in _INTEGER_RESOURCES or is_extended_resource(name)) and value.denominator != 1:
        causes.append(_invalid_value(field, str(raw), "must be an integer"))
    return causes


#: Scopes the real server (1.37) accepts; the emulator models all but VolumeAttributesClass (claims, not pods).
_STANDARD_SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
)
_UNMODELLED_SCOPES = frozenset({"VolumeAttributesClass"})
_EXISTS_ONLY_SCOPES = frozenset(
    {"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "CrossNamespacePodAffinity"}
)
_POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_CONFLICTING_SCOPES = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))


def _go_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _scope_valid_for(scope: str, key: str) -> bool:
    """helper.IsResourceQuotaScopeValidForResource, asked only for standard quota resource names."""
    if scope == "BestEffort":
        return key == "pods"
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"):
        return key == "pods" or key in _POD_COMPUTE
    return True


def _is_standard_quota_resource(key: str) -> bool:
    return (key in _STANDARD_QUOTA and key != "storage") or key.startswith(("hugepages-", "requests.hugepages-"))


def _scope_causes(spec: Json) -> list[Cause]:
    """validateResourceQuotaScopes and validateScopedResourceSelectorRequirement (pkg/apis/core/validation), plus
    a loud refusal of the one scope the emulator does not model, rather than counting it wrongly."""
    causes: list[Cause] = []
    hard = sorted(spec.get("hard") or {})
    scopes = spec.get("scopes") or []
    shown_scopes = _go_json(scopes or None)
    for scope in scopes:
        if scope not in _STANDARD_SCOPES:
            causes.append(("FieldValueInvalid", "spec.scopes", f"Invalid value: {shown_scopes}: unsupported scope"))
        elif scope in _UNMODELLED_SCOPES:
            causes.append(_unmodelled("spec.scopes", scope))
        for key in hard:
            if _is_standard_quota_resource(key) and not _scope_valid_for(scope, key):
                causes.append(
                    (
                        "FieldValueInvalid",
                        "spec.scopes",
                        f"Invalid value: {shown_scopes}: unsupported scope applied to resource",
                    )
                )
    causes += _conflicting("spec.scopes", set(scopes), shown_scopes)
    selector = spec.get("scopeSelector")
    if selector is None:
        return causes
    field = "spec.scopeSelector.matchExpressions"
    expressions = selector.get("matchExpressions") or []
    # Go marshals the selector with its fields in declaration order: scopeName, operator, values.
    shown_selector = _go_json(
        {
            "matchExpressions": [
                {k: e[k] for k in ("scopeName", "operator", "values") if e.get(k) is not None} for e in expressions
            ]
        }
        if expressions
        else {}
    )
    names: set[str] = set()
    for expression in expressions:
        scope, operator, values = expression.get("scopeName"), expression.get("operator"), expression.get("values")
        if scope not in _STANDARD_SCOPES:
            causes.append(_invalid_value(f"{field}.scopeName", scope, "unsupported scope"))
        elif scope in _UNMODELLED_SCOPES:
            causes.append(_unmodelled(f"{field}.scopeName", scope))
        for key in hard:
            if _is_standard_quota_resource(key) and not _scope_valid_for(scope, key):
                causes.append(
                    (
                        "FieldValueInvalid",
                        field,
                        f"Invalid value: {shown_selector}: unsupported scope applied to resource",
                    )
                )
        if scope in _EXISTS_ONLY_SCOPES and operator != "Exists":
            causes.append(
                _invalid_value(
                    f"{field}.operator",
                    operator,
                    "must be 'Exist' only operator when scope is any of ResourceQuotaScopeTerminating, "
                    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort and ResourceQuotaScopeNotBestEffort",
                )
            )
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(
                    (
                        "FieldValueRequired",
                        f"{field}.values",
                        "Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope "
                        "selector",
                    )
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{field}.values",
                        f"Invalid value: {_go_json(values)}: must be no value when `operator` is 'Exist' or "
                        "'DoesNotExist' for scope selector",
                    )
                )
        else:
            causes.append(_invalid_value(f"{field}.operator", operator, "not a valid selector operator"))
        names.add(scope)
    # The real code shows spec.scopes (not the selector) as the bad value here.
    return causes + _conflicting(field, names, shown_scopes)


def _conflicting(field: str, scopes: set[str], shown: str) -> list[Cause]:
    return [
        ("FieldValueInvalid", field, f"Invalid value: {shown}: conflicting scopes")
        for pair in _CONFLICTING_SCOPES
        if set(pair) <= scopes
    ]


def _unmodelled(field: str, scope: str) -> Cause:
    return (
        "FieldValueNotSupported",
        field,
        f'Unsupported value: "{scope}": the gpu-jobs Kubernetes emulator does not model this quota scope '
        "(a real server accepts it)",
    )


def _kind_causes(rt: ResourceType, obj: Json) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    if rt.kind == "Pod":
        if not spec.get("containers"):
            causes.append(("FieldValueRequired", "spec.containers", "Required value"))
        for group in ("initContainers", "containers"):
            for index, container in enumerate(spec.get(group) or []):
                causes += _container_causes(rt, container, f"spec.{group}[{index}]")
    elif rt.kind == "ResourceQuota":
        for section in ("spec", "status"):
            for part in ("hard", "used"):
                parsed = quantities(rt, (obj.get(section) or {}).get(part), f"{section}.{part}")
                for key, value in parsed.items():
                    raw = obj[section][part][key]
                    causes += _quantity_value_causes(key, value, raw, f"{section}.{part}[{key}]")
        causes += _scope_causes(spec)
        for key in spec.get("hard") or {}:
            if (
                "/" not in key
                and key not in _STANDARD_QUOTA
                and not key.startswith(("hugepages-", "requests.hugepages-"))
            ):
                causes.append(_invalid_value(f"spec.hard[{key}]", key, "must be a standard resource for quota"))
    elif rt.kind == "Node":
        for part in ("capacity", "allocatable"):
            quantities(rt, (obj.get("status") or {}).get(part), f"status.{part}")
    elif rt.kind == "Lease":
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and duration <= 0:
            causes.append(_invalid_value("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    elif rt.kind == "PodDisruptionBudget":
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            causes.append(_invalid_value("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    elif rt.kind == "CronJob":
        causes += batch.cronjob_causes(obj)
    elif rt.kind == "PriorityClass":
        causes += _priority_class_causes(obj)
    elif rt.kind in ("RoleBinding", "ClusterRoleBinding") and not obj.get("roleRef"):
        causes.append(("FieldValueRequired", "roleRef", "Required value"))
    elif rt.kind == "Event" and rt.group == "" and not (obj.get("involvedObject") or {}).get("kind"):
        causes.append(("FieldValueRequired", "involvedObject.kind", "Required value"))
    return causes


#: scheduling.HighestUserDefinablePriority: above it only the system- classes.
_HIGHEST_USER_PRIORITY = 1_000_000_000


def _priority_class_causes(obj: Json) -> list[Cause]:
    """pkg/apis/scheduling/validation ValidatePriorityClass (the user-defined part)."""
    name, value = (obj.get("metadata") or {}).get("name", ""), obj.get("value")
    if name.startswith("system-"):
        return [
            (
                "FieldValueForbidden",
                "metadata.name",
                "Forbidden: priority class names with 'system-' prefix are reserved",
            )
        ]
    if isinstance(value, int) and value > _HIGHEST_USER_PRIORITY:
        why = f"Forbidden: maximum allowed value of a user defined priority is {_HIGHEST_USER_PRIORITY}"
        return [("FieldValueForbidden", "value", why)]
    return []


def validate_semantics(rt: ResourceType, obj: Json, old: Json | None = None) -> None:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes = (
        _name_causes(name, label=rt.kind == "Namespace")
        if name
        else [("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")]
    )
    causes += _label_causes(meta.get("labels"))
    if rt.custom:
        if causes:
            raise invalid(rt.kind, rt.group, name, causes)
        crd_schema.validate(rt.group, rt.plural, rt.kind, obj, old)
        return
    causes += _kind_causes(rt, obj)
    if old is not None and rt.kind == "Pod":
        causes += _pod_update_causes(old, obj)
    if rt.kind == "Job":
        causes += batch.job_causes(obj, old)
    if rt.kind in apps.KINDS:
        causes += apps.causes(obj, old)
    if old is not None and rt.kind == "PriorityClass":
        for key in ("value", "preemptionPolicy"):
            if obj.get(key) != old.get(key):
                causes.append(("FieldValueForbidden", key, "Forbidden: may not be changed in an update."))
    if (
        old is not None
        and rt.kind in ("RoleBinding", "ClusterRoleBinding")
        and obj.get("roleRef") != old.get("roleRef")
    ):
        causes.append(("FieldValueInvalid", "roleRef", "Invalid value: cannot change roleRef"))
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)


_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


def _pod_update_causes(old: Json, new: Json) -> list[Cause]:
    """Pod specs are immutable but for images, tolerations and deadlines (scheduling is a Binding, not an update)."""

    def comparable(spec: Json) -> Json:
        stripped = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
        for group in ("containers", "initContainers"):
            if group in stripped:
                stripped[group] = [{k: v for k, v in c.items() if k != "image"} for c in stripped[group]]
        return stripped

    if comparable(old.get("spec") or {}) != comparable(new.get("spec") or {}):
        return [
            (
                "FieldValueForbidden",
                "spec",
                "Forbidden: pod updates may not change fields other than "
                "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                "(allow it to be set to 1 if it was previously negative)",
            )
        ]
    return []
