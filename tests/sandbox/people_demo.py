"""The demo's part for the people who use the GPUs (docs/people.md), played the evening after the demo's night: a
Warning Event on a running GPU pod before its group goes down (``warnBefore``), then, at night, a Pending GPU pod
that wakes the group (``wake``) and one of a namespace that may not, each told by an Event.

The group is the policy's first with ``wake``; the runs are real ``nodegroups`` runs, one per cluster (their other
changes, if any, are counted, not shown).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from jobs.core.resolved import view_of
from tests.emulators.kube.seed import gpu_pod, namespace
from tests.sandbox.world import World

#: Namespaces of the demo's pods: one the example policy's ``wake.namespaces`` allows (ml-*), one it does not.
ALLOWED, OTHER = "ml-vision", "interns"


def _pending(name: str, ns: str, label: tuple[str, str], gpus: int) -> dict[str, Any]:
    pod = gpu_pod(name, ns, node=None, gpus=gpus, phase="Pending")
    pod["spec"]["nodeSelector"] = {label[0]: label[1]}
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    return pod


def _events(world: World, cluster: str, ns: str, pod: str) -> list[str]:
    return [
        f"{e['type']}  {e['reason']}  {e['message']}"
        for e in world.kubes[cluster].list("Event", ns)
        if e["involvedObject"]["name"] == pod and e["reason"].startswith(("NodeGroup", "Shutdown"))
    ]


def _others(report: dict[str, Any], group: str) -> int:
    return sum(1 for i in report["items"] if i["kind"] == "node group" and i["name"] != group and i.get("steps"))


def _group_lines(report: dict[str, Any], group: str) -> list[str]:
    found = []
    for item in report["items"]:
        if item["kind"] == "node group" and item["name"] == group:
            steps = ", ".join(item.get("steps") or ()) or item.get("reason") or ""
            found.append(f"  {group}: {item['status']}: {steps}")
            found += [f"    drained {pod}" for pod in item.get("evict") or ()]
    return found


def run_people(world: World, morning: datetime, run_gpu_jobs: Callable[..., Any]) -> tuple[list[Any], list[str]]:
    """The three runs and what a person sees of them."""
    policy = world.policy
    group = next((g for g in policy.node_groups if g.wake is not None), None)
    if group is None:
        return [], ["  skipped: no node group of the policy has `wake`"]
    resolved = view_of(policy).group(group.name)
    cluster, label = resolved.cluster, resolved.node_label or next(iter((group.node_selector or {}).items()))
    down_at = resolved.schedule.desired(morning).next_change
    if down_at is None:
        return [], [f"  skipped: {group.name} never goes down"]
    kube = world.kubes[cluster]
    for ns in (ALLOWED, OTHER):
        if kube.get("Namespace", ns) is None:
            kube.create(namespace(ns))
    phases: list[Any] = []
    lines: list[str] = []

    def run(name: str, at: datetime) -> Any:
        phase = run_gpu_jobs(world, name, "nodegroups", "--at", at.isoformat(), "--output", "json", per_cluster=True)
        phase.at = at
        phases.append(phase)
        world.sync_nodes()
        return phase

    lead = resolved.settings.warn_before
    node = next(
        (n["metadata"]["name"] for n in kube.list("Node") if n["metadata"]["labels"].get(label[0]) == label[1]), None
    )
    if lead and node is not None:
        kube.create(gpu_pod("finetune-0", ALLOWED, node=node, gpus=group.gpus_per_node or 1))
        warned = run("warned", down_at - min(lead, timedelta(minutes=20)))
        lines.append(
            f"\n== warned before shutdown: nodegroups at {warned.at:%a %H:%M} (exit {warned.code}, {warned.seconds:.1f} s)"
        )
        for item in warned.report["items"]:
            if item["kind"] == "warning" and item["nodeGroup"] == group.name:
                lines.append(f"  {item['name']} on {item['node']}: {item['status']}")
        lines += [f"    {e}" for e in _events(world, cluster, ALLOWED, "finetune-0")]
        lines.append(f"  (other node groups changed by the same runs: {_others(warned.report, group.name)})")
        kube.cluster.delete("Pod", "finetune-0", ALLOWED)  # its work is done before the window ends
    # GPU pods still running postpone the shutdown up to maxDelay; then they are drained (the example's onBusy).
    run("evening, day 2", down_at + timedelta(minutes=1))
    night = down_at + resolved.settings.max_delay + timedelta(minutes=1)
    down = run("past maxDelay", night)
    lines.append(f"\n== nodegroups at {down.at:%a %H:%M}, past maxDelay (exit {down.code}, {down.seconds:.1f} s)")
    lines += _group_lines(down.report, group.name)
    gpus = group.gpus_per_node or 1
    kube.create(_pending("train-x", ALLOWED, label, gpus))
    kube.create(_pending("train-y", OTHER, label, gpus))
    woke = run("wake", night + timedelta(minutes=30))
    lines.append(
        f"\n== wake on demand: Pending GPU pods in {ALLOWED} and {OTHER}, nodegroups at {woke.at:%a %H:%M}"
        f" (exit {woke.code}, {woke.seconds:.1f} s)"
    )
    lines += _group_lines(woke.report, group.name)
    for item in woke.report["items"]:
        if item["kind"] == "wake":
            what = f"woke {item['nodeGroup']} ({item['nodes']} node(s))" if item["woke"] else "woke nothing"
            lines.append(f"  {item['name']}: {what}")
    for ns, pod in ((ALLOWED, "train-x"), (OTHER, "train-y")):
        lines += [f"    {e}" for e in _events(world, cluster, ns, pod)]
    return phases, lines
