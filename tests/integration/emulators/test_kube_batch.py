"""Kube emulator: what an install and a one-off run need, through the real kubectl and the official client.
batch/v1 CronJobs and Jobs (defaulted, validated, a Job from ``kubectl create job --from`` decoded from protobuf),
RBAC enforced for ServiceAccount tokens from the stored roles (over HTTP as the official client sends them: kubectl
sends no bearer token over plain http), collection watches (``kubectl wait``), pods/log,
and Events that ``kubectl describe`` finds by the object's uid."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from jobs.adapters.kube.events import KubeEvents
from jobs.events import ObjectRef
from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration

KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"
Json = dict[str, Any]

CRONJOB: Json = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "quotas", "namespace": "default", "labels": {"app": "gpu-jobs"}},
    "spec": {
        "schedule": "*/10 * * * *",
        "timeZone": "Etc/UTC",
        "jobTemplate": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "serviceAccountName": "gpu-jobs-quotas",
                        "containers": [
                            {
                                "name": "quotas",
                                "image": "ghcr.io/example/gpu-jobs:0.1.0",
                                "args": ["quotas"],
                                "env": [
                                    {
                                        "name": "GPU_JOBS_NAMESPACE",
                                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                    }
                                ],
                                "volumeMounts": [{"name": "policy", "mountPath": "/etc/gpu-jobs", "readOnly": True}],
                            }
                        ],
                        "volumes": [{"name": "policy", "configMap": {"name": "gpu-jobs-policy"}}],
                    }
                },
            }
        },
    },
}


def kubectl(kube: KubeHandle, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_kubectl_applies_a_cronjob_and_creates_a_job_from_it(kube: KubeHandle) -> None:
    applied = kubectl(kube, "apply", "-f", "-", stdin=json.dumps(CRONJOB))
    assert (applied.returncode, applied.stdout.strip()) == (0, "cronjob.batch/quotas created"), applied.stderr
    again = kubectl(kube, "apply", "-f", "-", stdin=json.dumps(CRONJOB))
    assert again.stdout.strip() == "cronjob.batch/quotas unchanged", again.stderr
    cronjob = kube.get("CronJob", "quotas", "default")
    assert cronjob is not None
    assert cronjob["spec"]["concurrencyPolicy"] == "Allow"  # defaulted as the real server does

    created = kubectl(kube, "create", "job", "--from=cronjob/quotas", "quotas-manual-1")  # sent in protobuf
    assert (created.returncode, created.stdout.strip()) == (0, "job.batch/quotas-manual-1 created"), created.stderr

    job = kube.get("Job", "quotas-manual-1", "default")
    assert job is not None
    uid = job["metadata"]["uid"]
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "quotas",
            "uid": cronjob["metadata"]["uid"],
            "controller": True,
        }
    ]
    assert job["metadata"]["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
    assert job["spec"]["backoffLimit"] == 0  # a zero a pointer field carries, not an omitted one
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = job["spec"]["template"]
    assert template["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "quotas-manual-1"
    container = template["spec"]["containers"][0]
    assert container["env"] == CRONJOB["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert template["spec"]["volumes"] == [{"name": "policy", "configMap": {"name": "gpu-jobs-policy"}}]

    clash = kubectl(kube, "create", "job", "--from=cronjob/quotas", "quotas-manual-1")
    assert clash.returncode == 1
    assert 'jobs.batch "quotas-manual-1" already exists' in clash.stderr
    listed = kubectl(kube, "get", "jobs").stdout.split()
    assert listed[:5] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert listed[5:8] == ["quotas-manual-1", "Running", "0/1"]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("spec", "schedule"), "every ten minutes", 'spec.schedule: Invalid value: "every ten minutes"'),
        (("spec", "timeZone"), "Mars/Olympus", "unknown time zone Mars/Olympus"),
        (
            ("spec", "jobTemplate", "spec", "template", "spec", "restartPolicy"),
            "Always",
            'spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always"',
        ),
    ],
)
def test_a_cronjob_the_real_server_refuses_is_refused(
    kube: KubeHandle, path: tuple[str, ...], value: str, message: str
) -> None:
    bad = json.loads(json.dumps(CRONJOB))
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    done = kubectl(kube, "apply", "-f", "-", stdin=json.dumps(bad))
    assert done.returncode == 1
    assert 'The CronJob "quotas" is invalid' in done.stderr
    assert message in done.stderr
    assert kube.get("CronJob", "quotas", "default") is None


def _rbac(kube: KubeHandle) -> None:
    kube.create(seed.namespace("gpu-jobs"))
    kube.create(seed.namespace("team-a"))
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": "gpu-jobs"}})
    group = "rbac.authorization.k8s.io"
    subject = [{"kind": "ServiceAccount", "name": "runner", "namespace": "gpu-jobs"}]
    kube.create(
        {
            "apiVersion": f"{group}/v1",
            "kind": "Role",
            "metadata": {"name": "runner", "namespace": "gpu-jobs"},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "create"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["mine"]},
            ],
        }
    )
    kube.create(
        {
            "apiVersion": f"{group}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "runner", "namespace": "gpu-jobs"},
            "roleRef": {"apiGroup": group, "kind": "Role", "name": "runner"},
            "subjects": subject,
        }
    )
    kube.create(
        {
            "apiVersion": f"{group}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "runner"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces", "pods/log"], "verbs": ["list", "get"]}],
        }
    )
    kube.create(
        {
            "apiVersion": f"{group}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "runner"},
            "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": "runner"},
            "subjects": subject,
        }
    )


def _call(kube: KubeHandle, token: str, method: str, path: str, body: Json | None = None) -> tuple[int, Json]:
    """One request with a bearer token, as the official client sends it (kubectl sends none over plain http)."""
    request = urllib.request.Request(
        f"{kube.url}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_service_account_token_has_exactly_what_its_bindings_grant(kube: KubeHandle) -> None:
    _rbac(kube)
    token = kube.emulator.issue_token("gpu-jobs", "runner")
    mine = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}}
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "theirs", "namespace": "gpu-jobs"}})

    assert _call(kube, token, "GET", "/api/v1/namespaces/gpu-jobs/configmaps")[0] == 200  # the Role, its namespace
    assert _call(kube, token, "POST", "/api/v1/namespaces/gpu-jobs/configmaps", mine)[0] == 201
    assert _call(kube, token, "GET", "/api/v1/namespaces/gpu-jobs/configmaps/mine")[0] == 200  # resourceNames
    code, status = _call(kube, token, "GET", "/api/v1/namespaces/gpu-jobs/configmaps/theirs")
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        'configmaps "theirs" is forbidden: User "system:serviceaccount:gpu-jobs:runner" cannot get resource '
        '"configmaps" in API group "" in the namespace "gpu-jobs"'
    )
    code, status = _call(kube, token, "GET", "/api/v1/namespaces/team-a/configmaps")
    assert code == 403
    assert status["message"].endswith('cannot list resource "configmaps" in API group "" in the namespace "team-a"')
    assert _call(kube, token, "GET", "/api/v1/namespaces")[0] == 200  # the ClusterRole, cluster-wide
    assert _call(kube, token, "DELETE", "/api/v1/namespaces/gpu-jobs/configmaps/mine")[0] == 403
    assert _call(kube, kube.emulator.token, "GET", "/api/v1/namespaces/team-a/configmaps")[0] == 200  # the admin

    kube.cluster.delete("ServiceAccount", "runner", "gpu-jobs")  # a token outlives no ServiceAccount
    code, status = _call(kube, token, "GET", "/api/v1/namespaces")
    assert (code, status["reason"]) == (401, "Unauthorized")


def test_kubectl_wait_sees_a_job_complete_through_a_watch(kube: KubeHandle) -> None:
    assert kubectl(kube, "apply", "-f", "-", stdin=json.dumps(CRONJOB)).returncode == 0
    assert kubectl(kube, "create", "job", "--from=cronjob/quotas", "run-1").returncode == 0

    def complete() -> None:
        time.sleep(1.0)
        with kube.cluster.lock:
            job = kube.get("Job", "run-1", "default")
            assert job is not None
            job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
            kube.put(job)

    worker = threading.Thread(target=complete)
    worker.start()
    began = time.monotonic()
    waited = kubectl(kube, "wait", "--for=condition=complete", "job/run-1", "--timeout=30s")
    worker.join()
    assert (waited.returncode, waited.stdout.strip()) == (0, "job.batch/run-1 condition met"), waited.stderr
    assert waited.stderr == ""  # a watch, not list retries after refused watches
    assert 0.9 < time.monotonic() - began < 10


def test_a_watch_streams_added_modified_and_deleted(kube: KubeHandle) -> None:
    url = f"{kube.url}/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=2"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {kube.emulator.token}"})

    def changes() -> None:
        time.sleep(0.3)
        kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}})
        time.sleep(0.3)
        config_map = kube.get("ConfigMap", "a", "default")
        assert config_map is not None
        config_map["data"] = {"k": "v"}
        kube.put(config_map)
        time.sleep(0.3)
        kube.cluster.delete("ConfigMap", "a", "default")

    worker = threading.Thread(target=changes)
    worker.start()
    with urllib.request.urlopen(request, timeout=10) as response:
        events = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    worker.join()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    assert events[1]["object"]["data"] == {"k": "v"}
    assert events[0]["object"]["kind"] == "ConfigMap"


def test_a_pods_log_is_served_to_kubectl_logs(kube: KubeHandle) -> None:
    kube.create(_plain_pod("runner"))
    kube.cluster.set_pod_log("default", "runner", "line one\nline two\n")
    logs = kubectl(kube, "logs", "runner")
    assert (logs.returncode, logs.stdout) == (0, "line one\nline two\n"), logs.stderr
    missing = kubectl(kube, "logs", "nobody")
    assert 'pods "nobody" not found' in missing.stderr


def _plain_pod(name: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Succeeded"},
    }


class Quiet:
    def warning(self, event: str, **kw: Any) -> None:
        raise AssertionError(f"{event}: {kw}")  # these Events are all sent


def test_describe_shows_the_events_a_job_put_on_a_config_map(kube: KubeHandle) -> None:
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "record-a", "namespace": "default", "labels": {"gpu-jobs.dev/node-group": "a"}},
        }
    )
    record = kube.get("ConfigMap", "record-a", "default")  # as the job's store read it
    assert record is not None
    ref = ObjectRef("ConfigMap", "record-a", "default", record["metadata"]["uid"])
    with kube.api_client() as api:
        KubeEvents(api, "nodegroups", Quiet()).emit(ref, "NodeGroupScaled", "scaled to 0 (off hours)")
    event = kube.list("Event", "default")[0]
    assert event["involvedObject"]["uid"] == record["metadata"]["uid"]

    described = kubectl(kube, "describe", "configmap", "-l", "gpu-jobs.dev/node-group=a")
    assert described.returncode == 0, described.stderr
    events = described.stdout.split("Events:", 1)[1].split()
    assert events[:5] == ["Type", "Reason", "Age", "From", "Message"]
    assert "NodeGroupScaled" in events
    assert "(off hours)" in " ".join(events)


def test_an_event_on_an_object_that_is_gone_has_no_uid_and_is_still_sent(kube: KubeHandle) -> None:
    with kube.api_client() as api:
        KubeEvents(api, "quotas", Quiet()).emit(
            ObjectRef("ResourceQuota", "gpu-quota", "default"), "QuotaRemoved", "removed"
        )
    (event,) = kube.list("Event", "default")
    assert event["reason"] == "QuotaRemoved"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "name": "gpu-quota",
        "namespace": "default",
    }


@pytest.mark.parametrize("overlay", ["production/aws", "production/gcp", "production/azure"])
def test_kubectl_apply_k_of_an_overlay_installs_and_a_job_starts_from_its_cronjob(
    kube: KubeHandle, overlay: str
) -> None:
    """What failed before (``failed to download openapi``; no resource type "cronjob"): the docs' install
    command and a one-off run, with kubectl's client-side defaults (validation on)."""
    path = str(KUBECTL.parents[2] / "kustomize" / "overlays" / overlay)
    first = kubectl(kube, "apply", "-k", path)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert "cronjob.batch/nodegroups created" in lines
    assert "clusterrolebinding.rbac.authorization.k8s.io/gpu-jobs-quotas created" in lines
    assert first.stderr == ""  # no warning: the server validates fields itself, and says so in its OpenAPI
    second = kubectl(kube, "apply", "-k", path)
    assert [line.rsplit(" ", 1)[1] for line in second.stdout.splitlines()] == ["unchanged"] * len(lines)
    created = kubectl(kube, "-n", "gpu-jobs", "create", "job", "--from=cronjob/nodegroups", "nodegroups-manual-1")
    assert created.returncode == 0, created.stderr
    job = kube.get("Job", "nodegroups-manual-1", "gpu-jobs")
    assert job is not None
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "gpu-jobs-nodegroups"
