"""Demo sandbox: ``python -m tests.emulators.prometheus`` serves the representative dataset until Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from datetime import UTC, datetime, timedelta
from types import FrameType

from tests.emulators.prometheus.dataset import REPRESENTATIVE_WORKLOADS
from tests.emulators.prometheus.server import PrometheusNotInstalledError, start_prometheus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=6.0, help="length of the generated window")
    args = parser.parse_args(argv)
    try:
        server = start_prometheus(REPRESENTATIVE_WORKLOADS, datetime.now(UTC), window=timedelta(hours=args.hours))
    except PrometheusNotInstalledError as error:
        print(error, file=sys.stderr)
        return 2

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    with server:
        print(f"PROMETHEUS_URL={server.url}", flush=True)
        print(
            f"# {len(server.workloads)} workloads, data ends {server.now.isoformat()}, "
            f"started in {server.timings.total_s:.2f}s",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
