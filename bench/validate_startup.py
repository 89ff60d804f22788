"""Start-up cost of ``gpu-jobs validate``, paired with ``custodian validate``, and of a one-cluster nodegroups dry run.

Each command runs as a separate process, the two of a pair one after the other (A B A B ...), so that a machine
whose speed drifts affects both alike; a figure is the median over the runs, a ratio the median of the ratios pair
by pair, CPU time (user + system) from the kernel's accounting of each child and wall time beside it. A target is
judged on CPU time: the wall time of a dry run also holds the emulators' answers (served by this process) and
whatever else the machine runs.

    .venv/bin/python bench/validate_startup.py [--runs 11] [--custodian PATH] [--only custodian|dry-run]

Targets (issue 23): ``validate`` at most 0.6x ``custodian validate`` (Cloud Custodian's own policy check; not a
dependency of this project: ``python -m venv /tmp/c7n && /tmp/c7n/bin/pip install c7n``, then --custodian
/tmp/c7n/bin/custodian, or have ``custodian`` on PATH); a ``nodegroups --dry-run`` of one cluster (an EKS cluster
with four node groups, on the emulators) at most 3x a ``validate`` run of the same policy. Prints figures and
whether each target is met; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.emulators.aws.emulator import start_aws  # noqa: E402 - after the repository is on the path
from tests.emulators.kube.fixtures import KubeHandle, start_kube  # noqa: E402
from tests.emulators.kube.seed import gpu_node, namespace  # noqa: E402
from tests.sandbox.world import write_kubeconfig  # noqa: E402

VALIDATE_TARGET = 0.6  # validate / custodian validate
DRY_RUN_TARGET = 3.0  # nodegroups --dry-run of one cluster / validate
GPU_JOBS = [sys.executable, "-m", "jobs"]

CUSTODIAN_POLICY = """\
policies:
  - name: gpu-instances-without-owner
    resource: aws.ec2
    filters:
      - "tag:owner": absent
      - {type: value, key: InstanceType, op: glob, value: "p*"}
