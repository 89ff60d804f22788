"""pytest fixtures for the Azure emulator.

One server per test session (starting and stopping a werkzeug server costs up to its 0.5 s poll interval) and
a fresh :class:`AzureEmulator` per test behind it: construction is cheap and nothing leaks between tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.base import RunningServer, start

if TYPE_CHECKING:
    from tests.emulators.azure.sdk import AzureClients

SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"


class _Dispatcher:
    """The session server's WSGI app: forwards to the current test's emulator."""

    def __init__(self) -> None:
        self.target: AzureEmulator | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = self.target
        if target is None:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"no Azure emulator is active (requests outside a test)"]
        return target(environ, start_response)


@pytest.fixture(scope="session")
def _azure_server() -> Iterator[tuple[RunningServer, _Dispatcher]]:
    dispatcher = _Dispatcher()
    server = start(dispatcher)
    yield server, dispatcher
    server.stop()


@pytest.fixture
def azure(_azure_server: tuple[RunningServer, _Dispatcher]) -> Iterator[AzureEmulator]:
    """A fresh Azure emulator (AKS agent pools, Microsoft.Quota, Compute VMs) at ``azure.url``."""
    server, dispatcher = _azure_server
    emulator = AzureEmulator()
    emulator.url = server.url
    dispatcher.target = emulator
    yield emulator
    dispatcher.target = None


@pytest.fixture
def azure_clients(azure: AzureEmulator) -> Iterator[AzureClients]:
    """Real SDK clients for :data:`SUBSCRIPTION` against the emulator, with azure-core retries off."""
    from tests.emulators.azure.sdk import AzureClients  # the SDKs cost a second to import: only when used

    clients = AzureClients.connect(azure.url, SUBSCRIPTION, retry_total=0)
    yield clients
    clients.close()
