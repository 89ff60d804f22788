"""Compute Engine list ``filter`` expressions, as far as the clients under test send them (AIP-160 style):

    status = RUNNING                 equality (``*`` in the value is a wildcard); ``!=`` its negation
    labels.owner:*                   the key is present;  ``field:value`` a value of the field (or of the list)
    (status = RUNNING) OR (status = TERMINATED)    ``OR``; ``AND`` or juxtaposition for "and"
    (a = 1) (b = 2)                  grouped expressions, ANDed

Fields are the resource's JSON names (``status``, ``name``, ``labels.<key>``, ``scheduling.provisioningModel``).
Mixing AND and OR at one level without parentheses, and the legacy regular-expression syntax (``name eq 'x.*'``),
are refused with 400 invalid rather than guessed at.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import Any

from tests.emulators.gcp.wire import ComputeError

Predicate = Callable[[dict[str, Any]], bool]
_TOKEN = re.compile(r'\s*(?:(?P<paren>[()])|(?P<op>!=|=|:)|"(?P<quoted>[^"]*)"|(?P<word>[^\s()=!:"]+))')


def compile_filter(text: str) -> Predicate:
    """A predicate over a resource's JSON, or ComputeError 400 for an expression this emulator does not know."""
    tokens = _tokens(text)
    predicate, rest = _expression(tokens, text)
    if rest:
        raise _invalid(text, f"unexpected {rest[0][1]!r}")
    return predicate


def _invalid(text: str, why: str) -> ComputeError:
    return ComputeError(
        400, "invalid", f"Invalid value for field 'filter': '{text}'. Invalid list filter expression: {why}."
    )


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(text.rstrip()):
        matched = _TOKEN.match(text, position)
        if matched is None:
            raise _invalid(text, f"cannot read {text[position:]!r}")
        kind = matched.lastgroup or ""
        out.append((kind, matched.group(kind)))
        position = matched.end()
    return out


def _expression(tokens: list[tuple[str, str]], text: str) -> tuple[Predicate, list[tuple[str, str]]]:
    terms: list[Predicate] = []
    joins: set[str] = set()
    while tokens and tokens[0] != ("paren", ")"):
        if terms:
            if tokens[0][0] == "word" and tokens[0][1] in ("AND", "OR"):
                joins.add(tokens[0][1])
                tokens = tokens[1:]
            else:
                joins.add("AND")  # juxtaposition
        term, tokens = _term(tokens, text)
        terms.append(term)
    if not terms:
        raise _invalid(text, "empty expression")
    if len(joins) > 1:
        raise _invalid(text, "AND and OR mixed without parentheses")
    if joins == {"OR"}:
        return (lambda item: any(t(item) for t in terms)), tokens
    return (lambda item: all(t(item) for t in terms)), tokens


def _term(tokens: list[tuple[str, str]], text: str) -> tuple[Predicate, list[tuple[str, str]]]:
    if tokens[0] == ("paren", "("):
        inner, rest = _expression(tokens[1:], text)
        if not rest or rest[0] != ("paren", ")"):
            raise _invalid(text, "unbalanced parentheses")
        return inner, rest[1:]
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "op" or tokens[2][0] not in ("word", "quoted"):
        if len(tokens) >= 2 and tokens[1][0] == "word" and tokens[1][1] in ("eq", "ne"):
            raise _invalid(text, "regular-expression filters (eq, ne) are not emulated")
        raise _invalid(text, "expected <field> <=|!=|:> <value>")
    field, op, value = tokens[0][1], tokens[1][1], tokens[2][1]
    return _comparison(field.split("."), op, value, quoted=tokens[2][0] == "quoted"), tokens[3:]


def _comparison(path: list[str], op: str, value: str, *, quoted: bool) -> Predicate:
    def lookup(item: dict[str, Any]) -> Any:
        current: Any = item
        for part in path:
            if not isinstance(current, dict) or part not in current:
                return None
            current = current[part]
        return current

    def equal(found: Any) -> bool:
        text = str(found).lower() if isinstance(found, bool) else str(found)
        return fnmatch.fnmatchcase(text, value) if "*" in value and not quoted else text == value

    if op == ":":
        if value == "*" and not quoted:
            return lambda item: lookup(item) is not None
        return lambda item: (
            any(equal(v) for v in found)
            if isinstance(found := lookup(item), list)
            else found is not None and equal(found)
        )
    if op == "=":
        return lambda item: (found := lookup(item)) is not None and equal(found)
    return lambda item: (found := lookup(item)) is None or not equal(found)
