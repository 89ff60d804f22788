"""Which country and subdivision codes the ``holidays`` package knows, read without importing it.

``validate`` must start fast, and importing any one country of ``holidays`` imports all of them (a quarter of a
second on a 2-core machine). The registry and each country's ``subdivisions`` are plain literals in the package
source, so they are read with ``ast``. Where that ever fails (a future release writes them differently), the
slow, certain path imports the package.
"""

from __future__ import annotations

import ast
import importlib.util
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


@cache
def _registry() -> dict[str, tuple[str, tuple[str, ...]]]:
    """ISO code -> (module, class name, all codes) of every country."""
    base = _package_dir()
    assert base is not None
    countries = _assigned_literal(ast.parse((base / "registry.py").read_text("utf-8")), "COUNTRIES")
    assert isinstance(countries, dict)
    return {codes[1]: (module, codes) for module, codes in countries.items()}


def _static_subdivisions(country: str) -> tuple[str, ...] | None:
    found = _registry().get(country)
    if found is None:
        return None
    module, codes = found
    base = _package_dir()
    assert base is not None
    tree = ast.parse((base / "countries" / f"{module}.py").read_text("utf-8"))
    klass = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == codes[0])
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
