"""The real Pushgateway (Debian package ``prometheus-pushgateway``) on 127.0.0.1, for the jobs' gauges
(``jobs.metrics``); a real Prometheus started with ``scrape=[pushgateway.address]`` scrapes it.

A missing binary FAILS the test that asks for it (never skips), as the Prometheus fixtures do."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.emulators.prometheus.server import (
    PORT_ATTEMPTS,
    PrometheusStartError,
    _free_port,
    _stop_process,
    _wait_ready,
)

INSTALL_HINT = "run .ci/install-prometheus (installs the Debian package 'prometheus-pushgateway')"


@dataclass
class PushgatewayServer:
    url: str
    workdir: Path
    _process: subprocess.Popen[bytes] | None = field(repr=False)

    @property
    def address(self) -> str:
        """``host:port``, a scrape target."""
        return self.url.removeprefix("http://")

    def stop(self) -> None:
        if self._process is not None:
            _stop_process(self._process)
            self._process = None
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_pushgateway(ready_timeout_s: float = 15.0) -> PushgatewayServer:
    binary = shutil.which("prometheus-pushgateway")
    if binary is None:
        raise FileNotFoundError(f"prometheus-pushgateway is not on PATH: {INSTALL_HINT}")
    workdir = Path(tempfile.mkdtemp(prefix="gpu-jobs-pushgateway-"))
    last = ""
    for attempt in range(PORT_ATTEMPTS):
        port = _free_port()
        log_path = workdir / f"pushgateway-{attempt}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    binary,
                    f"--web.listen-address=127.0.0.1:{port}",
                    # Debian's build persists to /var/lib/prometheus/pushgateway.data by default: one server's pushes
                    # would outlive it and show in the next. Each server keeps its own, gone with its workdir.
                    f"--persistence.file={workdir / 'pushgateway.data'}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        url = f"http://127.0.0.1:{port}"
        if _wait_ready(process, url, ready_timeout_s):
            return PushgatewayServer(url, workdir, process)
        _stop_process(process)
        last = log_path.read_text(errors="replace")
        if "address already in use" not in last:
            break
    shutil.rmtree(workdir, ignore_errors=True)
    raise PrometheusStartError(f"prometheus-pushgateway did not become ready:\n{last[-4000:]}")
