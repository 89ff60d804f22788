"""Wake on demand: how long from a Pending GPU pod created to its group's resize requested, and what a steady-state
``nodegroups`` run costs with ``wake`` configured (the schedule that makes a wake quick runs it often).

The job runs as a separate ``gpu-jobs nodegroups`` process (as a CronJob's pod does) against the Kubernetes emulator
and the AWS emulator (one EKS cluster, one node group taken down in the evening). Per trial: a Pending pod is created
in an allowed namespace, a run starts (the CronJob's tick), and the time to the ``UpdateNodegroupConfig`` the AWS
emulator received is taken from the emulator's own request log (monotonic clock, same process).

    .venv/bin/python bench/wake_latency.py [--trials 5] [--schedule-min 5]

Prints: the run's part of the latency (pod created -> resize requested, process start-up included), the
latency a CronJob every ``--schedule-min`` minutes gives (the run's part plus half the period on average, the whole
period at worst), and the API calls (reads, writes; Kubernetes and AWS) of a steady-state night run with and without
``wake`` in the policy, and of the run that wakes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.emulators.aws.emulator import start_aws
from tests.emulators.kube.fixtures import KubeHandle, start_kube
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace
from tests.sandbox.world import write_kubeconfig

TMP = Path(tempfile.mkdtemp(prefix="gpu-jobs-wake-bench-"))
EVENING = "2026-12-01T20:05:00+01:00"  # Tue, Europe/Berlin: the window ended at 20:00
NIGHT = "2026-12-01T22:00:00+01:00"
NODE = ("ip-10-0-1-1", {"eks.amazonaws.com/nodegroup": "gpu-a100"})
POLICY = """\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
clusters:
  - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}, kubeContext: ml-prod}
defaults:
  timezone: Europe/Berlin
  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]
nodeGroups:
  - name: train
    cloud: aws
    aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}
    gpusPerNode: 8
"""
WAKE = "    wake: {namespaces: [ml-*], for: 2h, maxNodes: 2}\n"


def run_job(env: dict[str, str], policy: Path, at: str) -> subprocess.CompletedProcess[str]:
    job = [sys.executable, "-m", "jobs", "--log-format", "json", "nodegroups", "--policy", str(policy)]
    done = subprocess.run([*job, "--at", at, "--output", "json"], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit("job failed:\n" + "\n".join(done.stderr.splitlines()[-20:]))
    return done


def counts(kube: KubeHandle, aws: Any) -> dict[str, tuple[int, int]]:
    return {name: (len(e.log.reads()), len(e.log.writes())) for name, e in (("kube", kube), ("aws", aws))}


def clear(kube: KubeHandle, aws: Any) -> None:
    kube.log.clear()
    aws.log.clear()


def text(found: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{name} {reads} reads / {writes} writes" for name, (reads, writes) in found.items())


def trial(index: int, with_wake: bool) -> tuple[float | None, dict[str, dict[str, tuple[int, int]]]]:
    """One world: the evening shutdown, a steady-state night run, then a Pending pod and the run that wakes."""
    aws = start_aws()
    aws.update_timing = type(aws.update_timing)(polls=1, seconds=None)
    kube = start_kube(TMP / f"trial-{index}" / "kubeconfig")
    try:
        aws.add_eks_nodegroup("eu-west-1", "ml-prod", "gpu-a100", 1, 3, 8, instance_types=("p4d.24xlarge",))
        for ns in ("gpu-jobs", "ml-a"):
            kube.create(namespace(ns))
        kube.identify("ml-prod")
        kube.create(gpu_node(NODE[0], labels=NODE[1]))
        kubeconfig = write_kubeconfig(TMP / f"trial-{index}" / "fleet.kubeconfig", {"ml-prod": kube}, current="ml-prod")
        policy = TMP / f"trial-{index}" / "policy.yaml"
        policy.write_text(POLICY + (WAKE if with_wake else ""))
        env = {
            **os.environ,
            **aws.env(),
            "KUBECONFIG": str(kubeconfig),
            "GPU_JOBS_NAMESPACE": "gpu-jobs",
            "GPU_JOBS_POLL_INTERVAL": "0.01",
            "GPU_JOBS_LOG_LEVEL": "warning",
            "GPU_JOBS_CLUSTER": "ml-prod",
        }
        run_job(env, policy, EVENING)
        kube.cluster.delete("Node", NODE[0])  # what EKS does to a group at zero
        figures: dict[str, dict[str, tuple[int, int]]] = {}
        clear(kube, aws)
        run_job(env, policy, NIGHT)
        figures["steady"] = counts(kube, aws)
        if not with_wake:
            return None, figures
        clear(kube, aws)
        pod = gpu_pod("train-x", "ml-a", node=None, gpus=8, phase="Pending")
        pod["spec"]["nodeSelector"] = dict(NODE[1])
        created = time.monotonic()
        kube.create(pod)
        done = run_job(env, policy, NIGHT)
        figures["wake"] = counts(kube, aws)
        resize = [r.at for r in aws.log.writes() if r.operation == "UpdateNodegroupConfig"]
        report = json.loads(done.stdout)
        assert any(i["kind"] == "wake" and i["status"] == "applied" for i in report["items"]), report
        return (resize[0] - created if resize else None), figures
    finally:
        kube.stop()
        aws.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--schedule-min", type=float, default=5.0, help="the nodegroups CronJob's period")
    args = parser.parse_args()
    _, without = trial(0, with_wake=False)
    latencies: list[float] = []
    figures: dict[str, dict[str, tuple[int, int]]] = {}
    for i in range(1, args.trials + 1):
        latency, figures = trial(i, with_wake=True)
        if latency is not None:
            latencies.append(latency)
    run_s = statistics.median(latencies)
    period_s = args.schedule_min * 60
    print(f"wake latency, pod created -> resize requested, run's part ({len(latencies)} trials, process start-up")
    print(f"  included): median {run_s:.2f} s, min {min(latencies):.2f} s, max {max(latencies):.2f} s")
    print(
        f"with nodegroups every {args.schedule_min:g} min: {period_s / 2 + run_s:.0f} s on average,"
        f" {period_s + run_s:.0f} s at worst (plus the nodes' boot)"
    )
    print(f"steady-state night run without wake: {text(without['steady'])}")
    print(f"steady-state night run with wake:    {text(figures['steady'])}")
    print(f"the run that wakes:                  {text(figures['wake'])}")


if __name__ == "__main__":
    main()
