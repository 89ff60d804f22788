"""pytest fixtures for the AWS emulator: one server per session, a fresh (reset) account per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.emulators.aws.emulator import AwsEmulator, start_aws


@pytest.fixture(scope="session")
def aws_server() -> Iterator[AwsEmulator]:
    """The session's running emulator. Tests want :func:`aws`, which also resets it."""
    emulator = start_aws()
    yield emulator
    emulator.stop()


@pytest.fixture
def aws(aws_server: AwsEmulator) -> AwsEmulator:
    """An AWS emulator with an empty account, no faults, no latency and an empty request log."""
    aws_server.reset()
    return aws_server
