"""The sweep's PromQL side at fleet scale: 10,000 GPU pods' DCGM series in the real Prometheus (one cluster, as a
shared Thanos labels it), the sweep's <= 3 instant queries next to a naive query per pod, run in the same script with
the same client (``jobs.adapters.prometheus.PrometheusMetrics``).

    .venv/bin/python bench/sweep.py [--pods 10000] [--window 2h] [--step 60s] [--naive-sample 500]

Prints: how long the generator, promtool's backfill and the server's start took; for the sweep, each query's wall
time, series returned and response size, the total, and the peak RSS of the process that sent and parsed them; for
the naive approach, the queries sent and their wall time (measured on ``--naive-sample`` pods and extrapolated to all
of them when the sample is smaller, as the output says); and the ratio.

Conditions, printed with the figures:
- Prometheus 2.x from the Debian package, backfilled by promtool, on 127.0.0.1 (no network latency: a real Thanos
  adds a round trip per query, which only widens the gap to the naive approach);
- ``--step`` is the scrape interval of the generated data. dcgm-exporter is usually scraped every 15-30 s; the
  default here is 60 s because promtool 2.42 backfills ~1 M samples/s and 10,000 GPUs x 4 metrics x 2 h at 30 s are
  ~10 M samples (~1 min of start-up, ~3 GB of OpenMetrics text). Query cost grows with the samples per series, so
  pass ``--step 30s`` for the production density when the minute is affordable;
- the queries run in a fresh child process (spawn), so its peak RSS (VmHWM) is the client's alone: interpreter,
  imports, one response at a time and its parsed ``Sample`` list (the baseline before the first query is printed);
- no network latency is added: each naive query costs a localhost round trip (~0.7 ms); over a real network
  (a few ms to a Thanos in another zone) the naive approach's 10,000 round trips grow, the sweep's 3 do not. A line
  adds ``--rtt-ms`` per query by computation, labelled as such;
- CPU and wall time on a shared machine move with other load: run it twice before reading much into a few percent.

Then the whole job (:func:`full_job_run`): ``gpu-jobs sweep --part pods`` as a process, against that Prometheus and a
Kubernetes emulator (its own process) holding the same pods, a first run and the steady state: PromQL queries (as
Prometheus counts them), pod list calls and writes (as the emulator logged them), wall time and the job's peak RSS.

Targets (issue 16): at most 3 PromQL queries and 1 paginated pod list per cluster per run, and one list more when
the run writes (the runner looks again under the Lease); peak RSS under 250 MiB.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import platform
import random
import resource
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CLUSTER = "bench"
MATCHERS = {"cluster": CLUSTER}
GPUS_PER_NODE = 8


def parse_duration(text: str) -> timedelta:
    units = {"s": 1, "m": 60, "h": 3600}
    return timedelta(seconds=float(text[:-1]) * units[text[-1]])


def fleet(pods: int, seed: int = 0) -> list[Any]:
    """``pods`` GPU pods of one cluster, as production mixes them: mostly 1 GPU, some 2 and 4; most busy, a fifth
    idle, a few leaked, a few idle lately; a tenth attributed through ``exported_*``; 2 % on MIG slices."""
    from tests.emulators.prometheus.dcgm import Workload

    rng = random.Random(seed)
    out: list[Workload] = []
    node, slot = 0, 0
    for index in range(pods):
        roll = rng.random()
        profile = "idle" if roll < 0.2 else "leaked" if roll < 0.25 else "idle_after_busy" if roll < 0.3 else "busy"
        mig = rng.random() < 0.02
        gpus = 1 if mig else rng.choices((1, 2, 4), weights=(80, 15, 5))[0]
        if slot + gpus > GPUS_PER_NODE:
            node, slot = node + 1, 0
        exported = rng.random() < 0.1
        name, namespace = f"job-{index:05d}", f"team-{index % 60:02d}"
        for gpu in range(gpus):
            out.append(
                Workload(
                    name,
                    namespace,
                    "main",
                    slot + gpu,
                    f"gpu-node-{node:04d}",
                    profile=profile,  # type: ignore[arg-type]
                    idle_for=timedelta(minutes=rng.choice((30, 90, 180))),
                    mig_profile="1g.10gb" if mig else None,
                    mig_instance_id=7 if mig else 0,
                    memory_total_mib=9728 if mig else 81920,
                    exported_labels=exported,
                    cluster=CLUSTER,
                )
            )
        slot += gpus
    return out


def sweep_queries(window: timedelta) -> tuple[list[str], str]:
    """The sweep's queries (idlePods on DCGM_FI_DEV_GPU_UTIL with leakedMemory: all three) and where they came
    from: the job's own builders when the core has them, else the same strings as SWEEP.md specifies them."""
    core = importlib.import_module("jobs.core.idle_pods")
    build = getattr(core, "queries", None)
    if build is not None:
        from jobs.core.policy_sweep import IdlePods, LeakedMemory

        idle = IdlePods(window=f"{int(window.total_seconds())}s")
        return list(build(idle, LeakedMemory(), MATCHERS).all()), "jobs.core.idle_pods.queries"
    # TODO(lead): drop this fallback once jobs.core.idle_pods.queries is on main (helper sweep-pods writes it).
    sel = ",".join(f'{k}="{v}"' for k, v in sorted(MATCHERS.items()))
    rng = f"[{int(window.total_seconds())}s]"
    used = f"avg_over_time(DCGM_FI_DEV_FB_USED{{{sel}}}{rng})"
    free = f"avg_over_time(DCGM_FI_DEV_FB_FREE{{{sel}}}{rng})"
    return [
        f"avg_over_time(DCGM_FI_DEV_GPU_UTIL{{{sel}}}{rng})",
        f"{used} / ({used} + {free})",
        f'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel},GPU_I_ID!=""}}{rng})',
    ], "local copy of SWEEP.md's queries (TODO: the core's builders)"


