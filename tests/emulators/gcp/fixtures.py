"""pytest fixtures for the GCP emulator.

One server for the whole session (werkzeug's shutdown waits out a 0.5 s poll, too slow per test); each test
gets a fresh :class:`GcpEmulator` (state, request log, faults) switched in behind it, so tests stay isolated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from tests.emulators.base import RunningServer, start
from tests.emulators.gcp.emulator import GcpEmulator, _json
from tests.emulators.gcp.wire import GoogleError


class _Switch:
    """The WSGI app the session server runs: forwards to the current test's emulator."""

    def __init__(self) -> None:
        self.target: GcpEmulator | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = self.target
        if target is None:
            error = GoogleError(503, "UNAVAILABLE", "No GCP emulator is active for this test.")
            return _json(503, error.body())(environ, start_response)
        return target(environ, start_response)


@pytest.fixture(scope="session")
def _gcp_server() -> Iterator[tuple[RunningServer, _Switch]]:
    switch = _Switch()
    running = start(switch)
    try:
        yield running, switch
    finally:
        running.stop()


@pytest.fixture
def gcp(_gcp_server: tuple[RunningServer, _Switch]) -> Iterator[GcpEmulator]:
    """A fresh GCP emulator: ``.url``, ``.log``, ``.faults``, ``.latency_s``, ``.operation_polls``, seeding."""
    running, switch = _gcp_server
    emulator = GcpEmulator()
    emulator.url = running.url
    switch.target = emulator
    try:
        yield emulator
    finally:
        switch.target = None
