"""Run the real Prometheus (Debian package ``prometheus``) over DCGM series backfilled with the real promtool.

No emulation here: ``promtool tsdb create-blocks-from openmetrics`` writes TSDB blocks, ``prometheus`` serves
them on 127.0.0.1. The server has no scrape targets, so the data is exactly what the generator wrote and
never changes while the server runs; that is what lets one server be shared by a whole test session.

Prometheus 2.42 (Debian bookworm) notes, checked against ``prometheus --help`` and its startup log:

- Overlapping blocks are always allowed since 2.39 (``--storage.tsdb.allow-overlapping-blocks`` is a hidden
  no-op), and blocks in the data dir at startup are queryable as soon as ``/-/ready`` answers 200.
- promtool 2.42 has no ``--max-block-duration``: it writes one block per 2 h of data, ~80 ms each, so a 6 h
  window backfills in ~0.6 s but 16 days of samples would take ~16 s. Keep long windows sparse.
- Size: promtool reads ~250 k lines/s here (each line carries the full label set). Measured on the 2-core dev box:
  the representative dataset over 6 h at 30 s starts in ~0.8 s; 10,000 GPUs over 2 h at 30 s (~10 M samples, 3 GB
  of text) in ~62 s (23 s generating, 40 s backfilling); at a 60 s step half that. Pass ``step`` for big fleets
  (``bench/sweep.py --step``).
- Retention is measured from the newest block, not from the wall clock, so only windows longer than the
  15 d default need a longer retention; we always pass one that covers the window.
- Queries default to ``time=now``; with a 5 min lookback, data ending at ``now`` is visible for 5 minutes, so
  callers should pass ``time=server.now`` (what :meth:`PrometheusServer.query` does).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.emulators.prometheus.dcgm import DEFAULT_STEP, DEFAULT_WINDOW, Workload, openmetrics_lines

INSTALL_HINT = "run .ci/install-prometheus (installs the Debian package 'prometheus')"
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
# The port is picked before prometheus binds it; another process may win that race, so retry a few times.
PORT_ATTEMPTS = 3

_CONFIG = """\
# No scrape targets: the TSDB holds only the backfilled DCGM series, and nothing changes them.
global:
  scrape_interval: 30s
  evaluation_interval: 30s
"""


class PrometheusNotInstalledError(RuntimeError):
    """``prometheus`` or ``promtool`` is not on PATH."""


class PrometheusStartError(RuntimeError):
    """promtool or prometheus failed; the message carries their output."""


class PrometheusQueryError(RuntimeError):
    """The HTTP API answered with an error (bad PromQL, bad parameters)."""


@dataclass(frozen=True)
class PrometheusBinaries:
    prometheus: str
    promtool: str


def find_binaries(path: str | None = None) -> PrometheusBinaries:
    """Locate both binaries on ``path`` (default: $PATH) or raise with the command that installs them."""
    found = {name: shutil.which(name, path=path) for name in ("prometheus", "promtool")}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        raise PrometheusNotInstalledError(f"{' and '.join(missing)} not found on PATH; {INSTALL_HINT}")
    prometheus, promtool = found["prometheus"], found["promtool"]
    assert prometheus is not None
    assert promtool is not None
    return PrometheusBinaries(prometheus, promtool)


@dataclass(frozen=True)
class StartupTimings:
    """Seconds spent in each startup phase, for the report and for spotting regressions by eye."""

    generate_s: float
    backfill_s: float
    ready_s: float

    @property
    def total_s(self) -> float:
        return self.generate_s + self.backfill_s + self.ready_s


@dataclass
class PrometheusServer:
    """A running prometheus over a known dataset: ``url``, the ``workloads`` (the truth) and ``now``."""

    url: str
    now: datetime
    workloads: tuple[Workload, ...]
    window: timedelta
    step: timedelta
    timings: StartupTimings
    workdir: Path
    _process: subprocess.Popen[bytes] | None = field(repr=False)

    def query(self, promql: str, at: datetime | None = None) -> list[dict[str, Any]]:
        """``/api/v1/query`` at ``at`` (default: the dataset's ``now``); returns ``data.result``."""
        return query(self.url, promql, at or self.now)

    def query_range(
        self, promql: str, start: datetime, end: datetime, step: timedelta = DEFAULT_STEP
    ) -> list[dict[str, Any]]:
        """``/api/v1/query_range``; returns ``data.result`` (a matrix)."""
        params = {
            "query": promql,
            "start": rfc3339_millis(start),
            "end": rfc3339_millis(end),
            "step": f"{step.total_seconds():g}s",
        }
        return _get_result(f"{self.url}/api/v1/query_range", params)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Terminate (SIGTERM lets the TSDB close cleanly), then kill if it hangs; remove the temp dir."""
        process, self._process = self._process, None
        if process is not None:
            _stop_process(process)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_prometheus(
    workloads: Sequence[Workload],
    now: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    step: timedelta = DEFAULT_STEP,
    seed: int = 0,
    binaries: PrometheusBinaries | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    scrape: Sequence[str] = (),
) -> PrometheusServer:
    """Backfill DCGM series for ``workloads`` ending at ``now`` and serve them; call ``.stop()`` when done.

    ~1 s for the representative dataset over 6 h (see ``.timings``). Raises ``PrometheusNotInstalledError``
    without the binaries and ``PrometheusStartError`` if promtool or prometheus fails (with their output).
    """
    binaries = binaries or find_binaries()
    workdir = Path(tempfile.mkdtemp(prefix="gpu-jobs-prometheus-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        began = time.perf_counter()
        source = workdir / "dcgm.om"
        write_openmetrics(source, workloads, now, window, step, seed)
        generated = time.perf_counter()
        data = workdir / "data"
        data.mkdir()
        if workloads:  # promtool rejects an input without samples
            _run_promtool(binaries.promtool, source, data)
        backfilled = time.perf_counter()
        config = workdir / "prometheus.yml"
        config.write_text(_CONFIG + _scrape_config(scrape))
        # Retention counts back from the newest block; keep every sample of the window, whatever its length.
        retention = timedelta(days=max(15, window.days + 2))
        process, url = _launch(binaries.prometheus, workdir, retention, ready_timeout_s)
        if workloads:
            _wait_for_data(url, now, ready_timeout_s)
        ready = time.perf_counter()
    except BaseException:
        if process is not None:
            _stop_process(process)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return PrometheusServer(
        url=url,
        now=now,
        workloads=tuple(workloads),
        window=window,
        step=step,
        timings=StartupTimings(generated - began, backfilled - generated, ready - backfilled),
        workdir=workdir,
        _process=process,
    )


def _scrape_config(targets: Sequence[str]) -> str:
    """A Pushgateway's scrape (``host:port`` targets), four times a second (a test waits for what a run pushed to be
    scraped), keeping the pushed ``job`` labels."""
    if not targets:
        return ""
    listed = ", ".join(f'"{t}"' for t in targets)
    return (
        "scrape_configs:\n"
        "  - job_name: pushgateway\n"
        "    honor_labels: true\n"
        "    scrape_interval: 250ms\n"
        f"    static_configs: [{{targets: [{listed}]}}]\n"
    )


def write_openmetrics(
    path: Path, workloads: Sequence[Workload], now: datetime, window: timedelta, step: timedelta, seed: int
) -> None:
    """The generator's document, streamed in chunks: 10,000 GPUs over 2 h are ~1 GB of text, never held whole."""
    with path.open("w", encoding="utf-8") as out:
        chunk: list[str] = []
        for line in openmetrics_lines(workloads, now, window, step, seed):
            chunk.append(line)
            if len(chunk) >= 50_000:
                out.write("\n".join(chunk) + "\n")
                chunk.clear()
        out.write("\n".join(chunk) + "\n" if chunk else "")


