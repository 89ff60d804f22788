"""Custom resources as the apiextensions-apiserver serves them, from the CRD files themselves.

The two Karpenter CRDs in ``crds/`` are copied unchanged from kubernetes-sigs/karpenter v1.14.1
(``pkg/apis/crds/karpenter.sh_nodepools.yaml``, ``karpenter.sh_nodeclaims.yaml``), so the emulator validates what
the real server validates, not what the product expects. What the real server does with a CR write, in order:

- unknown fields are pruned (a ``Warning`` under ``fieldValidation=Warn``, 400 under ``Strict``);
- ``default`` values are filled in (so a NodePool without ``disruption`` gets ``{consolidateAfter: 0s, ...}``);
- the OpenAPI schema is checked (type, required, enum, pattern, bounds): 422 Invalid with one cause per field;
- the ``x-kubernetes-validations`` CEL rules are checked, transition rules (``oldSelf``) only on an update where the
  old object has that field: 422 Invalid, ``<path>: Invalid value: "<type>": <message>``.

Quantities in a CR are stored as sent (``1000m`` stays ``1000m``, ``100`` stays an integer): only built-in types are
re-emitted in canonical form. CEL is not interpreted: each rule of these CRDs has its Python twin in
:data:`_RULES`, and a rule without one fails loudly, so a newer CRD cannot be validated by half.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .errors import bad_request, invalid

Json = dict[str, Any]
Cause = tuple[str, str, str]
CRD_DIR = Path(__file__).parent / "crds"
#: Where the CRD files come from: the Karpenter release whose API the emulator serves.
KARPENTER_VERSION = "v1.14.1"


@functools.cache
def schema_of(group: str, plural: str) -> Json:
    crd = yaml.safe_load((CRD_DIR / f"{group}_{plural}.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["storage"])
    schema: Json = version["schema"]["openAPIV3Schema"]
    return schema


def served(group: str, plural: str) -> bool:
    return (CRD_DIR / f"{group}_{plural}.yaml").exists()


# Pruning and defaulting ---------------------------------------------------------------------------------------------


def prune(schema: Json, value: Any, path: str, unknown: list[str]) -> None:
    """Drop fields the schema does not know (``metadata`` is the ObjectMeta, left to the generic code)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key in list(value):
            child = f"{path}.{key}" if path else key
            if properties is not None and key in properties:
                if child != "metadata":
                    prune(properties[key], value[key], child, unknown)
            elif isinstance(extra, dict):
                prune(extra, value[key], child, unknown)
            elif properties is not None and child not in ("apiVersion", "kind"):
                unknown.append(child)
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            prune(schema["items"], item, f"{path}[{index}]", unknown)


