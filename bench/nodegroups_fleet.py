"""The nodegroups job against the emulators with a fleet of node groups across the three clouds.

Prints, per run: API calls (reads and writes, per emulator), wall time, and the job process's peak RSS. The job
runs as a separate ``gpu-jobs`` process, as in a CronJob; every cloud call is given an injected latency.

    .venv/bin/python bench/nodegroups_fleet.py [--groups 200 [490 ...]] [--latency-ms 50]

Targets (issue 4): a steady-state run makes zero writes and at most two reads per group; concurrent processing is
at least 4x faster than one group at a time with 50 ms per cloud call; peak RSS under 200 MiB.
Targets (issue 23): the process's time at most 2x the job's own (after imports) in steady state, at 41 clusters
(200 groups) and at 99 (490 groups), the time outside the job growing linearly with the clusters (each cluster's
client was built by re-reading the whole kubeconfig: the square of the clusters). With several ``--groups`` it
prints those figures against the targets at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.emulators.aws.emulator import start_aws
from tests.emulators.azure.emulator import start_azure_emulator
from tests.emulators.gcp.emulator import start_gcp
from tests.emulators.kube.fixtures import KubeHandle, start_kube
from tests.emulators.kube.seed import gpu_node, namespace
from tests.sandbox.world import write_kubeconfig

SUB = "00000000-0000-0000-0000-0000000000b1"
EVENING = "2026-12-01T20:05:00+01:00"
MORNING = "2026-12-02T07:55:00+01:00"
TMP = Path(tempfile.mkdtemp(prefix="gpu-jobs-bench-"))
CLOUD_OF = {"eks": "aws", "gke": "gcp", "aks": "azure"}


def seed(count: int, aws: Any, gcp: Any, azure: Any, kubes: dict[str, KubeHandle], tmp: Path) -> str:
    """``count`` groups, a third per cloud; 4 GKE/AKS pools per cluster (each cluster runs one update at a time),
    two nodes per group, each cluster with a Kubernetes API of its own: a central install's run."""
    clusters: dict[str, str] = {}
    nodes: list[tuple[str, str, dict[str, str]]] = []
    groups: list[str] = []
    for i in range(count):
        cloud = ("aws", "gcp", "azure")[i % 3]
        if cloud == "aws" and i % 9 == 0:
            aws.add_asg("eu-west-1", f"asg-{i}", 1, 2, 4, instance_type="g5.xlarge")
            loc = f"aws: {{region: eu-west-1, autoScalingGroup: asg-{i}}}\n    cluster: eks-0"
            loc += f"\n    nodeSelector: {{gpu-jobs.dev/pool: asg-{i}}}"
            label = {"gpu-jobs.dev/pool": f"asg-{i}"}
            cluster = "eks-0"
        elif cloud == "aws":
            aws.add_eks_nodegroup("eu-west-1", f"eks-{i // 30}", f"ng-{i}", 1, 2, 6, instance_types=("g5.xlarge",))
            loc = f"aws: {{region: eu-west-1, cluster: eks-{i // 30}, nodegroup: ng-{i}}}"
            clusters[f"eks-{i // 30}"] = f"aws: {{region: eu-west-1, cluster: eks-{i // 30}}}"
            label = {"eks.amazonaws.com/nodegroup": f"ng-{i}"}
            cluster = f"eks-{i // 30}"
        elif cloud == "gcp":
            gcp.add_node_pool(
                "bench",
                "europe-west4",
                f"gke-{i // 12}",
                f"gpu-{i}",
                zones=("europe-west4-a",),
                per_zone_count=2,
                autoscaling=(1, 4),
            )
            loc = f"gcp: {{project: bench, location: europe-west4, cluster: gke-{i // 12}, nodePool: gpu-{i}}}"
            clusters[f"gke-{i // 12}"] = f"gcp: {{project: bench, location: europe-west4, cluster: gke-{i // 12}}}"
            label = {"cloud.google.com/gke-nodepool": f"gpu-{i}"}
            cluster = f"gke-{i // 12}"
        else:
            azure.add_agent_pool(SUB, "rg", f"aks-{i // 12}", f"gpu{i}", "Standard_NC4as_T4_v3", 2, autoscaling=(1, 4))
            loc = f"azure: {{subscription: {SUB}, resourceGroup: rg, cluster: aks-{i // 12}, agentPool: gpu{i}}}"
            clusters[f"aks-{i // 12}"] = f"azure: {{subscription: {SUB}, resourceGroup: rg, cluster: aks-{i // 12}}}"
            label = {"kubernetes.azure.com/agentpool": f"gpu{i}"}
            cluster = f"aks-{i // 12}"
        groups += [f"  - name: g{i:03d}", f"    cloud: {cloud}", f"    {loc}"]
        nodes += [(cluster, f"node-{i}-{n}", label) for n in range(2)]
    for name in clusters:
        kubes[name] = start_kube(tmp / name / "kubeconfig")
        kubes[name].create(namespace("gpu-jobs"))
        kubes[name].identify(name)  # what each cluster's install creates: a run proves which cluster it reaches
    for cluster, name, labels in nodes:
        kubes[cluster].create(gpu_node(name, labels=labels))
    write_kubeconfig(tmp / "kubeconfig", kubes, current=None)
    lines = [
        "apiVersion: gpu-jobs/v1",
        "kind: GpuPolicy",
        "defaults:",
        "  timezone: Europe/Berlin",
        '  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]',
        "  warmUp: 15m",
        "clusters:",
        *(
            f"  - {{name: {name}, cloud: {CLOUD_OF[name[:3]]}, {loc}, kubeContext: {name}}}"
            for name, loc in clusters.items()
        ),
        "nodeGroups:",
        *groups,
    ]
    return "\n".join(lines) + "\n"


