"""pytest fixtures for the GCP emulator.

One server for the whole session (werkzeug's shutdown waits out a 0.5 s poll, too slow per test); each test
gets a fresh :class:`GcpEmulator` (state, request log, faults) switched in behind it, so tests stay isolated.
The emulator module is imported inside the fixtures: pytest loads this plugin for every session, GCP or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.emulators.base import RunningServer, start

if TYPE_CHECKING:
    from tests.emulators.gcp.emulator import GcpEmulator


class _Switch:
    """The WSGI app the session server runs: forwards to the current test's emulator."""

    def __init__(self) -> None:
        self.target: GcpEmulator | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = self.target
        if target is None:
            body = {"error": {"code": 503, "message": "No GCP emulator is active.", "status": "UNAVAILABLE"}}
            start_response("503 Service Unavailable", [("Content-Type", "application/json; charset=UTF-8")])
            return [json.dumps(body).encode()]
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
    from tests.emulators.gcp.emulator import GcpEmulator

    running, switch = _gcp_server
    emulator = GcpEmulator()
    emulator.url = running.url
    switch.target = emulator
    try:
        yield emulator
    finally:
        switch.target = None
