"""A real Prometheus loaded with generated DCGM GPU metrics, for tests and the demo sandbox.

- :mod:`.dcgm`: the pure, seeded series generator (``Workload`` -> OpenMetrics text).
- :mod:`.server`: ``start_prometheus(workloads, now)`` backfills with promtool and runs prometheus.
- :mod:`.dataset`: ``REPRESENTATIVE_WORKLOADS``, the fixed dataset of the ``prometheus`` fixture.
- :mod:`.fixtures`: the pytest fixtures ``prometheus`` and ``prometheus_factory``.
"""

from tests.emulators.prometheus.dataset import REPRESENTATIVE_WORKLOADS
from tests.emulators.prometheus.dcgm import Workload, openmetrics
from tests.emulators.prometheus.server import (
    PrometheusNotInstalledError,
    PrometheusServer,
    find_binaries,
    start_prometheus,
)

__all__ = [
    "REPRESENTATIVE_WORKLOADS",
    "PrometheusNotInstalledError",
    "PrometheusServer",
    "Workload",
    "find_binaries",
    "openmetrics",
    "start_prometheus",
]