def _run_promtool(promtool: str, source: Path, data: Path) -> None:
    result = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise PrometheusStartError(f"promtool backfill failed ({result.returncode}):\n{result.stderr}{result.stdout}")


def _launch(
    prometheus: str, workdir: Path, retention: timedelta, ready_timeout_s: float
) -> tuple[subprocess.Popen[bytes], str]:
    """Start prometheus over ``workdir``/data with ``workdir``/prometheus.yml; wait for ``/-/ready``."""
    last_error = ""
    for attempt in range(PORT_ATTEMPTS):
        port = _free_port()
        log_path = workdir / f"prometheus-{attempt}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--storage.tsdb.retention.time={retention.days}d",
                    f"--web.listen-address=127.0.0.1:{port}",
                    # The Debian defaults point at /usr/share consoles we neither need nor want to depend on.
                    f"--web.console.templates={workdir}",
                    f"--web.console.libraries={workdir}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        url = f"http://127.0.0.1:{port}"
        if _wait_ready(process, url, ready_timeout_s):
            return process, url
        _stop_process(process)
        last_error = log_path.read_text(errors="replace")
        if "address already in use" not in last_error:
            break
    raise PrometheusStartError(f"prometheus did not become ready:\n{last_error[-4000:]}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_ready(process: subprocess.Popen[bytes], url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.02)
    return False


def _wait_for_data(url: str, now: datetime, timeout_s: float) -> None:
    # Ready means the TSDB opened; insist that the backfilled series answer too before handing the server out.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if query(url, 'count({__name__=~"DCGM_.+"})', now):
            return
        time.sleep(0.02)
    raise PrometheusStartError(f"prometheus at {url} is ready but returns no DCGM series at {now.isoformat()}")


def query(url: str, promql: str, at: datetime) -> list[dict[str, Any]]:
    """An instant query over plain HTTP; returns ``data.result``."""
    return _get_result(f"{url}/api/v1/query", {"query": promql, "time": rfc3339_millis(at)})


def rfc3339_millis(at: datetime) -> str:
    """A query time Prometheus parses exactly: float seconds would go through a lossy float parse, RFC 3339
    does not; floored to the millisecond like the generated sample timestamps."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _get_result(url: str, params: dict[str, str]) -> list[dict[str, Any]]:
    request = f"{url}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.load(response)
    except urllib.error.HTTPError as error:
        raise PrometheusQueryError(f"{request}: HTTP {error.code}: {error.read().decode(errors='replace')}") from error
    if body.get("status") != "success":
        raise PrometheusQueryError(f"{request}: {body}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