def naive_queries(pods: list[tuple[str, str]], window: timedelta) -> list[str]:
    """What a per-pod sweep sends: one utilisation query per pod (kind to it: the memory and MIG queries would
    triple the count), naming the pod under either label shape."""
    rng = f"[{int(window.total_seconds())}s]"
    out = []
    for namespace, pod in pods:
        plain = f'DCGM_FI_DEV_GPU_UTIL{{cluster="{CLUSTER}",namespace="{namespace}",pod="{pod}"}}'
        exported = f'DCGM_FI_DEV_GPU_UTIL{{cluster="{CLUSTER}",exported_namespace="{namespace}",exported_pod="{pod}"}}'
        out.append(f"avg_over_time({plain}{rng}) or avg_over_time({exported}{rng})")
    return out


def peak_rss_mib() -> float:
    """This process's peak RSS. VmHWM, not ``ru_maxrss``: Linux carries ``ru_maxrss`` over fork and exec, so a
    spawned child would report the parent's peak (the generator's ~0.5 GB here)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@dataclass(frozen=True)
class QueryFigures:
    wall_s: float
    series: int
    response_bytes: int


def _client(conn: Connection, url: str, at: datetime, queries: list[str]) -> None:
    """The child process: send ``queries`` one after the other with the job's client, report figures and RSS."""
    import urllib3

    from jobs.adapters.prometheus import PrometheusMetrics
    from jobs.adapters.settings import AdapterSettings

    class Counting(urllib3.PoolManager):
        """Counts response bytes as they arrive (the adapter only returns parsed samples)."""

        received = 0

        def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
            response = super().urlopen(method, url, redirect=redirect, **kw)
            Counting.received += len(response.data)
            return response

    baseline = peak_rss_mib()
    metrics = PrometheusMetrics(url, AdapterSettings(request_timeout_s=120), token_file="", pool=Counting())
    figures = []
    for promql in queries:
        before, began = Counting.received, time.perf_counter()
        samples = metrics.query(promql, at)
        figures.append(QueryFigures(time.perf_counter() - began, len(samples), Counting.received - before))
        del samples
    conn.send((figures, metrics.queries, baseline, peak_rss_mib()))


def measure(url: str, at: datetime, queries: list[str]) -> tuple[list[QueryFigures], int, float, float]:
    """Run ``queries`` in a fresh spawned process; returns its figures, query count and RSS (MiB) before and peak."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_client, args=(child, url, at, queries), daemon=True)
    process.start()
    result: tuple[list[QueryFigures], int, float, float] = parent.recv()
    process.join(timeout=30)
    return result


def _serve_kube(conn: Connection, kubeconfig: str, pods: list[tuple[str, str, str, int, str]], started: str) -> None:
    """The Kubernetes emulator's own process (as a real API server runs apart from its clients): the cluster's
    namespaces and its Running GPU pods, then answers about its request log."""
    from tests.emulators.kube.fixtures import start_kube
    from tests.emulators.kube.seed import gpu_pod, namespace

    kube = start_kube(kubeconfig)
    at = datetime.fromisoformat(started)
    for name in sorted({"gpu-jobs", *(ns for ns, _, _, _, _ in pods)}):
        kube.create(namespace(name))
    for ns, name, node, gpus, kind in pods:
        kube.cluster.create(gpu_pod(name, ns, node=node, gpus=gpus, resource=kind, started=at, created=at))
    kube.identify(CLUSTER)  # what the cluster's install creates: the run proves its API is that cluster's
    conn.send(len(pods))
    while True:
        command = conn.recv()
        if command == "clear":
            kube.log.clear()
            conn.send(None)
        elif command == "log":
            conn.send([(r.operation, r.is_write) for r in kube.log.all()])
        else:
            kube.stop()
            conn.send(None)
            return


def _queries_served(url: str) -> int:
    """How many instant queries the Prometheus has answered so far (its own counter, not the job's word)."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line
    )