"""


def with_bytecode(env: dict[str, str] | None) -> dict[str, str]:
    """The image runs byte-compiled modules (.ci/slim-venv). With PYTHONDONTWRITEBYTECODE set (as in some shells and
    CI), the warm-up run would write no .pyc and every run would compile its sources again: a third of a validate run
    on top, and not what a pod pays."""
    return {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of ``command``, which must succeed."""
    env = with_bytecode(env)
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    # Read while it runs (a full pipe would stop it), then reap it with its own resource usage.
    errors = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{errors.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def paired(
    a: Sequence[str], b: Sequence[str], runs: int, env: dict[str, str] | None = None
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    timed(a, env), timed(b, env)  # warm the bytecode and file caches
    first, second = [], []
    for _ in range(runs):
        first.append(timed(a, env))
        second.append(timed(b, env))
    return first, second


def report(name_a: str, name_b: str, a: list[tuple[float, float]], b: list[tuple[float, float]], target: float) -> None:
    for name, runs in ((name_a, a), (name_b, b)):
        cpu, wall = zip(*runs, strict=True)
        print(f"  {name:<46} cpu {statistics.median(cpu):.3f} s   wall {statistics.median(wall):.3f} s (medians)")
    cpu_ratio = statistics.median(x[0] / y[0] for x, y in zip(a, b, strict=True))
    wall_ratio = statistics.median(x[1] / y[1] for x, y in zip(a, b, strict=True))
    verdict = "met" if cpu_ratio <= target else "NOT met"
    print(f"  ratio cpu {cpu_ratio:.2f} (wall {wall_ratio:.2f}): target at most {target:g}x of CPU time {verdict}")


def custodian_pair(runs: int, custodian: str | None, tmp: Path) -> None:
    validate = [*GPU_JOBS, "validate", str(ROOT / "gitops" / "policy.yaml")]
    print(f"gpu-jobs validate gitops/policy.yaml against custodian validate, {runs} pairs")
    if custodian is None:
        print("  custodian not found: give --custodian PATH (see this file's docstring); validate alone:")
        cpu, wall = zip(*(timed(validate) for _ in range(runs)), strict=True)
        print(f"  {'gpu-jobs validate':<46} cpu {statistics.median(cpu):.3f} s   wall {statistics.median(wall):.3f} s")
        return
    policy = tmp / "custodian.yml"
    policy.write_text(CUSTODIAN_POLICY)
    ours, theirs = paired(validate, [custodian, "validate", str(policy)], runs)
    report("gpu-jobs validate", "custodian validate", ours, theirs, VALIDATE_TARGET)


def one_cluster(tmp: Path) -> tuple[str, KubeHandle]:
    """An EKS cluster with four GPU node groups and its Kubernetes API; the policy naming them."""
    kube = start_kube(tmp / "eks-0" / "kubeconfig")
    kube.create(namespace("gpu-jobs"))
    kube.identify("eks-0")
    groups = []
    for i in range(4):
        groups.append(f"  - {{name: g{i}, cloud: aws, aws: {{region: eu-west-1, cluster: eks-0, nodegroup: ng-{i}}}}}")
        kube.create(gpu_node(f"node-{i}", labels={"eks.amazonaws.com/nodegroup": f"ng-{i}"}))
    # A per-cluster install's run (--cluster) reaches its cluster through the current context.
    write_kubeconfig(tmp / "kubeconfig", {"eks-0": kube}, current="eks-0")
    policy = "\n".join(
        [
            "apiVersion: gpu-jobs/v1",
            "kind: GpuPolicy",
            "defaults:",
            "  timezone: Europe/Berlin",
            '  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]',
            "clusters:",
            "  - {name: eks-0, cloud: aws, aws: {region: eu-west-1, cluster: eks-0}, kubeContext: eks-0}",
            "nodeGroups:",
            *groups,
        ]
    )
    return policy + "\n", kube


def dry_run_command(policy: Path) -> list[str]:
    # An evening: every group has a shutdown to plan.
    return [*GPU_JOBS, "nodegroups", "--dry-run", "--policy", str(policy), "--cluster", "eks-0", "--at", EVENING]


EVENING = "2026-12-01T21:00:00+01:00"


def emulated_env(aws_env: dict[str, str], tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        **aws_env,
        "KUBECONFIG": str(tmp / "kubeconfig"),
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true",
    }


def dry_run_pair(runs: int, tmp: Path) -> None:
    aws = start_aws()
    kube: KubeHandle | None = None
    try:
        for i in range(4):
            aws.add_eks_nodegroup("eu-west-1", "eks-0", f"ng-{i}", 1, 2, 4, instance_types=("g5.xlarge",))
        text, kube = one_cluster(tmp)
        policy = tmp / "policy.yaml"
        policy.write_text(text)
        print(f"gpu-jobs nodegroups --dry-run of one cluster (4 EKS groups, emulators) against validate, {runs} pairs")
        env = emulated_env(aws.env(), tmp)
        ours, base = paired(dry_run_command(policy), [*GPU_JOBS, "validate", str(policy)], runs, env)
        names = ("gpu-jobs nodegroups --dry-run --cluster eks-0", "gpu-jobs validate (same policy)")
        report(*names, ours, base, DRY_RUN_TARGET)
    finally:
        aws.stop()
        if kube is not None:
            kube.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--custodian", default=shutil.which("custodian"), help="the custodian command")
    parser.add_argument("--only", choices=("custodian", "dry-run"), help="one pair only (default: both)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpu-jobs-bench-") as tmp:
        if args.only in (None, "custodian"):
            custodian_pair(args.runs, args.custodian, Path(tmp))
        if args.only in (None, "dry-run"):
            dry_run_pair(args.runs, Path(tmp))


if __name__ == "__main__":
    main()
