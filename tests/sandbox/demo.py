"""``make demo``: start the sandbox world, run every job that exists as a separate ``gpu-jobs`` process, show
what happened at a glance, stop everything.

Phases: ``validate``; ``calendar`` at a weekday 07:29; then a full night of ``nodegroups --at``, played the way a
fleet runs it: one run per cluster (``--cluster``, each through its own kubeconfig, as a per-cluster install sees
its own API), side by side. First a run of every cluster-scoped job (nodegroups, quotas, sweep pods) pointed at the
wrong cluster's API, each refused by that API's identity before it reads or writes anything; then an
evening instant just after the groups' end of working hours, the same instant again (must change nothing), and a
morning instant inside warm-up. The instants come from the calendar's JSON, not from hard-coded times. Last,
``quotas`` at the same morning, one run per cluster, then again (must write nothing). Then ``cloud-quotas``, once,
as the one install that runs it (the central one: account quotas are per account): it files an increase on each
cloud; the sandbox, standing in for each cloud's reviewers, decides them (AWS approved, GCP partially granted, Azure
failed with ContactSupport, the second AWS request handed to a support case), and the next run reports each outcome
with the cloud's ids. The end: a one-off run as a
person starts one, ``kubectl create job --from=cronjob/quotas`` in one cluster, run by the sandbox's job executor
from the install applied there, and its logs. Last, the sweep's grace cycle (:mod:`tests.sandbox.sweep_demo`): marked, acted on after the grace
period (``--at``), then a run that writes nothing; the instances a day later. Then, the evening after
(:mod:`tests.sandbox.people_demo`): a running GPU pod warned before its group goes down, and at night a Pending GPU pod
that wakes it, next to one of a namespace that may not.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from jobs.core.policy import Policy
from jobs.core.resolved import view_of
from tests import envelope, forkserver
from tests.sandbox import people_demo, sweep_demo
from tests.sandbox.fleet import JOB_NAMESPACE
from tests.sandbox.install import KUBECTL
from tests.sandbox.world import World, child_env

GPU_JOBS = [sys.executable, "-m", "jobs"]  # the `gpu-jobs` console script, from this very venv
EVENING_FROM = 17  # local hour: "end of working hours" changes are looked for from here to midnight
MORNING_WITHIN = timedelta(hours=14)


@dataclass
class Phase:
    name: str
    argv: list[str]
    code: int
    seconds: float
    stdout: str
    stderr: str
    expected: tuple[int, ...] = (0,)
    requests: dict[str, tuple[int, int]] = field(default_factory=dict)  # emulator -> (reads, writes)
    nodes: dict[str, tuple[int, int]] = field(default_factory=dict)  # group -> (before, after)
    at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.code in self.expected

    @property
    def report(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.stdout)
        return parsed

    def writes(self) -> int:
        return sum(w for _, w in self.requests.values())


def _gpu_jobs(world: World, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [*GPU_JOBS, *args], env={**child_env(world), **env}, capture_output=True, text=True, timeout=300, check=False
    )


def run_gpu_jobs(
    world: World,
    name: str,
    *args: str,
    expected: tuple[int, ...] = (0,),
    per_cluster: bool = False,
    env: dict[str, str] | None = None,
) -> Phase:
    """One ``gpu-jobs`` process against the world (or, ``per_cluster``, one per cluster with ``--cluster`` and that
    cluster's own kubeconfig, side by side, their JSON reports merged), with request and node counts around it."""
    logs = world.logs()
    before = {k: (len(v.reads()), len(v.writes())) for k, v in logs.items()}
    nodes_before = {g.name: len(world.nodes_of(g)) for g in world.fleet.groups}
    began = time.perf_counter()
    if per_cluster:
        clusters = [c.name for c in world.policy.fleet]
        with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
            runs = list(
                pool.map(
                    lambda c: _gpu_jobs(
                        world, [*args, "--cluster", c], {"KUBECONFIG": str(world.kubeconfig_for(c)), **(env or {})}
                    ),
                    clusters,
                )
            )
        code = max(r.returncode for r in runs)
        stdout = _merge_reports(dict(zip(clusters, runs, strict=True)))
        stderr = "".join(r.stderr for r in runs)
    else:
        done = _gpu_jobs(world, list(args), env or {})
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    seconds = time.perf_counter() - began
    world.sync_nodes()  # the clouds' new sizes, reflected in the clusters now rather than at the next tick
    after = {k: (len(v.reads()), len(v.writes())) for k, v in logs.items()}
    requests = {k: (after[k][0] - before[k][0], after[k][1] - before[k][1]) for k in logs}
    nodes = {g.name: (nodes_before[g.name], len(world.nodes_of(g))) for g in world.fleet.groups}
    return Phase(name, list(args), code, seconds, stdout, stderr, expected, requests, nodes)


def _merge_reports(runs: dict[str, subprocess.CompletedProcess[str]]) -> str:
    """One JSON envelope for a fleet run made of one run per cluster: every cluster's scopes and items together; a
    cluster whose run printed no envelope is a failed scope (its exit code in the reason)."""
    docs = []
    for cluster, run in runs.items():
        try:
            docs.append(json.loads(run.stdout))
        except ValueError:
            failed = {"kind": "cluster", "name": cluster, "state": "failed", "reason": f"exit {run.returncode}"}
            docs.append({**envelope.merge([]), "scopes": [{**failed, "warnings": [], "counts": {}}]})
    return json.dumps(envelope.merge(docs))


# --- picking the instants from the calendar ----------------------------------------------------------------------


def _changes(calendar: dict[str, Any]) -> dict[str, list[tuple[datetime, str, str]]]:
    found: dict[str, list[tuple[datetime, str, str]]] = {}
    for group in calendar["nodeGroups"]:
        start = datetime.fromisoformat(calendar["at"])
        entries = [(start, group["state"], group["reason"])]
        entries += [(datetime.fromisoformat(c["at"]), c["state"], c["reason"]) for c in group.get("changes", [])]
        found[group["name"]] = sorted(entries, key=lambda e: e[0])
    return found


def state_at(calendar: dict[str, Any], group: str, at: datetime) -> tuple[str, str]:
    """The desired (state, reason) of ``group`` at ``at``, read off the calendar's changes."""
    current = ("?", "")
    for moment, state, reason in _changes(calendar)[group]:
        if moment <= at:
            current = (state, reason)
    return current


def pick_night(calendar: dict[str, Any], tz: ZoneInfo) -> tuple[datetime, datetime] | None:
    """Evening: a minute after the last down-change between 17:00 and midnight of the calendar's day.
    Morning: a minute after the last up-change (warm-up included) of the groups that were down that evening."""
    day = datetime.fromisoformat(calendar["at"]).astimezone(tz).date()
    evening_from = datetime(day.year, day.month, day.day, EVENING_FROM, tzinfo=tz)
    midnight = evening_from.replace(hour=0) + timedelta(days=1)
    changes = _changes(calendar)
    downs = [
        m for entries in changes.values() for m, s, _ in entries[1:] if s == "down" and evening_from <= m < midnight
    ]
    if not downs:
        return None
    evening = max(downs) + timedelta(minutes=1)
    down_then = [g for g in changes if state_at(calendar, g, evening)[0] == "down"]
    ups = [m for g in down_then for m, s, _ in changes[g][1:] if s == "up" and evening < m <= evening + MORNING_WITHIN]
    if not ups:
        return None
    return evening.astimezone(tz), (max(ups) + timedelta(minutes=1)).astimezone(tz)


def candidate_days(today: date) -> list[date]:
    """Mon-Thu after today (so the morning after is a weekday too)."""
    days = [today + timedelta(days=n) for n in range(1, 15)]
    return [d for d in days if d.weekday() < 4]


# --- the night --------------------------------------------------------------------------------------------------


WRONG_CLUSTER = ("research", "notebooks")  # a per-cluster install of `research` whose kubeconfig reaches `notebooks`


#: Every cluster-scoped job, as the wrong-cluster step runs it (live: the refusal, not a dry run, is what is shown).
WRONG_CLUSTER_JOBS = (("nodegroups", "--only", "research-h100"), ("quotas",), ("sweep", "--part", "pods"))


def run_wrong_cluster(world: World, evening: datetime) -> list[Phase]:
    """``--cluster research`` through a kubeconfig whose context reaches another cluster, for every cluster-scoped
    job: the API says it is ``notebooks`` (its identity ConfigMap), so each run refuses research before reading
    anything that decides or writing anything, and exits 1."""
    cluster, reaching = WRONG_CLUSTER
    env = {"KUBECONFIG": str(world.kubeconfig_for(cluster, reaching=reaching))}
    phases = []
    for job, *options in WRONG_CLUSTER_JOBS:
        phase = run_gpu_jobs(
            world,
            f"wrong cluster ({cluster} through {reaching}'s API)",
            *(job, "--cluster", cluster, *options, "--at", evening.isoformat(), "--output", "json"),
            expected=(1,),
            env=env,
        )
        phase.at = evening
        phases.append(phase)
    return phases


def refusal_of(report: Any) -> str | None:
    """The identity refusal a report carries, wherever its job puts a scope's reason."""
    if isinstance(report, str):
        return report if "refused before reading anything" in report else None
    values = report.values() if isinstance(report, dict) else report if isinstance(report, list) else ()
    return next((found for v in values if (found := refusal_of(v)) is not None), None)


def render_wrong_cluster(phase: Phase) -> list[str]:
    job = phase.argv[0]
    head = f"== {phase.name}: {' '.join(phase.argv[:3])}   (exit {phase.code}, {phase.seconds:.1f} s)"
    writes = phase.writes()
    reason = refusal_of(phase.report) if phase.stdout.strip().startswith("{") else None
    said = "refused" + reason.split("refused", 1)[1] if reason else "no refusal in the report"
    return [head, f"  {job}: {said}", f"  writes to any API: {writes}"]


def run_night(world: World, evening: datetime, morning: datetime) -> list[Phase]:
    """Evening, the same evening again, morning: each a real ``nodegroups`` run per cluster (JSON reports)."""
    phases = []
    for name, at in (("evening", evening), ("evening again", evening), ("morning", morning)):
        phase = run_gpu_jobs(world, name, "nodegroups", "--at", at.isoformat(), "--output", "json", per_cluster=True)
        phase.at = at
        phases.append(phase)
    return phases


def run_night_report(world: World, evening: datetime, morning: datetime) -> Phase:
    """``gpu-jobs report`` over the demo's night, at the morning: what the clusters' histories measure (the fleet
    through each cluster's kubeContext, as a central install reads it)."""
    hours = math.ceil((morning - evening).total_seconds() / 3600) + 1
    phase = run_gpu_jobs(world, "report", "report", "--since", f"{hours}h", "--at", morning.isoformat())
    phase.at = morning
    return phase


def run_quotas(world: World, at: datetime) -> list[Phase]:
    """Namespace quotas in every cluster, one run per cluster; then the same again, which must write nothing."""
    phases = []
    for name in ("quotas", "quotas again"):
        phase = run_gpu_jobs(world, name, "quotas", "--at", at.isoformat(), "--output", "json", per_cluster=True)
        phase.at = at
        phases.append(phase)
    return phases


# --- cloud quotas: requests filed, decided by the clouds, followed ------------------------------------------------

#: How the sandbox's clouds decide the requests of the first run: (cloud, quota entry or any) -> decision.
AWS_DECISIONS = {"p-spot-eu-west-1": "APPROVED"}  # any other AWS request: a support case is opened
GCP_PARTIAL = 0.75  # the share of the preferred value the GCP reviewers grant
CLOUD_QUOTAS_COMMAND = ("cloud-quotas", "--output", "json")


def run_cloud_quotas(world: World) -> tuple[Phase, list[str], Phase]:
    """``gpu-jobs cloud-quotas`` (files a request on each cloud); the clouds decide; ``gpu-jobs cloud-quotas`` again
    (each outcome, with the cloud's ids). The second run exits 1: a partial grant and a failed request are failed
    items (the policy does not hold), by design."""
    first = run_gpu_jobs(world, "cloud-quotas", *CLOUD_QUOTAS_COMMAND)
    decided = decide_cloud_quotas(world, first.report) if first.ok else []
    again = run_gpu_jobs(world, "cloud-quotas again", *CLOUD_QUOTAS_COMMAND, expected=(1,))
    return first, decided, again


def decide_cloud_quotas(world: World, report: dict[str, Any]) -> list[str]:
    """Each cloud's reviewers decide the requests just filed, through the emulators' own decision calls."""
    lines = []
    for quota in envelope.items(report, "cloud quota"):
        request = quota.get("request")
        if quota["action"] != "request" or not request:
            continue
        if quota["cloud"] == "aws":
            status = AWS_DECISIONS.get(quota["name"], "CASE_OPENED")
            world.aws.decide_quota_request(request["id"], status)
            said = status
        elif quota["cloud"] == "gcp":
            granted = max(quota["limit"] or 0, int(request["value"] * GCP_PARTIAL))
            world.gcp.grant(request["id"], granted)
            said = f"granted {granted} of {request['value']}"
        else:
            world.azure.decide_quota_request(request["id"], "Failed")
            said = "Failed (ContactSupport)"
        lines.append(f"  {quota['cloud']:<6} {quota['name']:<22} {said}")
    return lines


def _request_text(request: dict[str, Any] | None) -> str:
    if not request:
        return "-"
    ids = "".join(f" {k}={v}" for k, v in request.items() if k not in ("id", "status", "value"))
    return f"{request['status']} {request['value']}: {request['id'].rsplit('/', 1)[-1]}{ids}"


def render_cloud_quota_phase(phase: Phase) -> list[str]:
    lines = [f"== {phase.name}   (exit {phase.code}, {phase.seconds:.1f} s)", f"  $ gpu-jobs {' '.join(phase.argv)}"]
    if not phase.stdout.strip().startswith("{"):
        return [*lines, "  no JSON report; stderr:", *("    " + s for s in phase.stderr.strip().splitlines()[-8:])]
    lines.append(f"  {'quota':<22} {'cloud':<6} {'limit':>6} {'usage':>6} {'target':>6} {'action':<8} request")
    for q in envelope.items(phase.report, "cloud quota"):
        usage = "-" if q["usage"] is None else str(q["usage"])
        limit = "-" if q["limit"] is None else str(q["limit"])
        lines.append(
            f"  {q['name']:<22} {q['cloud']:<6} {limit:>6} {usage:>6} {q['target']:>6} {q['action']:<8}"
            f" {_request_text(q['request'])}"
        )
        if q["demand"]:
            lines.append(f"    {q['demand']} {q['unit']}".rstrip())
    writes = "  ".join(f"{k} {w}w" for k, (_, w) in phase.requests.items() if w and not k.startswith("kube:"))
    lines.append(f"  cloud writes: {writes or 'none'}")
    return lines


# --- a one-off run, as a person starts one ----------------------------------------------------------------------

ONE_OFF = ("aks-ml", "quotas")  # a cluster and a CronJob: quotas set this morning, so the run changes nothing
LOG_LINES = 30


def run_one_off(world: World, cluster: str, cronjob: str) -> tuple[Phase, list[str]]:
    """``kubectl create job --from=cronjob/<cronjob>`` in ``cluster``: the install's CronJob run now by the sandbox's
    executor (its ServiceAccount's RBAC, its policy ConfigMap), then ``kubectl get job`` and ``kubectl logs``."""
    name = f"{cronjob}-manual-{int(time.time())}"
    kubectl = str(KUBECTL)
    commands = [
        [kubectl, "--context", cluster, "-n", JOB_NAMESPACE, "create", "job", f"--from=cronjob/{cronjob}", name],
        [
            kubectl,
            "--context",
            cluster,
            "-n",
            JOB_NAMESPACE,
            "wait",
            "--for=condition=complete",
            f"job/{name}",
            "--timeout=5m",
        ],
        [kubectl, "--context", cluster, "-n", JOB_NAMESPACE, "get", "job", name],
        [kubectl, "--context", cluster, "-n", JOB_NAMESPACE, "logs", f"job/{name}"],
    ]
    logs = world.logs()
    before = {k: (len(v.reads()), len(v.writes())) for k, v in logs.items()}
    began = time.perf_counter()
    lines: list[str] = []
    code = 0
    outputs = []
    for argv in commands:
        done = subprocess.run(argv, env=child_env(world), capture_output=True, text=True, timeout=300, check=False)
        shown = " ".join(["kubectl", *argv[1:]])
        lines.append(f"  $ {shown}")
        output = (done.stdout + done.stderr).rstrip().splitlines()
        outputs.append(done.stdout)
        if argv[-1] == f"job/{name}" and "logs" in argv:
            more = len(output) - LOG_LINES
            output = output[:LOG_LINES] + ([f"... ({more} more lines)"] if more > 0 else [])
        lines += [f"    {line}" for line in output]
        code = code or done.returncode
    after = {k: (len(v.reads()), len(v.writes())) for k, v in logs.items()}
    requests = {k: (after[k][0] - before[k][0], after[k][1] - before[k][1]) for k in logs}
    phase = Phase(
        f"one-off {cronjob} in {cluster}", commands[0][1:], code, time.perf_counter() - began, outputs[-1], ""
    )
    phase.requests = requests
    return phase, lines


# --- rendering --------------------------------------------------------------------------------------------------


def _size(config: dict[str, Any]) -> str:
    if config.get("limits") is not None:  # a Karpenter NodePool: its limits are its size
        return " ".join(f"{k.rsplit('/', 1)[-1]}={v}" for k, v in sorted(config["limits"].items())) or "no limits"
    desired = "?" if config.get("desired") is None else str(config["desired"])
    text = f"{config['min']}/{desired}/{config['max']}"
    if config.get("autoscaling"):
        text += " as"
    if config.get("stopped"):
        text += " stopped"
    return text


def _requests(phase: Phase) -> str:
    return "  ".join(f"{k} {r}r/{w}w" for k, (r, w) in phase.requests.items())


def render_night_phase(policy: Policy, phase: Phase) -> list[str]:
    where = " ".join(phase.argv[1:3]) if "--cluster" in phase.argv else "one run per cluster"
    lines = [f"== {phase.name}: nodegroups --at {phase.at.isoformat() if phase.at else '?'} ({where})"]
    lines[0] += f"   (exit {phase.code}, {phase.seconds:.1f} s)"
    if not phase.stdout.strip().startswith("{"):
        return [*lines, "  no JSON report; stderr:", *("    " + s for s in phase.stderr.strip().splitlines()[-8:])]
    report = phase.report
    # An action (or a skip's write that failed) carries its ``message``; a skip its ``warning``.
    groups = envelope.items(report, "node group")
    acted = {g["name"]: g for g in groups if "message" in g}
    skipped = {g["name"]: g for g in groups if "warning" in g}
    failed = [g for g in groups if g["status"] == "failed"] + [s for s in report["scopes"] if s["state"] == "failed"]
    if not acted and not failed:
        # Never above a failed row: "nothing to change" would read as "all is well".
        lines.append("  nothing to change: every node group is where the schedule wants it")
    lines.append(f"  {'group':<18} {'cluster':<10} {'nodes':<8} {'config before -> after':<30} status")
    shown = set(acted) | set(skipped)
    clusters = {c["name"] for c in report.get("scopes", ())} or {
        policy.cluster_of(g).name for g in policy.node_groups if g.name in shown
    }
    for group in policy.node_groups:
        cluster = policy.cluster_of(group).name
        if cluster not in clusters:
            continue
        before, after = phase.nodes.get(group.name, (0, 0))
        nodes = f"{before} -> {after}" if before != after else f"{before}"
        if group.name in acted:
            g = acted[group.name]
            change = f"{_size(g['before'])} -> {_size(g['after'])}" if "before" in g else ""
            status = f"{g['status']} {g.get('direction', '')}".strip()
            if g["status"] == "failed":
                status += f": {g['message']}"
        elif group.name in skipped:
            skip = skipped[group.name]
            change = ""
            failed = skip["status"] == "failed"
            status = "failed" if failed else "postponed" if "postponed" in skip["reason"] else "skipped"
        else:
            # The schedule engine itself, not the calendar's up/down flips: a reason can change without a flip
            # (warming up -> in working hours).
            desired = view_of(policy).group(group.name).schedule.desired(phase.at) if phase.at else None
            change = ""
            status = f"unchanged ({desired.state}: {desired.reason})" if desired else "unchanged"
        lines.append(f"  {group.name:<18} {cluster:<10} {nodes:<8} {change:<30} {status}")
    for name, skip in skipped.items():
        lines.append(f"  - {name}: {skip['reason']}")
    unmanaged = [g for g in envelope.items(report, "node group") if g.get("unmanaged")]
    if unmanaged:
        found = ", ".join(f"{u['cloud']} {'/'.join(u['locator'].values())}" for u in unmanaged)
        lines.append(f"  unmanaged GPU groups (no schedule): {found}")
    total_before = sum(b for b, _ in phase.nodes.values())
    total_after = sum(a for _, a in phase.nodes.values())
    lines.append(f"  cluster nodes {total_before} -> {total_after};  requests: {_requests(phase)}")
    return lines


def _hard(hard: dict[str, str]) -> str:
    return " ".join(f"{k.removeprefix('requests.')}={v}" for k, v in sorted(hard.items())) or "-"


def render_quota_phase(phase: Phase) -> list[str]:
    at = phase.at.isoformat() if phase.at else "?"
    lines = [f"== {phase.name}: quotas --at {at} (one run per cluster)   (exit {phase.code}, {phase.seconds:.1f} s)"]
    if not phase.stdout.strip().startswith("{"):
        return [*lines, "  no JSON report; stderr:", *("    " + s for s in phase.stderr.strip().splitlines()[-8:])]
    for doc in phase.report["scopes"]:
        entries = [e for e in envelope.items(phase.report, "namespace quota") if e["scope"] == doc["name"]]
        counts: dict[str, int] = {}
        for entry in entries:
            counts[entry["action"]] = counts.get(entry["action"], 0) + 1
        summary = ", ".join(f"{n} {action}" for action, n in sorted(counts.items())) or "no namespaces"
        writes = phase.requests.get(f"kube:{doc['name']}", (0, 0))[1]
        lines.append(f"  {doc['name']:<10} {len(entries)} namespaces: {summary}; {writes} writes")
        changed = [e for e in entries if e["action"] != "unchanged"]
        by_rule: dict[tuple[str, str, str], list[str]] = {}
        for entry in changed:
            by_rule.setdefault((entry["action"], entry["rule"], _hard(entry["hard"])), []).append(entry["namespace"])
        for (action, rule, hard), namespaces in sorted(by_rule.items()):
            shown = ", ".join(namespaces[:6]) + (f" +{len(namespaces) - 6}" if len(namespaces) > 6 else "")
            lines.append(f"    {action:<7} {hard:<42} ({rule}): {shown}")
        for entry in entries:
            for warning in entry["warnings"]:
                lines.append(f"    ! {entry['namespace']}: {warning}")
        for warning in doc.get("warnings", ()):
            lines.append(f"    ! {warning}")
    failed = envelope.items(phase.report, "namespace quota", "failed")
    if not phase.writes() and not failed and all(s["state"] != "failed" for s in phase.report["scopes"]):
        lines.append("  nothing to change: every namespace's quota is what the policy says (0 writes)")
    return lines


def render_calendar(world: World, calendar: dict[str, Any]) -> list[str]:
    lines = [f"  {'group':<18} {'cluster':<10} {'now':<5} {'next change':<27} reason"]
    for g in calendar["nodeGroups"]:
        cluster = g["cluster"]
        lines.append(f"  {g['name']:<18} {cluster:<10} {g['state']:<5} {g['nextChange'] or '-':<27} {g['reason']}")
    return lines


# --- the sweep ----------------------------------------------------------------------------------------------------


def show_sweep(world: World) -> list[Phase]:
    """The sweep's grace cycle (:mod:`tests.sandbox.sweep_demo`), printed phase by phase."""
    why = sweep_demo.available()
    print("\n== sweep: idle GPU pods, leaked VRAM, untagged GPU instances (a full grace cycle)")
    if why:
        print(f"  skipped: {why}")
        return []
    missing = sweep_demo.missing_clouds(world)
    if missing:
        print(f"  the instances part has no adapter for {', '.join(missing)} yet: the pods part only")
    heard: dict[str, list[dict[str, Any]]] = {}  # phase -> the messages the sandbox's webhook received meanwhile

    def listen(phase: Phase) -> None:
        received = world.webhook.received() if world.webhook is not None else []
        heard[phase.name] = received[sum(len(m) for m in heard.values()) :]

    phases, shown = sweep_demo.run_sweep(world, run_gpu_jobs, after=listen)
    for index, phase in enumerate(phases):
        print()
        print("\n".join(sweep_demo.render(phase, why=index == 1)), flush=True)
        if not phase.ok:
            print("  stderr (last lines):\n" + "\n".join("    " + s for s in phase.stderr.splitlines()[-10:]))
        if index == 1 and "events" in shown:
            print("  the Warning Event its owner sees (kubectl describe pod, its Events):")
            print("\n".join(shown["events"]))
        if index == 1:
            print("\n".join(render_notifications(heard.get(phase.name, []))), flush=True)
        if index == 2 and "pods" in shown:
            print("  deleted: Terminating for their grace period (the namespace's GPU quota still charges them, so")
            print("  their Deployment's replacements wait for room):")
            print("\n".join(shown["pods"]))
    if "pods later" in shown:
        print("\n  their Deployment's replacements, once the deleted pods are gone (young: not judged until 2h old):")
        print("\n".join(shown["pods later"]))
    return phases


def render_notifications(messages: list[dict[str, Any]], shown: int = 2) -> list[str]:
    """What the sandbox's webhook receiver got (docs/people.md#notifications): one message per owner and cluster;
    the first ``shown`` and the last (the nobody's, when there is one) with their first lines as Slack shows them."""
    if not messages:
        return ["  notifications: none received (the policy has no notify section?)"]
    owners = sorted({str(m["owner"] or "no owner") for m in messages})
    lines = [f"  notifications: {len(messages)} messages to the sandbox's webhook, one per owner and cluster"]
    lines.append(f"  ({len(owners)} owners: {', '.join(owners[:8])}{', ...' if len(owners) > 8 else ''}), among them:")
    for message in messages[:shown] + messages[shown:][-1:]:
        text = message["text"].splitlines()
        lines += [f"    {text[0]}", *(f"      {line[:110]}" for line in text[1:3])]
        if len(text) > 3:
            lines.append(f"      ... {len(text) - 3} more")
    return lines


# --- the overall summary -------------------------------------------------------------------------------------------


def _envelope_of(phase: Phase) -> dict[str, Any] | None:
    """The run's report envelope: its stdout, or (a one-off run) the envelope line of the Job's pod log."""
    for line in [phase.stdout.strip(), *phase.stdout.splitlines()]:
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and "counts" in doc:
                return doc
    return None


def _job_of(phase: Phase) -> str:
    if phase.name.startswith("one-off"):
        return phase.name  # kubectl create job: the CronJob's run, not a gpu-jobs process of the demo
    return phase.argv[0] if phase.argv else phase.name


def _what_changed(phase: Phase, doc: dict[str, Any] | None) -> str | None:
    if doc is None:
        return None
    counts = doc["counts"]
    if doc.get("dryRun"):
        return f"{phase.name}: dry run, {counts['planned']} planned" if counts["planned"] else None
    return f"{phase.name}: {counts['applied']} applied" if counts["applied"] else None


def _what_failed(phase: Phase, doc: dict[str, Any] | None) -> list[str]:
    """Each failed item and failed scope of the run (its reason, cut), or its exit code when it printed no report."""
    if doc is None:
        return [] if phase.code == 0 else [f"{phase.name}: exit {phase.code}, no report"]
    scopes = {s["name"] for s in doc["scopes"] if s["state"] in ("failed", "refused")}
    # A scope's reason often names it already ("cluster research: refused ..."): not twice.
    found = [
        s["reason"] if str(s["reason"]).startswith(f"{s['kind']} {s['name']}:") else f"{s['name']}: {s['reason']}"
        for s in doc["scopes"]
        if s["name"] in scopes
    ]
    # An item of a failed scope fails for the scope's reason, said once above.
    found += [
        f"{i['name']}: {i['reason']}"
        for i in doc["items"]
        if i["status"] in ("failed", "refused") and i.get("scope") not in scopes
    ]
    return [_cut(f"{phase.name}: {f}") for f in found]


def _cut(text: str, width: int = 150) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def overall_summary(phases: list[Phase], seconds: float) -> list[str]:
    """Per job, in the order first run: its runs' exit codes (each against what the demo expects), what they changed
    and what failed. A failed item the demo expects (the wrong cluster, a quota the cloud would not grant) is listed
    as failed all the same: the exit code says it, and the summary says why."""
    jobs: dict[str, list[Phase]] = {}
    for phase in phases:
        jobs.setdefault(_job_of(phase), []).append(phase)
    bad = [p for p in phases if not p.ok]
    lines = [f"== overall: {len(phases)} runs of {len(jobs)} jobs in {seconds:.1f} s"]
    for job, runs in jobs.items():
        docs = [_envelope_of(p) for p in runs]
        codes = ", ".join(
            str(p.code) if p.ok else f"{p.code} (expected {'/'.join(map(str, p.expected))})" for p in runs
        )
        lines.append(f"  {job}: {len(runs)} run{'s' * (len(runs) != 1)}, exit {codes}")
        changed = [c for p, d in zip(runs, docs, strict=True) if (c := _what_changed(p, d))]
        if any(d is not None for d in docs):
            lines.append(f"    changed: {'; '.join(changed) if changed else 'nothing'}")
        failed = [f for p, d in zip(runs, docs, strict=True) for f in _what_failed(p, d)]
        shown = failed[:6] + ([f"and {len(failed) - 6} more"] if len(failed) > 6 else [])
        lines += [f"    failed: {f}" for f in shown]
    if bad:
        lines.append(f"  UNEXPECTED exit codes: {', '.join(f'{p.name}={p.code}' for p in bad)}")
    else:
        lines.append("  every exit code as expected (a failed item above is one the demo plays on purpose)")
    return lines


# --- main -------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default=None, help="policy file (default gitops/policy.yaml)")
    parser.add_argument(
        "--day", type=date.fromisoformat, help="the weekday to play (default: the next Mon-Thu with no override)"
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    print(
        "starting the sandbox world (a Kubernetes API per cluster, AWS, GCP, Azure emulators, real Prometheus)...",
        flush=True,
    )
    world = World.start(args.policy) if args.policy else World.start()
    phases: list[Phase] = []
    try:
        fleet = world.fleet
        print(
            f"  up in {time.perf_counter() - began:.1f} s: {len(world.kubes)} clusters, {len(fleet.groups)} node groups, "
            f"{sum(len(k.list('Node')) for k in world.kubes.values())} nodes, {len(world.seats)} GPU pods in "
            f"{len(fleet.namespaces)} namespaces, "
            f"{len(fleet.instances)} stand-alone instances (GPU and CPU)",
            flush=True,
        )
        phase = run_gpu_jobs(world, "validate", "validate", str(world.policy_path))
        phases.append(phase)
        print(f"\n== validate   (exit {phase.code}, {phase.seconds:.1f} s)\n  {phase.stdout.strip() or 'policy OK'}")

        tz = ZoneInfo(world.policy.defaults.timezone)
        # The first Mon-Thu after every override has expired: then each group follows its own schedule, and the
        # night shows every provider (an override keeping a group up is already visible in the calendar).
        start = max([datetime.now(tz).date(), *(o.until.astimezone(tz).date() for o in world.policy.overrides)])
        days = [args.day] if args.day else candidate_days(start)
        night = None
        for day in days:
            at = datetime(day.year, day.month, day.day, 7, 29, tzinfo=tz).isoformat()
            phase = run_gpu_jobs(world, "calendar", "calendar", "--at", at, "--output", "json", "--days", "2")
            if not phase.ok:
                break
            calendar = phase.report
            night = pick_night(calendar, tz)
            if night:
                break
        phases.append(phase)
        print(f"\n== calendar --at {at}   (exit {phase.code}, {phase.seconds:.1f} s)")
        if not phase.ok or night is None:
            print("  no usable night found in the calendar" if phase.ok else phase.stderr[-2000:])
            return 1
        print("\n".join(render_calendar(world, calendar)))
        evening, morning = night
        print(f"  -> the night played below: evening {evening:%a %H:%M}, morning {morning:%a %H:%M} ({tz.key})")

        for phase in run_wrong_cluster(world, evening):
            phases.append(phase)
            print()
            print("\n".join(render_wrong_cluster(phase)), flush=True)
        for phase in run_night(world, evening, morning):
            phases.append(phase)
            print()
            print("\n".join(render_night_phase(world.policy, phase)), flush=True)
            if not phase.ok:
                print("  stderr (last lines):\n" + "\n".join("    " + s for s in phase.stderr.splitlines()[-10:]))
        for phase in run_quotas(world, morning):
            phases.append(phase)
            print()
            print("\n".join(render_quota_phase(phase)), flush=True)
            if not phase.ok:
                print("  stderr (last lines):\n" + "\n".join("    " + s for s in phase.stderr.splitlines()[-10:]))
        first, decided, again = run_cloud_quotas(world)
        phases += [first, again]
        print()
        print("\n".join(render_cloud_quota_phase(first)))
        print("\n== the clouds decide (the sandbox stands in for each cloud's reviewers)")
        print("\n".join(decided) or "  nothing to decide")
        print()
        print("\n".join(render_cloud_quota_phase(again)), flush=True)
        cluster, cronjob = ONE_OFF
        phase, lines = run_one_off(world, cluster, cronjob)
        phases.append(phase)
        print(
            f"\n== {phase.name}: kubectl create job --from=cronjob/{cronjob}   (exit {phase.code}, {phase.seconds:.1f} s)"
        )
        print("\n".join(lines), flush=True)
        phases += show_sweep(world)
        print("\n== for the people who use the GPUs (docs/people.md): warned first, woken on demand")
        shown, lines = people_demo.run_people(world, morning, run_gpu_jobs)
        phases += shown
        print("\n".join(lines), flush=True)
        phase = run_night_report(world, evening, morning)
        phases.append(phase)
        print(f"\n== the night's report: gpu-jobs {' '.join(phase.argv)}   (exit {phase.code}, {phase.seconds:.1f} s)")
        print(phase.stdout.rstrip() or phase.stderr[-2000:], flush=True)
    finally:
        world.stop()
    bad = [p for p in phases if not p.ok]
    print()
    print("\n".join(overall_summary(phases, time.perf_counter() - began)))
    print(f"\ndemo finished in {time.perf_counter() - began:.1f} s", end="")
    print(f"; UNEXPECTED exit codes: {', '.join(f'{p.name}={p.code}' for p in bad)}" if bad else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
