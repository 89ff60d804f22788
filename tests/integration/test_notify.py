"""``notify.webhook`` end to end: ``gpu-jobs nodegroups`` as its CronJob runs it (a process, settings from the
environment) warns running GPU pods before their group goes down, then posts one message per owner to a real HTTP
receiver (tests/emulators/webhook), the URL read from the Secret in the job's namespace and each owner from its
namespace's label, through the emulated Kubernetes API."""

from __future__ import annotations

import base64
import json
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace
from tests.emulators.webhook.receiver import PATH, WebhookReceiver
from tests.integration.cli import CliRun, run_cli

pytestmark = pytest.mark.integration

# Tue 2026-12-01, Europe/Berlin: the window ends at 20:00 CET; 19:40 is within warnBefore (30m).
BEFORE_END = datetime.fromisoformat("2026-12-01T19:40:00+01:00")
NODE = "ip-10-0-1-1"
POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    clusters:
      - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}}
    defaults:
      timezone: Europe/Berlin
      workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]
      warnBefore: 30m
    nodeGroups:
      - name: train
        cloud: aws
        aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}
    notify:
      webhook: {secretRef: {name: gpu-jobs-notify, key: url}}
      owner: {namespaceLabel: owner}
""")
#: Each team's namespace, its owner label (None: none) and its running GPU pods.
TEAMS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "team-a": ("alice", ("train-0", "train-1")),
    "team-b": ("bob", ("nb-0",)),
    "team-c": ("alice", ("eval-0",)),  # alice's second namespace: in her one message
    "scratch": (None, ("tmp-0",)),  # nobody's: the "no owner" message
}


@pytest.fixture
def world(kube: KubeHandle, aws: AwsEmulator, webhook: WebhookReceiver, tmp_path: Path) -> dict[str, str]:
    """A per-cluster install's cluster (ml-prod, proven by its identity), its EKS group with running GPU pods, the
    webhook's Secret beside the job; the environment a CronJob would give ``gpu-jobs``."""
    aws.add_eks_nodegroup("eu-west-1", "ml-prod", "gpu-a100", 1, 3, 8, instance_types=("p4d.24xlarge",))
    kube.identify("ml-prod")
    kube.create(gpu_node(NODE, labels={"eks.amazonaws.com/nodegroup": "gpu-a100"}))
    for ns, (owner, pods) in TEAMS.items():
        kube.create(namespace(ns, {"owner": owner} if owner else {}))
        for pod in pods:
            kube.create(gpu_pod(pod, ns, node=NODE))
    kube.create(secret(webhook.url))
    kube.log.clear()
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return {
        **aws.env(),
        "KUBECONFIG": str(kube.kubeconfig),
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_POLICY": str(policy),
        "GPU_JOBS_RETRY_DEADLINE": "10",
        "GPU_JOBS_REQUEST_TIMEOUT": "1",
    }


def secret(url: str, key: str = "url") -> dict[str, Any]:
    data = {key: base64.b64encode(url.encode()).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "gpu-jobs-notify", "namespace": "gpu-jobs"},
        "data": data,
    }


def nodegroups(env: dict[str, str], *args: str, **more: str) -> CliRun:
    return run_cli(["nodegroups", "--at", BEFORE_END.isoformat(), "--output", "json", *args], {**env, **more})


