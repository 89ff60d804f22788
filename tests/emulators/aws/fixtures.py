"""pytest fixtures for the AWS emulator: one server per session, a fresh (reset) account per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator


@pytest.fixture(scope="session")
def aws_server() -> Iterator[AwsEmulator]:
    """The session's running emulator. Tests want :func:`aws`, which also resets it."""
    # Imported here so that test runs which never touch AWS do not pay for importing moto.
    from tests.emulators.aws.emulator import start_aws

    emulator = start_aws()
    yield emulator
    emulator.stop()


@pytest.fixture
def aws(aws_server: AwsEmulator) -> AwsEmulator:
    """An AWS emulator with an empty account, no faults, no latency and an empty request log."""
    aws_server.reset()
    return aws_server