def calls(emulators: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {name: (len(e.log.reads()), len(e.log.writes())) for name, e in emulators.items()}


def total(counts: dict[str, tuple[int, int]]) -> tuple[int, int]:
    return sum(r for r, _ in counts.values()), sum(w for _, w in counts.values())


def run_job(env: dict[str, str], policy: Path, at: str, workers: int) -> tuple[float, float, float]:
    """Run the job once; return process wall time, the job's own run time (after imports) and its peak RSS.

    The peak RSS comes from the job itself (VmHWM): getrusage on a child forked from this large process would
    count this process's pages from before the exec.
    """
    job = [
        sys.executable,
        "-m",
        "jobs",
        "--log-format",
        "json",
        "nodegroups",
        "--policy",
        str(policy),
        "--at",
        at,
        "--output",
        "json",
        "--workers",
        str(workers),
        # One worker is a serial run only with one scope at a time as well (GPU_JOBS_SCOPES_AT_ONCE).
        *(["--scopes-at-once", "1"] if workers == 1 else []),
        "--max-changes",
        "1000",
    ]
    started = time.perf_counter()
    done = subprocess.run(job, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    lines = done.stderr.splitlines()
    if done.returncode != 0:
        sys.exit("job failed:\n" + "\n".join(lines[-20:]))
    timing = next(json.loads(line) for line in lines if '"nodegroups.timing"' in line)
    return wall, timing["run_s"], timing["peak_rss_mib"]


@dataclass(frozen=True)
class Steady:
    groups: int
    clusters: int
    process_s: float
    job_s: float

    @property
    def outside_s(self) -> float:
        return self.process_s - self.job_s

    @property
    def ratio(self) -> float:
        return self.process_s / self.job_s


def fleet(groups: int, latency_ms: float) -> Steady:
    """The five runs of one fleet size; returns the steady state (16 workers)."""
    kubes: dict[str, KubeHandle] = {}
    tmp = TMP / f"groups-{groups}"
    aws, gcp, azure = start_aws(), start_gcp(operation_polls=1), start_azure_emulator(retry_after_s=0.01)
    try:
        aws.update_timing = type(aws.update_timing)(polls=1, seconds=None)
        tmp.mkdir(parents=True, exist_ok=True)
        policy = tmp / "policy.yaml"
        policy.write_text(seed(groups, aws, gcp, azure, kubes, tmp))
        env = {
            **os.environ,
            **aws.env(),
            "KUBECONFIG": str(tmp / "kubeconfig"),
            "GPU_JOBS_GCP_ENDPOINT": gcp.url,
            "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true",
            "GPU_JOBS_AZURE_ENDPOINT": azure.url,
            "GPU_JOBS_NAMESPACE": "gpu-jobs",
            "GPU_JOBS_POLL_INTERVAL": "0.01",
            "GPU_JOBS_LOG_LEVEL": "info",
        }
        emulators: dict[str, Any] = {"aws": aws, "gcp": gcp, "azure": azure}
        for cloud in (aws, gcp, azure):
            cloud.latency_s = latency_ms / 1000
        print(
            f"\nnodegroups benchmark: {groups} node groups (aws/gcp/azure) in {len(kubes)} clusters (one central"
            f" run, a Kubernetes API per cluster), {latency_ms:g} ms per cloud call"
        )
        print(f"{'run':<34} {'process s':>9} {'job s':>6} {'RSS MiB':>8}  API calls (reads/writes)")
        steady = Steady(groups, len(kubes), 0.0, 0.0)
        for label, at, workers in [
            ("evening: all go down (16 workers)", EVENING, 16),
            ("steady state (16 workers)", EVENING, 16),
            ("steady state (serial: 1 worker)", EVENING, 1),
            ("morning: all come back (16 wkrs)", MORNING, 16),
            ("steady state after (16 workers)", MORNING, 16),
        ]:
            for e in [*emulators.values(), *kubes.values()]:
                e.log.clear()
            wall, job_s, rss = run_job(env, policy, at, workers)
            if label == "steady state (16 workers)":
                steady = Steady(groups, len(kubes), wall, job_s)
            counts = {"kube": total(calls(dict(kubes))), **calls(emulators)}
            cloud_reads = sum(counts[c][0] for c in ("aws", "gcp", "azure"))
            summary = "  ".join(f"{k} {r}/{w}" for k, (r, w) in counts.items())
            print(
                f"{label:<34} {wall:>9.2f} {job_s:>6.2f} {rss:>8.1f}  {summary}  "
                f"(cloud reads/group {cloud_reads / groups:.2f})"
            )
        print(f"steady state: process {steady.process_s:.2f} s for {steady.job_s:.2f} s of job: {steady.ratio:.2f}x")
        return steady
    finally:
        everything: list[Any] = [*kubes.values(), aws, gcp, azure]
        for e in everything:
            e.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, nargs="+", default=[200], help="fleet sizes (200: 41 clusters, 490: 99)")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    sizes = [fleet(groups, args.latency_ms) for groups in args.groups]
    print("\nissue 23 target: the process at most 2x the job's time (steady state, 16 workers), growing linearly")
    print(f"{'clusters':>8} {'groups':>6} {'process s':>9} {'job s':>6} {'outside s':>9} {'ratio':>6}  target <= 2x")
    for s in sizes:
        verdict = "met" if s.ratio <= 2 else "NOT met"
        print(
            f"{s.clusters:>8} {s.groups:>6} {s.process_s:>9.2f} {s.job_s:>6.2f} {s.outside_s:>9.2f} "
            f"{s.ratio:>5.2f}x  {verdict}"
        )
    for small, large in pairwise(sizes):
        scale = large.clusters / small.clusters
        grew = large.outside_s / small.outside_s if small.outside_s > 0 else float("inf")
        verdict = "linear or better" if grew <= scale * 1.25 else "faster than linear"
        print(
            f"{small.clusters} -> {large.clusters} clusters (x{scale:.2f}): time outside the job x{grew:.2f},"
            f" process x{large.process_s / small.process_s:.2f}: {verdict}"
        )


if __name__ == "__main__":
    main()
