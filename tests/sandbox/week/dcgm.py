"""The week's DCGM series (issue 26), written to the real Prometheus with the real promtool at the week's own
timestamps, so that ``gpu-jobs sweep --at T`` reads at T what the week's pods did up to T.

Per GPU of every pod of the workload, in its cluster's label shape (:data:`tests.sandbox.world.SHAPES`: ``pod`` and
``namespace``, ``exported_*`` behind a ServiceMonitor, or the old ``pod_name``; ``cluster`` as the shared Thanos's
external label, which the policy's ``prometheus.matchers`` pick): a busy pod at 70-95 % utilisation, the pod that does
nothing (profile ``idle``) at 0-3 %, the crashed one (``leaked``) at 0-1 % with ~95 % of its memory used (the policy's
``leakedMemory.memoryUsedAbove`` is 90 %). Values come from :func:`tests.emulators.prometheus.dcgm.samples`.

When the series are: the backfill is written before the week is played, and where and when a pod runs is the
model's decision during the week (it waits for capacity, a drain ends it and it starts again later). So a pod's
series run from its submission to :data:`AFTER_WORK` past its work (a pod without an end, to the slice's end): they
cover every instant it can run. That is enough for the sweep, which judges only Running pods, by their name and
namespace over the window before ``--at`` (a pod started less than the window ago is ``young``, never judged):
samples of a Pending pod are never in a judged window, and the series of a pod that has ended are, until they stop,
"GPUs no pod holds" in the sweep's report (reported, never acted on). The node label names the group's first node
(where the pod lands is not known yet): the sweep counts a pod's devices by ``UUID``, unique per pod and GPU here,
and uses the node only to name unallocated GPUs.

Size: ~270 pod-GPUs over the week at a 60 s step are ~1.2 M lines; promtool writes one block per 2 h of data (84 a
week), measured in :attr:`PrometheusServer.timings`.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from tests.emulators.prometheus.dcgm import METRIC_HELP, METRICS, Sample, Workload, epoch_millis, hash_str, samples
from tests.emulators.prometheus.server import (
    _CONFIG,
    PrometheusServer,
    StartupTimings,
    _launch,
    _run_promtool,
    _scrape_config,
    _wait_for_data,
    find_binaries,
)
from tests.sandbox.fleet import Fleet
from tests.sandbox.week.workload import NAMESPACE, Job
from tests.sandbox.world import MEMORY_MIB, SHAPES, Shape, _node_name

#: dcgm-exporter scraped every 60 s: a week of ~270 pod-GPUs backfills in seconds (30 s would double it).
STEP = timedelta(seconds=60)
#: How long a busy pod's series go on past ``submit + work``: a pod that waited, or was drained in the evening and
#: started again in the morning, ends later; a night covers it.
AFTER_WORK = timedelta(hours=12)
#: Prometheus on a loaded 2-core machine opens 84 blocks: give it longer than the sandbox's 15 s.
READY_TIMEOUT_S = 60.0
CONTAINER = "main"


@dataclass(frozen=True)
class Series:
    """One GPU of one pod, with samples in ``(since, until]``."""

    workload: Workload
    since: datetime
    until: datetime


def series(fleet: Fleet, jobs: Sequence[Job], end: datetime, after_work: timedelta = AFTER_WORK) -> list[Series]:
    """Every GPU of every job, from its submission to ``after_work`` past its work, or to ``end``."""
    found: list[Series] = []
    for job in jobs:
        group = fleet.group(job.group)
        shape = SHAPES.get(group.cluster, Shape())
        until = end if job.work is None else min(end, job.submit + job.work + after_work)
        if until - job.submit < STEP:
            continue  # no sample before the slice ends
        for gpu in range(job.gpus):
            workload = Workload(
                job.name,
                NAMESPACE,
                CONTAINER,
                gpu,
                _node_name(group, 0),
                group.hardware.model,
                uuid=f"GPU-{UUID(int=hash_str(f'week/{job.name}/{gpu}'))}",
                profile=job.profile,
                exported_labels=shape.exported_labels,
                old_labels=shape.old_labels,
                hostname_label=shape.hostname_label,
                memory_total_mib=MEMORY_MIB.get(group.hardware.model, 16384),
                cluster=group.cluster,
            )
            found.append(Series(workload, job.submit, until))
    return found


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _stamp(at: datetime) -> str:
    # As tests/emulators/prometheus/dcgm.py writes them: the middle of the millisecond, which Prometheus' float
    # parse truncates to that millisecond.
    millis = epoch_millis(at)
    return f"{millis // 1000}.{millis % 1000:03d}5"


#: promtool 2.42 writes one block per 2 h of data (no ``--max-block-duration``) and reads its whole input again for
#: each: a week in one file is read 84 times (~200 s here). One file per block is read once.
BLOCK = timedelta(hours=2)


def _block_of(at: datetime) -> int:
    # The block promtool puts a sample in: 2 h ranges from the epoch, as its blocks are aligned.
    return epoch_millis(at) // (BLOCK // timedelta(milliseconds=1))


def openmetrics_files(found: Sequence[Series], directory: Path, step: timedelta = STEP, seed: int = 0) -> list[Path]:
    """One OpenMetrics file per block of 2 h (each metric family at a time, each series in time order, ``# EOF``
    last), in ``directory``."""
    # Per series: its label text and its samples by block (each series' samples are in time order).
    drawn: list[tuple[Workload, str, dict[int, list[Sample]]]] = []
    for s in found:
        by_block: dict[int, list[Sample]] = {}
        for row in samples(s.workload, s.until, s.until - s.since, step, seed):
            by_block.setdefault(_block_of(row.at), []).append(row)
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.workload.labels().items())
        drawn.append((s.workload, labels, by_block))
    stamps: dict[datetime, str] = {}
    paths: list[Path] = []
    for block in sorted({b for _, _, by_block in drawn for b in by_block}):
        lines: list[str] = []
        for metric in METRICS:
            members = [(labels, rows[block]) for w, labels, rows in drawn if block in rows and metric in w.metrics()]
            if not members:
                continue
            lines += [f"# TYPE {metric} gauge", f"# HELP {metric} {METRIC_HELP[metric]}"]
            for labels, rows in members:
                for row in rows:
                    value = row.value(metric)
                    text = str(value) if isinstance(value, int) else repr(float(value))
                    stamp = stamps.get(row.at) or stamps.setdefault(row.at, _stamp(row.at))
                    lines.append(f"{metric}{{{labels}}} {text} {stamp}")
        path = directory / f"dcgm-{block}.om"
        path.write_text("\n".join([*lines, "# EOF"]) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def start(found: Sequence[Series], scrape: Sequence[str] = (), step: timedelta = STEP) -> PrometheusServer:
    """The real Prometheus over ``found`` (and scraping ``scrape``, the sandbox's Pushgateway); ``.stop()`` it."""
    binaries = find_binaries()
    workdir = Path(tempfile.mkdtemp(prefix="gpu-jobs-week-prometheus-"))
    process = None
    try:
        began = time.perf_counter()
        source, data = workdir / "openmetrics", workdir / "data"
        source.mkdir()
        data.mkdir()
        files = openmetrics_files(found, source, step)
        generated = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as pool:  # one promtool per block, two at a time (2 cores)
            list(pool.map(lambda f: _run_promtool(binaries.promtool, f, data), files))
        backfilled = time.perf_counter()
        (workdir / "prometheus.yml").write_text(_CONFIG + _scrape_config(scrape))
        first = min((s.since for s in found), default=None)
        last = max((s.until for s in found), default=None)
        span = last - first if first is not None and last is not None else timedelta(0)
        # Retention counts back from the newest block: keep every sample whatever the span.
        process, url = _launch(binaries.prometheus, workdir, timedelta(days=max(15, span.days + 2)), READY_TIMEOUT_S)
        if last is not None:
            _wait_for_data(url, last, READY_TIMEOUT_S)
        ready = time.perf_counter()
    except BaseException:
        if process is not None:
            process.terminate()
            process.wait(timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    shutil.rmtree(source, ignore_errors=True)  # ~150 MB of text, in the TSDB now
    return PrometheusServer(
        url=url,
        now=last or datetime.now().astimezone(),
        workloads=tuple(s.workload for s in found),
        window=span,
        step=step,
        timings=StartupTimings(generated - began, backfilled - generated, ready - backfilled),
        workdir=workdir,
        _process=process,
    )


def queries_answered(url: str) -> int:
    """How many instant queries the Prometheus at ``url`` has answered, by its own ``prometheus_http_requests_total``
    (the real Prometheus keeps no request log of ours): the difference over the week is the sweep's queries."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return round(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line
        )
    )
