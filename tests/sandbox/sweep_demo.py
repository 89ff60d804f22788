"""The demo's sweep: ``gpu-jobs sweep`` as a person runs it, through a full grace cycle, against the sandbox world.

The instants, and why they are truthful: the real Prometheus holds DCGM series up to the sandbox's start
(``world.now``) and nothing after it (promtool writes what it is given; a Prometheus answers an instant query after
its last sample from the 5-minute lookback only, and a range function such as ``avg_over_time(...[2h])`` from the
samples still inside the range: at ``now + 31m`` that is 89 minutes of data, not 120). So the pods' cycle is
played *before* and *at* the end of the data, never after it: the first run marks at ``now - gracePeriod - 1m``
(its 2 h window inside the backfilled 3 h), the second acts at ``now`` (the grace period over, the window ending on
the last scrape). The instances' grace is 24 h and asks nothing of Prometheus: ``--part instances`` at
``mark + 24h + 1m`` (the pods part would find no series a day after the data ends, and refuse, as it should).

Phases: a dry run (what would be marked, no write), the marks (annotations, Warning Events, mark tags), the actions
after the pods' grace period (deleted: a Deployment's ReplicaSet and a StatefulSet start new pods, young and
unjudged), the same instant again (no write), the instances a day later (stopped; Azure deallocated), and once
more (no write). Around them, ``kubectl get events`` and ``kubectl get pods`` as a user types them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tests import envelope
from tests.sandbox.install import KUBECTL
from tests.sandbox.world import World, child_env

#: The pod whose Warning Event the demo shows (``kubectl describe pod``), and the namespace whose pods it lists after
#: the action (a Deployment's: the deleted pods Terminating, their replacements Running).
DESCRIBED = ("ml-prod", "speech", "asr-streaming-0")
LISTED = ("ml-prod", "ranking")


def available() -> str | None:
    """Why the sweep phase cannot run in this checkout, or None."""
    if importlib.util.find_spec("jobs.commands.sweep") is None:
        return "gpu-jobs sweep is not in this checkout yet (jobs/commands/sweep.py)"
    return None


def missing_clouds(world: World) -> list[str]:
    """Clouds of the policy's account scopes the instances part has no adapter for (it refuses them: exit 2)."""
    from jobs.commands.sweep import INSTANCE_ADAPTERS

    clouds = {c.cloud for c in world.policy.fleet}
    return sorted(c for c in clouds if c not in INSTANCE_ADAPTERS)


@dataclass(frozen=True)
class Instants:
    mark: datetime  # the first live run: marks
    act: datetime  # the pods' grace period over: the end of the DCGM data
    stop: datetime  # the instances' grace period over

    @classmethod
    def of(cls, world: World) -> Instants:
        sweep = world.policy.sweep
        assert sweep is not None
        assert sweep.idle_pods is not None
        act = world.now.replace(microsecond=0)
        mark = act - sweep.idle_pods.grace - timedelta(minutes=1)
        grace = sweep.untagged_instances.grace if sweep.untagged_instances is not None else timedelta(hours=24)
        return cls(mark, act, mark + grace + timedelta(minutes=1))


def run_sweep(
    world: World,
    run: Callable[..., Any],
    kubectl_lines: bool = True,
    after: Callable[[Any], None] | None = None,
    instances_again: bool = False,
) -> tuple[list[Any], dict[str, list[str]]]:
    """Every phase of the cycle (``run`` is ``demo.run_gpu_jobs``); the kubectl lines shown after the marks and after
    the actions. Without an instances adapter for a cloud of the policy, only the pods part runs (said so).
    ``after`` is called with each phase as soon as it ran (a test looks at the world between phases);
    ``instances_again``: the instances part once more after the stops (the test's; the demo shows one run that
    writes nothing, the pods', and saves the ~3 s).

    The marks and the actions run both parts in one run, as a central install does: one limit across them
    (``sweep.limits``: 10 actions and 20 % of the pods and instances considered; the pods part alone considers the
    ~25 GPU pods, and 8 deletions are more than its 20 %: refused, exit 3). Elsewhere one part, as its own CronJob
    runs it: the instances part imports three cloud SDKs (~2 s a run), and re-running it while nothing of it changes
    would only cost time."""
    at = Instants.of(world)
    both = not missing_clouds(world)

    def step(*args: Any) -> Any:  # the caller's run, then its observer
        phase = run(*args)
        if after is not None:
            after(phase)
        return phase

    pods = ["--part", "pods"]
    json_at = ("--output", "json", "--at")
    phases = [
        step(world, "sweep --dry-run", "sweep", "--dry-run", *json_at, at.mark.isoformat(), *pods),
        step(world, "sweep: marks", "sweep", *json_at, at.mark.isoformat(), *([] if both else pods)),
    ]
    shown: dict[str, list[str]] = {}
    if kubectl_lines:
        cluster, namespace, pod = DESCRIBED
        described = kubectl(world, cluster, "-n", namespace, "describe", "pod", pod)
        start = next((i for i, line in enumerate(described) if line.strip() == "Events:"), len(described))
        shown["events"] = [described[0], *described[start:]]
    both_or_pods = [] if both else pods
    phases.append(step(world, "sweep: grace period over", "sweep", *json_at, at.act.isoformat(), *both_or_pods))
    if kubectl_lines:
        shown["pods"] = kubectl(world, LISTED[0], "-n", LISTED[1], "get", "pods")
    phases.append(step(world, "sweep again", "sweep", *json_at, at.act.isoformat(), *pods))
    instances = ["--part", "instances"]
    if both:
        day = at.stop.isoformat()
        phases.append(step(world, "sweep instances: a day later", "sweep", *json_at, day, *instances))
        if instances_again:
            phases.append(step(world, "sweep instances again", "sweep", *json_at, day, *instances))
    if kubectl_lines:  # once the deleted pods are gone (their grace period), their ReplicaSet's replacements run
        wait_gone(world, *LISTED)
        shown["pods later"] = kubectl(world, LISTED[0], "-n", LISTED[1], "get", "pods")
    for phase, when in zip(phases, (at.mark, at.mark, at.act, at.act, at.stop, at.stop), strict=False):
        phase.at = when
    return phases, shown


