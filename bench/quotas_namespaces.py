"""The quotas job against the Kubernetes emulator with many namespaces in one cluster, next to a naive reconciler
(GET and PUT per namespace) run in the same script.

Prints list calls, writes, wall time and the job's peak RSS for a first run and a steady-state run.

    .venv/bin/python bench/quotas_namespaces.py [--namespaces 5000]

Targets (issue 10): steady state makes zero writes and at most ceil(N/500) list calls per resource type; at least
10x faster than the naive approach; peak RSS under 200 MiB.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.emulators.kube.fixtures import KubeHandle, start_kube
from tests.emulators.kube.seed import namespace

POLICY = """\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
clusters:
  - {name: bench, cloud: aws, aws: {region: eu-west-1, cluster: bench}}
namespaceQuotas:
  default: {nvidia.com/gpu: 0}
  exclude: [kube-system, kube-public, kube-node-lease, default, gpu-jobs]
  rules:
    - {namespaces: ["team-*"], hard: {nvidia.com/gpu: 4}}
"""


def run_job(kube: KubeHandle, policy: Path) -> tuple[float, float, int]:
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs"}
    argv = [sys.executable, "-m", "jobs", "--log-format", "json", "quotas", "--policy", str(policy)]
    argv += ["--max-changes", "100000"]
    # The job's own peak RSS (VmHWM), read by a wrapper: getrusage of a child forked from this big process lies.
    wrapper = (
        "import runpy, sys, atexit\n"
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'): print('PEAK_RSS_KIB', line.split()[1], file=sys.stderr)\n"
        "atexit.register(rss)\n"
        "sys.argv = ['jobs'] + sys.argv[1:]\n"
        "runpy.run_module('jobs', run_name='__main__')\n"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *argv[3:]], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit("job failed:\n" + done.stderr[-3000:])
    rss = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK_RSS_KIB"))
    summary = next(json.loads(line) for line in done.stderr.splitlines() if '"run.summary"' in line)
    return wall, rss / 1024, summary["applied"]


def naive(kube: KubeHandle, names: list[str]) -> float:
    """GET then PUT (or POST) every namespace's quota: what the job avoids."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    started = time.perf_counter()
    with kube.api_client() as api:
        core = client.CoreV1Api(api)
        for name in names:
            gpus = "4" if name.startswith("team-") else "0"
            body = {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "naive-quota", "namespace": name},
                "spec": {"hard": {"requests.nvidia.com/gpu": gpus}},
            }
            try:
                current = core.read_namespaced_resource_quota("naive-quota", name)
                body["metadata"]["resourceVersion"] = current.metadata.resource_version
                core.replace_namespaced_resource_quota("naive-quota", name, body)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                core.create_namespaced_resource_quota(name, body)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespaces", type=int, default=5000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gpu-jobs-bench-quotas-"))
    kube = start_kube(tmp / "kubeconfig")
    try:
        kube.create(namespace("gpu-jobs"))
        names = [f"team-{i}" if i % 2 else f"ns-{i}" for i in range(args.namespaces)]
        for name in names:
            kube.create(namespace(name))
        policy = tmp / "policy.yaml"
        policy.write_text(POLICY)
        pages = math.ceil((args.namespaces + 5) / 500)
        print(f"quotas benchmark: {args.namespaces} namespaces in one cluster (list pages of 500: {pages})")
        print(f"{'run':<28} {'wall s':>7} {'RSS MiB':>8} {'lists ns/rq':>12} {'writes':>7}")
        for label in ("first run (all created)", "steady state"):
            kube.log.clear()
            wall, rss, _ = run_job(kube, policy)
            ops = kube.log.operations()
            lists = f"{ops.count('list namespaces')}/{ops.count('list resourcequotas')}"
            writes = len([w for w in kube.log.writes() if "events" not in w.operation])
            events = len(kube.log.writes()) - writes
            print(f"{label:<28} {wall:>7.2f} {rss:>8.1f} {lists:>12} {writes:>7}  (+{events} Events)")
        for label in ("naive: first (GET+POST)", "naive: steady (GET+PUT)"):
            kube.log.clear()
            wall = naive(kube, names)
            print(f"{label:<28} {wall:>7.2f} {'':>8} {'-':>12} {len(kube.log.writes()):>7}")
    finally:
        kube.stop()


if __name__ == "__main__":
    main()