def logged(run: CliRun, event: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    return [e for e in lines if e["event"] == event]


def by_owner(received: list[dict[str, Any]]) -> dict[str | None, list[str]]:
    return {m["owner"]: sorted(f"{i['namespace']}/{i['pod']}" for i in m["items"]) for m in received}


def warned_events(kube: KubeHandle) -> int:
    return sum(e["reason"] == "ShutdownWarning" for ns in TEAMS for e in kube.list("Event", ns))


def test_one_message_per_owner_and_a_second_run_sends_nothing(
    world: dict[str, str], kube: KubeHandle, webhook: WebhookReceiver
) -> None:
    first = nodegroups(world)

    assert first.code == 0, first.stderr
    received = webhook.received()
    assert by_owner(received) == {
        "alice": ["team-a/train-0", "team-a/train-1", "team-c/eval-0"],
        "bob": ["team-b/nb-0"],
        None: ["scratch/tmp-0"],
    }
    assert [m["owner"] for m in received] == ["alice", "bob", None]  # the nobody's message last
    alice = received[0]
    assert alice["cluster"] == "ml-prod"
    assert alice["text"].startswith("gpu-jobs on cluster ml-prod, for alice: 3 notices\n- shutdown warning: ")
    assert "Node group train goes down at Tue 2026-12-01 20:00 CET" in alice["text"]
    assert {i["kind"] for i in alice["items"]} == {"shutdown warning"}
    assert "no owner" in received[2]["text"]
    assert [e["owner"] for e in logged(first, "notify.sent")] == ["alice", "bob", None]
    # Read: the Secret once, each namespace once; the URL's secret path appears nowhere in what the run printed.
    reads = kube.log.operations()
    assert (reads.count("get secrets"), reads.count("get namespaces")) == (1, len(TEAMS))
    assert PATH not in first.stdout + first.stderr
    assert warned_events(kube) == 5

    webhook.clear()
    kube.log.clear()
    second = nodegroups(world)
    assert second.code == 0
    assert (webhook.attempts(), logged(second, "notify.sent")) == (0, [])
    assert "get secrets" not in kube.log.operations()  # nothing announced: nothing read for notifications


def test_messages_are_retried_after_429_and_500(world: dict[str, str], webhook: WebhookReceiver) -> None:
    webhook.faults.inject("post", "throttle", times=1)
    webhook.faults.inject("post", "server_error", times=1)

    done = nodegroups(world)

    assert done.code == 0, done.stderr
    assert sorted(map(str, by_owner(webhook.received()))) == ["None", "alice", "bob"]
    assert webhook.attempts() == 3 + 2
    assert [e["error"].split(": ", 1)[1] for e in logged(done, "notify.retry")] == [
        "HTTP 429: rate_limited",
        "HTTP 500: internal_error",
    ]


@pytest.mark.parametrize("fault", ["server_error", "timeout"])
def test_a_receiver_that_stays_down_fails_no_run(
    world: dict[str, str], kube: KubeHandle, webhook: WebhookReceiver, fault: str
) -> None:
    """Every attempt refused (500) or unanswered (held past the 1 s request timeout): the warnings are given (their
    Events stand), the run exits 0, and each message not delivered is a warning line of the report and a log
    event."""
    webhook.faults.inject("post", fault, times=1000)  # type: ignore[arg-type]

    done = nodegroups(world, GPU_JOBS_RETRY_DEADLINE="1.5")

    assert done.code == 0, done.stderr
    assert webhook.received() == []
    assert warned_events(kube) == 5
    envelope = json.loads(done.stdout)
    assert envelope["exitCode"] == 0
    (scope,) = envelope["scopes"]
    undelivered = [w for w in scope["warnings"] if w.startswith("notification to ")]
    assert [w.split(" not delivered: ")[0] for w in undelivered] == [
        "notification to alice (3 items)",
        "notification to bob (1 item)",
        "notification to no owner (1 item)",
    ]
    said = "HTTP 500: internal_error" if fault == "server_error" else "timed out"
    assert all(said in w for w in undelivered), undelivered
    # The first message retried to the end; the receiver is then taken to be down, the others not tried.
    assert [w.split(" not delivered: ")[1].startswith("not sent: the webhook is down") for w in undelivered] == [
        False,
        True,
        True,
    ]
    assert webhook.attempts() == logged(done, "notify.failed")[0]["attempts"]
    assert len(logged(done, "notify.failed")) == 3
    assert PATH not in done.stdout + done.stderr


def test_the_report_text_says_a_notification_was_not_delivered(world: dict[str, str], kube: KubeHandle) -> None:
    kube.cluster.delete("Secret", "gpu-jobs-notify", "gpu-jobs")

    done = run_cli(["nodegroups", "--at", BEFORE_END.isoformat()], world)

    assert done.code == 0, done.stderr
    assert "  warning: notification to alice (3 items) not delivered: no webhook: " in done.stdout, done.stdout
    assert warned_events(kube) == 5


def test_a_dry_run_sends_nothing_and_reads_nothing_for_it(
    world: dict[str, str], kube: KubeHandle, webhook: WebhookReceiver
) -> None:
    done = nodegroups(world, "--dry-run")

    assert done.code == 0, done.stderr
    assert webhook.attempts() == 0
    operations = kube.log.operations()
    assert ("get secrets" in operations, "get namespaces" in operations) == (False, False)


def test_the_shipped_rbac_is_enough_to_notify(
    world: dict[str, str], kube: KubeHandle, webhook: WebhookReceiver
) -> None:
    from tests.integration.test_deploy import rendered_allow_list

    kube.allow_only(*rendered_allow_list("production/aws"))

    done = nodegroups(world)

    assert done.code == 0, done.stderr
    assert len(webhook.received()) == 3


def test_the_shipped_roles_let_each_job_read_that_one_secret_only() -> None:
    """RBAC by name: the existing RBAC tests compare verbs per resource; here, every rendered rule on Secrets names
    exactly the Secrets that kube/secrets.py declares, for every job and every overlay."""
    from jobs.adapters.kube import secrets
    from tests.integration.test_deploy import JOBS, TARGETS, bound_roles, pod_spec, render

    (declared,) = secrets.RBAC
    for target in TARGETS:
        objects = render(target)
        for job in JOBS:
            account = pod_spec(objects, job)["serviceAccountName"]
            roles = [
                *bound_roles(objects, account, "RoleBinding"),
                *bound_roles(objects, account, "ClusterRoleBinding"),
            ]
            rules = [r for role in roles for r in role["rules"] if "secrets" in r["resources"] or "*" in r["resources"]]
            assert all(r.get("resourceNames") == list(declared.resource_names) for r in rules), (target, job, rules)
            assert bool(rules) == (job not in {"quotas", "cloud-quotas"}), (target, job)


def test_the_secret_as_the_docs_create_it_delivers(
    world: dict[str, str], kube: KubeHandle, webhook: WebhookReceiver
) -> None:
    """docs/people.md's `kubectl create secret`, run as typed against the cluster, then a run: its messages arrive."""
    import subprocess

    from tests.docs import shell_block
    from tests.integration.emulators.test_kube_batch import KUBECTL

    kube.cluster.delete("Secret", "gpu-jobs-notify", "gpu-jobs")
    created = subprocess.run(
        ["bash", "-euc", shell_block("docs/people.md", "## Notifications")],
        env={"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "KUBECONFIG": str(kube.kubeconfig), "WEBHOOK_URL": webhook.url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert created.returncode == 0, created.stderr

    done = nodegroups(world)

    assert done.code == 0, done.stderr
    assert sorted(map(str, by_owner(webhook.received()))) == ["None", "alice", "bob"]


def test_the_adapter_against_the_receiver_keeps_the_url_out_of_its_errors(webhook: WebhookReceiver) -> None:
    """Each answer as the port's errors: 404 (a removed webhook) is not retried, 429 carries its Retry-After, a
    payload without text is refused; no error names the URL's path. ``GET /received`` lists what was accepted."""
    import urllib.request

    from jobs.adapters.settings import AdapterSettings
    from jobs.adapters.webhook import WebhookPost
    from jobs.errors import Invalid, NotFound, Throttled

    settings = AdapterSettings(request_timeout_s=2)
    with pytest.raises(NotFound) as gone:
        WebhookPost(webhook.url + "-removed", settings).post({"text": "hi"})
    assert str(gone.value) == "webhook at 127.0.0.1: HTTP 404: no_service"
    webhook.faults.inject("post", "throttle")
    with pytest.raises(Throttled) as throttled:
        WebhookPost(webhook.url, settings).post({"text": "hi"})
    assert (throttled.value.retry_after_s, throttled.value.retryable) == (1.0, True)
    with pytest.raises(Invalid) as refused:
        WebhookPost(webhook.url, settings).post({"blocks": []})
    assert str(refused.value) == "webhook at 127.0.0.1: HTTP 400: no_text"
    assert PATH not in f"{gone.value}{throttled.value}{refused.value}"

    WebhookPost(webhook.url, settings).post({"text": "hello", "owner": "alice"})
    assert webhook.server is not None
    with urllib.request.urlopen(f"{webhook.server.url}/received", timeout=5) as answer:
        assert json.loads(answer.read()) == [{"text": "hello", "owner": "alice"}]


def test_a_stop_request_while_notifying_ends_the_notifications_not_the_report(
    world: dict[str, str], kube: KubeHandle, webhook: WebhookReceiver
) -> None:
    """SIGTERM while the first message waits on the receiver: that answer (a 500) is not retried, no other message
    is sent, and the run still prints its report and summary; the warnings it gave stand."""
    import signal

    from tests.integration.cli import start_cli, summary_of

    webhook.faults.inject("post", "server_error", times=1)
    gate = webhook.hold("post")
    run = start_cli(["nodegroups", "--at", BEFORE_END.isoformat(), "--output", "json"], world)
    assert gate.arrived.wait(60)
    run.send(signal.SIGTERM)
    gate.open()
    code, stdout, stderr = run.finish()

    summary = summary_of(stderr)
    assert (summary["stopped"], code) == ("SIGTERM", summary["exit_code"]), stderr
    assert (webhook.attempts(), webhook.received()) == (1, [])
    (scope,) = json.loads(stdout)["scopes"]
    undelivered = [w for w in scope["warnings"] if w.startswith("notification to ")]
    assert [w.split(" not delivered: ")[1] for w in undelivered] == ["not sent: the run was asked to stop"] * 3
    assert warned_events(kube) == 5
