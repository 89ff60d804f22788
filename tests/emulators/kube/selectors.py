"""Label selectors (``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``, ``>``, ``<``) and field selectors.

Parse errors are 400 BadRequest, as the real server answers them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import bad_request
from .resources import ResourceType

_KEY = (
    r"(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)
_KEY_RE = re.compile(f"^{_KEY}$")
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=<>(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_BINARY_RE = re.compile(r"^\s*(?P<key>[^\s!=<>(),]+)\s*(?P<op>==|!=|=|>|<)\s*(?P<value>[^\s!=<>(),]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=<>(),]+)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if not present or value is None:
            return False
        try:
            number, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return number > bound if self.op == ">" else number < bound


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``( )``: ``a in (x,y),b`` is two requirements."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _checked(key: str, values: tuple[str, ...], term: str) -> tuple[str, tuple[str, ...]]:
    if not _KEY_RE.match(key) or len(key.rsplit("/", maxsplit=1)[-1]) > 63:
        raise bad_request(f'unable to parse requirement: invalid label key "{key}" in "{term}"')
    for value in values:
        if len(value) > 63 or not _VALUE_RE.match(value):
            raise bad_request(f'unable to parse requirement: invalid label value: "{value}" in "{term}"')
    return key, values


def parse_label_selector(text: str) -> list[Requirement]:
    requirements: list[Requirement] = []
    if not text.strip():
        return requirements
    for term in _split_top_level(text):
        if match := _SET_RE.match(term):
            values = tuple(v.strip() for v in match["values"].split(",") if v.strip())
            if not values:
                raise bad_request(
                    f"unable to parse requirement: for '{match['op']}' operator, values set can't be empty"
                )
            key, values = _checked(match["key"], values, term)
            requirements.append(Requirement(key, match["op"], values))
        elif match := _BINARY_RE.match(term):
            op = "=" if match["op"] == "==" else match["op"]
            if op in (">", "<") and not match["value"].lstrip("-").isdigit():
                raise bad_request("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer")
            key, values = _checked(match["key"], (match["value"],), term)
            requirements.append(Requirement(key, op, values))
        elif match := _EXISTS_RE.match(term):
            key, _ = _checked(match["key"], (), term)
            requirements.append(Requirement(key, "!" if match["neg"] else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: found '{term}', expected: identifier")
    return requirements


def labels_match(requirements: list[Requirement], labels: Mapping[str, str] | None) -> bool:
    return all(r.matches(labels or {}) for r in requirements)


def match_expressions(selector: Mapping[str, Any] | None) -> list[Requirement]:
    """A ``metav1.LabelSelector`` object (matchLabels + matchExpressions) as requirements."""
    selector = selector or {}
    requirements = [Requirement(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        requirements.append(
            Requirement(expression["key"], ops[expression["operator"]], tuple(expression.get("values") or ()))
        )
    return requirements


# Field selectors ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _dotted(obj: Mapping[str, Any], path: str) -> Any:
    current: Any = obj
    for part in path.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    return current


_SPECIAL: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "source": lambda obj: _text(_dotted(obj, "source.component")),
    "spec.unschedulable": lambda obj: _text(bool(_dotted(obj, "spec.unschedulable"))),
    "spec.hostNetwork": lambda obj: _text(bool(_dotted(obj, "spec.hostNetwork"))),
}


def parse_field_selector(text: str, rt: ResourceType) -> list[FieldRequirement]:
    supported = {"metadata.name", "metadata.namespace", *rt.field_labels}
    requirements: list[FieldRequirement] = []
    if not text.strip():
        return requirements
    for term in text.split(","):
        match = re.match(r"^\s*([^=!\s]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, value = match.groups()
        if field not in supported:
            raise bad_request(f"field label not supported: {field}")
        requirements.append(FieldRequirement(field, op != "!=", value))
    return requirements


def fields_match(requirements: list[FieldRequirement], obj: Mapping[str, Any]) -> bool:
    for requirement in requirements:
        getter = _SPECIAL.get(requirement.field)
        actual = getter(obj) if getter else _text(_dotted(obj, requirement.field))
        if (actual == requirement.value) != requirement.equal:
            return False
    return True
