"""Which country and subdivision codes the ``holidays`` package knows, read without importing it.

``validate`` must start fast, and importing any one country of ``holidays`` imports all of them (a quarter of a
second on a 2-core machine). The registry and each country's ``subdivisions`` are plain literals in the package
source, so they are read with ``ast``: only the statements that hold them (the registry's ``COUNTRIES``, a country
class up to its first method), since parsing and walking a whole country module (76 KB for the United States) cost
more than the rest of a ``validate`` run. Where a slice does not parse or may miss an assignment, the whole module
is read; where that ever fails (a future release writes them differently), the slow, certain path imports the
package.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path


@cache
def _package_dir() -> Path | None:
    spec = importlib.util.find_spec("holidays")
    return Path(spec.origin).parent if spec and spec.origin else None


def _assigned_literal(tree: ast.AST, name: str) -> object:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                return ast.literal_eval(node.value)
    raise LookupError(name)


# The registry's dict, from its first line to the closing brace at the start of a line.
_COUNTRIES = re.compile(r"^COUNTRIES\b.*?^\}$", re.MULTILINE | re.DOTALL)
# Where a class's attributes end: its first method (or decorator).
_FIRST_METHOD = re.compile(r"^    (?:async def |def |@)", re.MULTILINE)
# An assignment the head of a class might not contain.
_SUBDIVISIONS = re.compile(r"^    subdivisions", re.MULTILINE)


def _countries(source: str) -> object:
    found = _COUNTRIES.search(source)
    try:
        if found:
            return _assigned_literal(ast.parse(found.group()), "COUNTRIES")
    except (SyntaxError, ValueError, LookupError):
        pass
    return _assigned_literal(ast.parse(source), "COUNTRIES")


@cache
def _registry() -> dict[str, tuple[str, tuple[str, ...]]]:
    """ISO code -> (module, class name, all codes) of every country."""
    base = _package_dir()
    assert base is not None
    countries = _countries((base / "registry.py").read_text("utf-8"))
    assert isinstance(countries, dict)
    return {codes[1]: (module, codes) for module, codes in countries.items()}


def _class_head(source: str, name: str) -> ast.ClassDef | None:
    """Class ``name`` up to its first method, when no ``subdivisions*`` line follows that point anywhere in the
    module (else None: the whole module must be read)."""
    start = re.search(rf"^class {re.escape(name)}\b", source, re.MULTILINE)
    end = _FIRST_METHOD.search(source, start.end()) if start else None
    if start is None or end is None or _SUBDIVISIONS.search(source, end.start()):
        return None
    try:
        tree = ast.parse(source[start.start() : end.start()])
    except SyntaxError:  # the cut fell inside a string
        return None
    klass = tree.body[0] if len(tree.body) == 1 else None
    return klass if isinstance(klass, ast.ClassDef) and klass.name == name else None


def _static_subdivisions(country: str) -> tuple[str, ...] | None:
    found = _registry().get(country)
    if found is None:
        return None
    module, codes = found
    base = _package_dir()
    assert base is not None
    source = (base / "countries" / f"{module}.py").read_text("utf-8")
    klass = _class_head(source, codes[0]) or next(
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == codes[0]
    )
    return _codes(klass, "subdivisions") + _codes(klass, "subdivisions_aliases")


def _codes(klass: ast.ClassDef, name: str) -> tuple[str, ...]:
    try:
        value = _assigned_literal(klass, name)
    except LookupError:
        return ()
    if not isinstance(value, tuple | list | dict):
        raise TypeError(name)
    return tuple(str(v) for v in value)


def _imported_subdivisions(country: str) -> tuple[str, ...] | None:
    import holidays  # noqa: PLC0415 - the slow path

    supported = holidays.list_supported_countries(include_aliases=False)
    if country not in supported:
        return None
    cls = type(holidays.country_holidays(country))
    return tuple(supported[country]) + tuple(getattr(cls, "subdivisions_aliases", {}))


@cache
def subdivisions(country: str) -> tuple[str, ...] | None:
    """The subdivision codes (and aliases) of a country, or None when ``holidays`` does not know it."""
    try:
        return _static_subdivisions(country)
    except (OSError, SyntaxError, ValueError, AssertionError, StopIteration, TypeError, LookupError):
        return _imported_subdivisions(country)
