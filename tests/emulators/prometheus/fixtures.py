"""pytest fixtures: a real Prometheus serving DCGM series (see ``server.py``).

``prometheus`` is session-scoped: the server has no scrape targets and no admin API, so nothing a test does
can change its data, and sharing it is as isolated as a fresh one. Tests that need their own data use
``prometheus_factory``; every server it starts is stopped when the test ends.

Missing binaries FAIL the test (never skip): a silently skipped metrics suite would hide a broken CI image.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

import pytest

from tests.emulators.prometheus.dataset import REPRESENTATIVE_WORKLOADS
from tests.emulators.prometheus.dcgm import DEFAULT_STEP, DEFAULT_WINDOW, Workload
from tests.emulators.prometheus.server import (
    PrometheusBinaries,
    PrometheusNotInstalledError,
    PrometheusServer,
    find_binaries,
    start_prometheus,
)


class PrometheusFactory(Protocol):
    def __call__(
        self,
        workloads: Sequence[Workload],
        now: datetime | None = None,
        *,
        window: timedelta = DEFAULT_WINDOW,
        step: timedelta = DEFAULT_STEP,
        seed: int = 0,
    ) -> PrometheusServer: ...


def require_binaries(path: str | None = None) -> PrometheusBinaries:
    """The binaries, or ``pytest.fail`` with the install command."""
    try:
        return find_binaries(path)
    except PrometheusNotInstalledError as error:
        message = str(error)
    # Outside the except block, so the report shows the message once instead of a chained traceback.
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusServer]:
    """A real Prometheus over ``REPRESENTATIVE_WORKLOADS``, 6 h of 30 s samples ending at session start."""
    binaries = require_binaries()
    server = start_prometheus(REPRESENTATIVE_WORKLOADS, datetime.now(UTC), binaries=binaries)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def prometheus_factory() -> Iterator[PrometheusFactory]:
    """Start a real Prometheus over your own workloads: ``prometheus_factory(workloads, now=...)``."""
    binaries = require_binaries()
    started: list[PrometheusServer] = []

    def factory(
        workloads: Sequence[Workload],
        now: datetime | None = None,
        *,
        window: timedelta = DEFAULT_WINDOW,
        step: timedelta = DEFAULT_STEP,
        seed: int = 0,
    ) -> PrometheusServer:
        server = start_prometheus(
            workloads, now or datetime.now(UTC), window=window, step=step, seed=seed, binaries=binaries
        )
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for server in started:
            server.stop()