def _sweep_process(env: dict[str, str], policy: Path, at: datetime) -> tuple[float, dict[str, Any], int, str]:
    """One ``gpu-jobs sweep --part pods`` process: wall time, its run.summary and timing events, exit code."""
    import json
    import os
    import subprocess

    argv = [sys.executable, "-m", "jobs", "--log-format", "json", "sweep", "--part", "pods", "--policy", str(policy)]
    argv += ["--at", at.isoformat(), "--output", "json", "--max-changes", "100000"]
    started = time.perf_counter()
    done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, check=False, timeout=900)
    wall = time.perf_counter() - started
    events: dict[str, Any] = {}
    for line in done.stderr.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") in ("run.summary", "sweep.timing"):
                events[event["event"]] = event
    return wall, events, done.returncode, done.stdout


def full_job_run(url: str, now: datetime, workloads: list[Any]) -> Mapping[str, object]:
    """The whole job against that Prometheus and a Kubernetes emulator holding the same pods (Running, started
    before the window): a first run (marks every idle pod: a patch and an Event each) and the steady state (the same
    marks again 10 minutes later, inside the grace period: nothing to write)."""
    import json
    import tempfile

    from tests.emulators.prometheus.dcgm import Workload

    pods: dict[tuple[str, str], list[Workload]] = {}
    for w in workloads:
        pods.setdefault((w.namespace, w.pod), []).append(w)
    seeded = [
        (ns, name, ws[0].hostname, len(ws), f"nvidia.com/mig-{ws[0].mig_profile}" if ws[0].is_mig else "nvidia.com/gpu")
        for (ns, name), ws in sorted(pods.items())
    ]
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        context = multiprocessing.get_context("spawn")
        conn, child = context.Pipe()
        started = (now - timedelta(hours=6)).isoformat()
        process = context.Process(target=_serve_kube, args=(child, str(kubeconfig), seeded, started), daemon=True)
        process.start()
        conn.recv()
        policy = Path(tmp) / "policy.yaml"
        policy.write_text(
            "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"
            f"clusters: [{{name: {CLUSTER}, cloud: aws, aws: {{region: eu-west-1, cluster: {CLUSTER}}},"
            f" prometheus: {{url: {json.dumps(url)}, matchers: {json.dumps(MATCHERS)}}}}}]\n"
            "sweep:\n  idlePods: {window: 2h, gracePeriod: 30m, action: annotate}\n"
            "  leakedMemory: {utilBelow: 1, memoryUsedAbove: 90%}\n"
        )
        env = {"KUBECONFIG": str(kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", "GPU_JOBS_CLUSTER": CLUSTER}
        figures: dict[str, object] = {}
        pages = -(-len(seeded) // 500)
        try:
            for label, at in (("first run", now), ("steady state", now + timedelta(minutes=10))):
                conn.send("clear")
                conn.recv()
                before = _queries_served(url)
                wall, events, code, stdout = _sweep_process(env, policy, at)
                conn.send("log")
                log: list[tuple[str, bool]] = conn.recv()
                states: dict[str, int] = {}
                pods = [i for i in json.loads(stdout or "{}").get("items", []) if i["kind"] == "pod"]
                for pod in pods:
                    states[pod["state"]] = states.get(pod["state"], 0) + 1
                timing = events.get("sweep.timing", {})
                lists = sum(1 for op, _ in log if op == "list pods")
                writes = sum(1 for _, is_write in log if is_write)
                figures[label] = (
                    f"exit {code}, {_queries_served(url) - before} PromQL queries,"
                    f" {_pod_lists(lists, pages)} ({lists}"
                    f" pages of 500 for {len(seeded)} pods), {writes} Kubernetes writes,"
                    f" wall {wall:.1f} s (in-job {timing.get('run_s', '?')} s),"
                    f" peak RSS {timing.get('peak_rss_mib', '?')} MiB, pods reported {states}"
                )
        finally:
            conn.send("stop")
            conn.recv()
            process.join(timeout=10)
    return figures


def _pod_lists(lists: int, pages: int) -> str:
    whole = lists // pages
    if whole * pages != lists:
        return f"{lists / pages:.1f} pod lists"
    return f"{whole} paginated pod list{'' if whole == 1 else 's'}"


JobRun = Callable[[str, datetime, list[Any]], Mapping[str, object]]
run_job: JobRun | None = full_job_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--window", type=parse_duration, default=timedelta(hours=2), help="the sweep's window")
    parser.add_argument("--step", type=parse_duration, default=timedelta(seconds=60), help="the scrape interval")
    parser.add_argument("--naive-sample", type=int, default=500, help="pods the naive approach is timed on")
    parser.add_argument(
        "--rtt-ms", type=float, default=5.0, help="a network round trip, added by computation (not measured)"
    )
    args = parser.parse_args(argv)

    from tests.emulators.prometheus.server import PrometheusNotInstalledError, start_prometheus

    workloads = fleet(args.pods)
    now = datetime.now(UTC).replace(microsecond=0)
    print(
        f"sweep bench: {args.pods} GPU pods, {len(workloads)} GPUs/slices, one cluster ({CLUSTER!r}), window "
        f"{args.window}, step {args.step}; Python {platform.python_version()}, {multiprocessing.cpu_count()} CPUs"
    )
    try:
        server = start_prometheus(workloads, now, window=args.window, step=args.step)
    except PrometheusNotInstalledError as error:
        print(error, file=sys.stderr)
        return 2
    with server:
        t = server.timings
        samples = sum(len(w.metrics()) for w in workloads) * (args.window // args.step)
        print(
            f"  start-up: generate {t.generate_s:.1f} s, promtool backfill {t.backfill_s:.1f} s, ready "
            f"{t.ready_s:.1f} s (total {t.total_s:.1f} s for ~{samples / 1e6:.1f} M samples)"
        )

        queries, source = sweep_queries(args.window)
        print(f"\nthe sweep's queries ({source}):")
        figures, sent, baseline, peak = measure(server.url, now, queries)
        for promql, f in zip(queries, figures, strict=True):
            short = promql if len(promql) < 90 else promql[:87] + "..."
            print(f"  {f.wall_s:7.3f} s  {f.series:6d} series  {f.response_bytes / 1e6:6.2f} MB  {short}")
        sweep_s = sum(f.wall_s for f in figures)
        print(
            f"  PromQL queries: {sent}   wall: {sweep_s:.3f} s   "
            f"client RSS: {baseline:.0f} MiB before, {peak:.0f} MiB peak"
        )

        pods = sorted({(w.namespace, w.pod) for w in workloads})
        sample = pods if args.naive_sample >= len(pods) else random.Random(1).sample(pods, args.naive_sample)
        naive, naive_sent, _, _ = measure(server.url, now, naive_queries(sample, args.window))
        naive_s = sum(f.wall_s for f in naive)
        scale = len(pods) / len(sample)
        estimated = "" if scale == 1 else f" (measured on {len(sample)} pods, x{scale:.0f} extrapolated)"
        print(f"\nnaive, one query per pod: {naive_sent} queries sent, {naive_s:.2f} s")
        print(f"  for all {len(pods)} pods: {len(pods)} queries, {naive_s * scale:.1f} s{estimated}")
        print(
            f"  the sweep is {naive_s * scale / sweep_s:.0f}x faster "
            f"and sends {len(pods) // max(sent, 1)}x fewer queries"
        )

        rtt = args.rtt_ms / 1000
        print(
            f"  with a {args.rtt_ms:g} ms round trip to Prometheus (computed: + queries x rtt): "
            f"sweep {sweep_s + sent * rtt:.2f} s, naive {(naive_s * scale) + len(pods) * rtt:.1f} s"
        )

        if run_job is None:
            print("\nfull job run: not measured here yet (bench/sweep.py run_job: the lead adds it at merge)")
        else:
            print("\nfull job run:")
            for key, value in run_job(server.url, now, workloads).items():
                print(f"  {key}: {value}")
        print(
            f"\ntargets: <= 3 PromQL queries per cluster: {'met' if sent <= 3 else 'MISSED'}; "
            f"client peak RSS < 250 MiB: {'met' if peak < 250 else 'MISSED'} ({peak:.0f} MiB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