def default(schema: Json, value: Any) -> None:
    """Structural defaulting: a missing property with a ``default`` gets it, then defaults apply inside it."""
    if isinstance(value, dict):
        for key, child in (schema.get("properties") or {}).items():
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                default(child, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                default(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(schema["items"], item)


def decode(group: str, plural: str, kind: str, obj: Json, field_validation: str) -> list[str]:
    """Prune and default a CR body; returns the ``Warning`` texts (400 under ``Strict``)."""
    unknown: list[str] = []
    prune(schema_of(group, plural), obj, "", unknown)
    if unknown and field_validation == "Strict":
        names = ", ".join(f'unknown field "{name}"' for name in unknown)
        raise bad_request(f"strict decoding error: {names}")
    default(schema_of(group, plural), obj)
    return [] if field_validation == "Ignore" else [f'unknown field "{name}"' for name in unknown]


# Schema validation --------------------------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _shown(value: Any) -> str:
    """How field.Invalid prints a value: strings quoted, numbers bare."""
    return f'"{value}"' if isinstance(value, str) else str(value)


def check(schema: Json, value: Any, old: Any, path: str, has_old: bool) -> list[Cause]:
    """The schema's causes for ``value`` at ``path`` (then its CEL rules, with ``old`` for transition rules)."""
    causes: list[Cause] = []
    actual = _type_name(value)
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            return [
                (
                    "FieldValueTypeInvalid",
                    path,
                    f'Invalid value: "{actual}": {path} in body must be of type integer,string: "{actual}"',
                )
            ]
    elif "type" in schema and schema["type"] != actual and not (schema["type"] == "number" and actual == "integer"):
        return [
            (
                "FieldValueTypeInvalid",
                path,
                f'Invalid value: "{actual}": {path} in body must be of type {schema["type"]}: "{actual}"',
            )
        ]
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_shown(v) for v in schema["enum"])
        causes.append(
            ("FieldValueNotSupported", path, f"Unsupported value: {_shown(value)}: supported values: {supported}")
        )
    if isinstance(value, str):
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            causes.append(
                (
                    "FieldValueInvalid",
                    path,
                    f"Invalid value: {_shown(value)}: {path} in body should match '{schema['pattern']}'",
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(("FieldValueTooLong", path, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(
                (
                    "FieldValueInvalid",
                    path,
                    f"Invalid value: {_shown(value)}: {path} in body should be at least {schema['minLength']} "
                    "chars long",
                )
            )
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append(
                (
                    "FieldValueInvalid",
                    path,
                    f"Invalid value: {value}: {path} in body should be greater than or equal to {schema['minimum']}",
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            causes.append(
                (
                    "FieldValueInvalid",
                    path,
                    f"Invalid value: {value}: {path} in body should be less than or equal to {schema['maximum']}",
                )
            )
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(
                ("FieldValueTooMany", path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items")
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                # Lists are atomic here: no old item correlates, so no transition rule runs inside one.
                causes += check(items, item, None, f"{path}[{index}]", False)
    if isinstance(value, dict):
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            causes.append(
                (
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                )
            )
        for key in schema.get("required") or []:
            if key not in value:
                causes.append(("FieldValueRequired", f"{path}.{key}" if path else key, "Required value"))
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if key in properties and child != "metadata":
                causes += check(properties[key], item, old_map.get(key), child, has_old and key in old_map)
            elif isinstance(extra, dict) and key not in properties:
                causes += check(extra, item, old_map.get(key), child, has_old and key in old_map)
    if causes:
        return causes  # the real server runs CEL only on values that passed the schema
    for validation in schema.get("x-kubernetes-validations") or []:
        rule = validation["rule"]
        if rule not in _RULES:
            raise NotImplementedError(f"the emulator has no Python twin for the CEL rule {rule!r}")
        transition = "oldSelf" in rule
        if transition and not has_old:
            continue
        if not _RULES[rule](value, old):
            causes.append(("FieldValueInvalid", path, f'Invalid value: "{_type_name(value)}": {validation["message"]}'))
    return causes


def validate(group: str, plural: str, kind: str, obj: Json, old: Json | None) -> None:
    """422 Invalid with every cause, as the apiextensions-apiserver reports them."""
    schema = schema_of(group, plural)
    body = {k: v for k, v in obj.items() if k != "metadata"}
    causes = check(schema, body, old, "", old is not None)
    if causes:
        raise invalid(kind, group, (obj.get("metadata") or {}).get("name", ""), causes)


# The CEL rules of the Karpenter CRDs, one Python twin each (the rule text is the key) ------------------------------

_OPERATORS_WITH_ONE_INTEGER = ("Gt", "Lt", "Gte", "Lte")


def _is_non_negative_int(text: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None and int(text) >= 0


def _domain_not_karpenter(key: str) -> bool:
    return key in ("karpenter.sh/capacity-type", "karpenter.sh/nodepool") or not key.split("/", 1)[0].endswith(
        "karpenter.sh"
    )


_RULES: dict[str, Callable[[Any, Any], bool]] = {
    # NodePool spec (pkg/apis/v1/nodepool.go)
    "has(self.replicas) == has(oldSelf.replicas)": lambda s, o: ("replicas" in s) == ("replicas" in o),
    "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in "
    "self.limits))": lambda s, _: (
        "replicas" not in s or not s.get("limits") or (len(s["limits"]) == 1 and "nodes" in s["limits"])
    ),
    "!has(self.replicas) || !has(self.weight)": lambda s, _: "replicas" not in s or "weight" not in s,
    "self.all(x, has(x.schedule) == has(x.duration))": lambda s, _: all(
        ("schedule" in x) == ("duration" in x) for x in s
    ),
    # nodeClassRef (NodePool template: group and kind immutable; every part non-empty)
    "self.group == oldSelf.group": lambda s, o: s.get("group") == o.get("group"),
    "self.kind == oldSelf.kind": lambda s, o: s.get("kind") == o.get("kind"),
    "self != ''": lambda s, _: s != "",
    # NodeClaim spec is immutable
    "self == oldSelf": lambda s, o: bool(s == o),
    # Requirements and labels
    "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)": lambda s, _: all(
        x.get("operator") != "In" or len(x.get("values") or []) != 0 for x in s
    ),
    "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? "
    "(x.values.size() == 1 && int(x.values[0]) >= 0) : true)": lambda s, _: all(
        x.get("operator") not in _OPERATORS_WITH_ONE_INTEGER
        or (len(x.get("values") or []) == 1 and _is_non_negative_int(x["values"][0]))
        for x in s
    ),
    "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)": lambda s, _: all(
        not (x.get("operator") == "In" and "minValues" in x) or len(x.get("values") or []) >= x["minValues"] for x in s
    ),
    'self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith('
    '"karpenter.sh")': lambda s, _: _domain_not_karpenter(s),
    'self != "karpenter.sh/nodepool"': lambda s, _: s != "karpenter.sh/nodepool",
    'self != "kubernetes.io/hostname"': lambda s, _: s != "kubernetes.io/hostname",
    'self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith('
    '"karpenter.sh"))': lambda s, _: all(_domain_not_karpenter(x) for x in s),
    'self.all(x, x != "karpenter.sh/nodepool")': lambda s, _: "karpenter.sh/nodepool" not in s,
    'self.all(x, x != "kubernetes.io/hostname")': lambda s, _: "kubernetes.io/hostname" not in s,
}
