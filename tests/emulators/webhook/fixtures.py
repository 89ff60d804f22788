"""pytest fixtures: ``webhook``, a receiver per session, cleared (messages, log, faults) for every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.emulators.webhook.receiver import WebhookReceiver, start_receiver


@pytest.fixture(scope="session")
def _webhook_server() -> Iterator[WebhookReceiver]:
    receiver = start_receiver()
    yield receiver
    receiver.stop()


@pytest.fixture
def webhook(_webhook_server: WebhookReceiver) -> WebhookReceiver:
    _webhook_server.clear()
    _webhook_server.timeout_hold_s = 3.0
    return _webhook_server
