"""The fast, import-free reading of the holidays registry agrees with the package itself."""

from __future__ import annotations

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