def wait_gone(world: World, cluster: str, namespace: str, timeout_s: float = 20.0) -> bool:
    """Until no pod of ``namespace`` is Terminating (read in-process: the emulator finishes deletions with time)."""
    kube = world.kubes[cluster]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(p["metadata"].get("deletionTimestamp") for p in kube.list("Pod", namespace)):
            return True
        time.sleep(0.1)
    return False


def kubectl(world: World, context: str, *args: str) -> list[str]:
    argv = [str(KUBECTL), "--context", context, *args]
    done = subprocess.run(argv, env=child_env(world), capture_output=True, text=True, timeout=60, check=False)
    return [f"  $ kubectl --context {context} {' '.join(args)}"] + [
        f"    {line}" for line in (done.stdout + done.stderr).rstrip().splitlines()
    ]


# --- rendering --------------------------------------------------------------------------------------------------


def _writes(phase: Any) -> str:
    shown = [f"{k} {w}w" for k, (_, w) in phase.requests.items() if w]
    return "  ".join(shown) or "none"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _noteworthy(pod: dict[str, Any]) -> bool:
    """The rows whose message says something the table cannot: why a pod is left alone, leaked memory, a MIG slice."""
    return (
        pod["state"] in ("exempt", "snoozed", "young", "unknown")
        or pod["idleReason"] == "leaked-memory"
        or ("GR_ENGINE_ACTIVE" in (pod["reason"] or ""))
    )


def render(phase: Any, why: bool = False) -> list[str]:
    """The phase's summary; ``why``: the messages of the noteworthy pods too (what their Event or report says)."""
    at = phase.at.isoformat() if phase.at else "?"
    lines = [f"== {phase.name} at {at}   (exit {phase.code}, {phase.seconds:.1f} s)"]
    lines.append(f"  $ gpu-jobs {' '.join(phase.argv)}")
    if not phase.stdout.strip().startswith("{"):
        return [*lines, "  no JSON report; stderr:", *("    " + s for s in phase.stderr.strip().splitlines()[-8:])]
    report = phase.report
    pods = sorted(envelope.items(report, "pod"), key=lambda p: (p["cluster"], p["namespace"], p["pod"]))
    if report["dryRun"]:  # the same table as the marks below: say what it would do, and that it wrote nothing
        counts: dict[str, int] = {}
        for p in pods:
            counts[p["state"]] = counts.get(p["state"], 0) + 1
        said = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        return [*lines, f"  would report {len(pods)} pods ({said}); writes: {_writes(phase)}"]
    if "--part" not in phase.argv or "pods" in phase.argv:
        if pods:
            lines.append(f"  {'cluster':<9} {'pod':<46} {'state':<9} {'reason':<14} util   mem   action")
        for p in pods:
            where = f"{p['namespace']}/{p['pod']}"
            memory = "-" if p["memoryUsed"] is None else f"{p['memoryUsed']:.0%}"
            action = p["action"] if p["state"] in ("marked", "acted") else ""
            lines.append(
                f"  {p['cluster']:<9} {where:<46} {p['state']:<9} {p['reason'] or '-':<14} "
                f"{_pct(p['utilization']):<6} {memory:<5} {action}"
            )
        if not pods:
            lines.append("  no pod to report: nothing idle is left unmarked, nothing marked is due")
        for p in pods if why else ():
            if _noteworthy(p):
                lines.append(f"    {p['namespace']}/{p['pod']}: {p['reason']}")
        per_cluster: dict[str, tuple[int, int]] = {}
        for u in envelope.items(report, "unallocated GPU"):
            gpus, nodes = per_cluster.get(u["cluster"], (0, 0))
            per_cluster[u["cluster"]] = (gpus + u["gpus"], nodes + 1)
        if per_cluster:
            lines.append(
                "  unallocated GPUs (no pod holds them): "
                + ", ".join(f"{c} {g} on {n} node{'s' * (n != 1)}" for c, (g, n) in per_cluster.items())
            )
    instances = [i for i in envelope.items(report, "instance") if i["state"] != "member"]
    members = [i for i in envelope.items(report, "instance") if i["state"] == "member"]
    if instances:
        lines.append(f"  {'cloud':<6} {'scope':<38} {'instance':<22} {'type':<22} {'state':<18} missing")
    for i in sorted(instances, key=lambda i: (i["cloud"], i["account"], i["id"])):
        name = i["id"].rsplit("/", 1)[-1]
        # On Azure the policy's stop is a deallocate (a stopped VM is still billed): say what the cloud did.
        did = "deallocate" if (i["cloud"], i["action"]) == ("azure", "stop") else i["action"]
        state = f"{i['state']} ({did})" if i["state"] == "acted" else i["state"]
        lines.append(
            f"  {i['cloud']:<6} {i['account']:<38} {name:<22} {i['type']:<22} {state:<18} "
            f"{','.join(i['missingTags']) or '-'}"
        )
    if members:
        lines.append(f"  + {len(members)} untagged instances of node groups reported as members (never acted on)")
    failed = [s for s in report["scopes"] if s["state"] == "failed" or (s["reason"] and s["state"] != "applied")]
    for scope in failed:
        lines.append(f"  ! {scope['name']}: {scope['state']}: {scope['reason']}")
    lines.append(f"  writes: {_writes(phase)}")
    return lines
