"""The fast, import-free reading of the holidays registry agrees with the package itself."""

from __future__ import annotations

import ast

import pytest

from jobs.core import holiday_regions


@pytest.mark.parametrize("country", ["DE", "US", "GB", "FR", "CH", "JP", "IN", "AU", "CA", "NL"])
def test_static_reading_matches_the_imported_package(country: str) -> None:
    assert set(holiday_regions._static_subdivisions(country) or ()) == set(
        holiday_regions._imported_subdivisions(country) or ()
    )


def test_unknown_country() -> None:
    assert holiday_regions.subdivisions("XX") is None
    assert holiday_regions._imported_subdivisions("XX") is None


def test_known_subdivisions() -> None:
    assert {"BE", "BY"} <= set(holiday_regions.subdivisions("DE") or ())
    assert "NY" in (holiday_regions.subdivisions("US") or ())


def test_the_sliced_reading_matches_the_whole_module_for_every_country() -> None:
    """Reading only a class's head (and the registry's dict) finds what parsing each whole module finds."""
    base = holiday_regions._package_dir()
    assert base is not None
    registry = (base / "registry.py").read_text("utf-8")
    whole = holiday_regions._assigned_literal(ast.parse(registry), "COUNTRIES")
    assert holiday_regions._countries(registry) == whole
    assert isinstance(whole, dict)
    sliced = 0
    for module, codes in whole.items():
        source = (base / "countries" / f"{module}.py").read_text("utf-8")
        head = holiday_regions._class_head(source, codes[0])
        if head is None:
            continue  # read whole: nothing to compare
        klass = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == codes[0])
        for name in ("subdivisions", "subdivisions_aliases"):
            assert holiday_regions._codes(head, name) == holiday_regions._codes(klass, name), (module, name)
        sliced += 1
    assert sliced > len(whole) // 2  # the fast path is the usual one


def test_a_class_head_is_not_trusted_when_an_assignment_may_follow() -> None:
    source = 'class A:\n    x = 1\n\n    def f(self):\n        pass\n\n    subdivisions = ("B",)\n'
    assert holiday_regions._class_head(source, "A") is None
    assert holiday_regions._class_head(source.replace("    subdivisions", "    other"), "A") is not None
