"""Kube emulator: Karpenter's NodePool and NodeClaim (karpenter.sh/v1, CRDs of kubernetes-sigs/karpenter v1.14.1)
and the Karpenter model, through the official client and kubectl, on emulated time.

What the product's Karpenter adapter will meet: limits stored as sent and validated as quantities, the CRD's CEL
rules as 422s, the termination finalizer holding a deleted claim until its node is drained through evictions, and
limits that block launches but remove nothing.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import karpenter as model
from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration

GROUP, VERSION = "karpenter.sh", "v1"
KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"


def _custom(kube_client: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_client)


def _pool(kube_client: Any, name: str) -> Any:
    return _custom(kube_client).get_cluster_custom_object(GROUP, VERSION, "nodepools", name)


def _patch_pool(kube_client: Any, name: str, patch: Any) -> Any:
    return _custom(kube_client).patch_cluster_custom_object(GROUP, VERSION, "nodepools", name, patch)


def _status(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    return body


def _invalid(call: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    body = _status(caught.value)
    assert body["reason"] == "Invalid"
    return body


def _kubectl(kube: KubeHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


# The API: CRD validation as the real server does it -----------------------------------------------------------------


def test_a_nodepool_is_stored_as_sent_with_the_crd_defaults(kube: KubeHandle, kube_client: Any) -> None:
    pool = model.nodepool("gpu", limits={"cpu": "1000m", "nvidia.com/gpu": 64})
    del pool["spec"]["disruption"]
    created = _custom(kube_client).create_cluster_custom_object(GROUP, VERSION, "nodepools", pool)

    # Quantities in a custom resource are not canonicalised: "1000m" stays, an integer stays an integer.
    assert created["spec"]["limits"] == {"cpu": "1000m", "nvidia.com/gpu": 64}
    assert created["spec"]["disruption"] == {
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "budgets": [{"nodes": "10%"}],
    }
    assert created["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert "status" not in created or "nodes" not in created.get("status", {})  # no model: no counter
    assert _pool(kube_client, "gpu")["metadata"]["uid"] == created["metadata"]["uid"]


@pytest.mark.parametrize(
    ("change", "field", "reason", "says"),
    [
        ({"limits": {"cpu": "lots"}}, "spec.limits.cpu", "FieldValueInvalid", "in body should match"),
        (
            {"disruption": {"consolidationPolicy": "WhenEmpty"}},
            "spec.disruption.consolidateAfter",
            "FieldValueRequired",
            "Required value",
        ),
        (
            {"disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "0", "schedule": "0 20 * * *"}]}},
            "spec.disruption.budgets",
            "FieldValueInvalid",
            "'schedule' must be set with 'duration'",
        ),
        (
            {"disruption": {"consolidateAfter": "1hr"}},
            "spec.disruption.consolidateAfter",
            "FieldValueInvalid",
            "in body should match",
        ),
        ({"weight": 101}, "spec.weight", "FieldValueInvalid", "less than or equal to 100"),
        ({"replicas": 2, "limits": {"cpu": "0"}}, "spec", "FieldValueInvalid", "only 'limits.nodes'"),
    ],
)
def test_a_nodepool_the_crd_refuses_is_422_with_its_cause(
    kube: KubeHandle, kube_client: Any, change: dict[str, Any], field: str, reason: str, says: str
) -> None:
    pool = model.nodepool("gpu")
    pool["spec"].update(change)
    body = _invalid(lambda: _custom(kube_client).create_cluster_custom_object(GROUP, VERSION, "nodepools", pool))
    assert body["message"].startswith('NodePool.karpenter.sh "gpu" is invalid: ')
    causes = [(c["field"], c["reason"]) for c in body["details"]["causes"]]
    assert (field, reason) in causes
    assert says in body["message"]
    assert kube.get("nodepools", "gpu", api_version="karpenter.sh/v1") is None


def test_a_budget_with_schedule_and_duration_and_a_node_limit_are_accepted(kube: KubeHandle, kube_client: Any) -> None:
    pool = model.nodepool("gpu", limits={"cpu": "0", "nodes": "0"})
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "0", "schedule": "0 20 * * *", "duration": "12h"}]
    created = _custom(kube_client).create_cluster_custom_object(GROUP, VERSION, "nodepools", pool)
    assert created["spec"]["limits"] == {"cpu": "0", "nodes": "0"}


def test_node_class_group_and_kind_are_immutable_and_its_name_is_not(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(model.nodepool("gpu"))
    ref = "spec.template.spec.nodeClassRef"
    for part, value, message in (
        ("group", "karpenter.azure.com", "nodeClassRef.group is immutable"),
        ("kind", "AKSNodeClass", "nodeClassRef.kind is immutable"),
    ):
        patch = {"spec": {"template": {"spec": {"nodeClassRef": {part: value}}}}}
        body = _invalid(lambda p=patch: _patch_pool(kube_client, "gpu", p))  # type: ignore[misc]
        assert body["details"]["causes"] == [
            {"reason": "FieldValueInvalid", "field": ref, "message": f'Invalid value: "object": {message}'}
        ]
    renamed = _patch_pool(kube_client, "gpu", {"spec": {"template": {"spec": {"nodeClassRef": {"name": "gpu"}}}}})
    assert renamed["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "gpu"


def test_a_pool_cannot_switch_between_static_and_dynamic(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(model.nodepool("dynamic", limits={"cpu": "100"}))
    static = model.nodepool("static", limits={"nodes": "4"})
    static["spec"]["replicas"] = 2
    kube.create(static)
    message = "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
    to_static = _invalid(lambda: _patch_pool(kube_client, "dynamic", {"spec": {"replicas": 1, "limits": None}}))
    to_dynamic = _invalid(lambda: _patch_pool(kube_client, "static", {"spec": {"replicas": None}}))
    for body in (to_static, to_dynamic):
        assert body["details"]["causes"][0]["field"] == "spec"
        assert message in body["message"]
    # The static pool's own knob still moves, and limits.nodes with it.
    moved = _patch_pool(kube_client, "static", {"spec": {"replicas": 0, "limits": {"nodes": "0"}}})
    assert (moved["spec"]["replicas"], moved["spec"]["limits"]) == (0, {"nodes": "0"})


def test_limits_patch_merge_apply_and_the_status_codes(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(model.nodepool("gpu", limits={"cpu": "1000", "nvidia.com/gpu": "64"}))
    # A merge patch replaces map members one by one; null removes one.
    patched = _patch_pool(kube_client, "gpu", {"spec": {"limits": {"cpu": "0", "nvidia.com/gpu": None}}})
    assert patched["spec"]["limits"] == {"cpu": "0"}
    # Server-side apply of the limits by another manager.
    applied = kube_client.rest_client.request(
        "PATCH",
        f"{kube.url}/apis/karpenter.sh/v1/nodepools/gpu?fieldManager=gpu-jobs&force=true",
        headers={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        body=json.dumps(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "gpu"},
                "spec": {"limits": {"cpu": "1000"}},
            }
        ),
    )
    assert json.loads(applied.read())["spec"]["limits"]["cpu"] == "1000"
    # A custom resource has no strategic merge patch: 415, as the real server answers.
    strategic = kube_client.rest_client.request(
        "PATCH",
        f"{kube.url}/apis/karpenter.sh/v1/nodepools/gpu",
        headers={"Content-Type": "application/strategic-merge-patch+json", "Accept": "application/json"},
        body=json.dumps({"spec": {"limits": {"cpu": "0"}}}),
    )
    assert (strategic.status, json.loads(strategic.read())["reason"]) == (415, "UnsupportedMediaType")
    # 404 for a pool that is not there; 409 for a stale resourceVersion.
    with pytest.raises(ApiException) as missing:
        _pool(kube_client, "nope")
    assert (missing.value.status, _status(missing.value)["reason"]) == (404, "NotFound")
    with pytest.raises(ApiException) as stale:
        _patch_pool(kube_client, "gpu", {"metadata": {"resourceVersion": "1"}, "spec": {"limits": {"cpu": "1"}}})
    assert (stale.value.status, _status(stale.value)["reason"]) == (409, "Conflict")


def test_a_nodeclaim_spec_is_immutable(kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter) -> None:
    kube.create(model.nodepool("gpu", taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    (claim,) = karpenter.claims("gpu")
    patch = {"spec": {"terminationGracePeriod": "1h"}}
    body = _invalid(
        lambda: _custom(kube_client).patch_cluster_custom_object(
            GROUP, VERSION, "nodeclaims", claim["metadata"]["name"], patch
        )
    )
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "field": "spec",
        "message": 'Invalid value: "object": spec is immutable',
    }


# The model: provisioning within limits, on emulated time ------------------------------------------------------------


def test_a_pending_gpu_pod_gets_a_claim_then_a_node_after_the_boot_delay(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    kube.create(model.nodepool("gpu", limits={"cpu": "1000"}, taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    claims = _custom(kube_client).list_cluster_custom_object(
        GROUP, VERSION, "nodeclaims", label_selector="karpenter.sh/nodepool=gpu"
    )["items"]
    (claim,) = claims
    assert claim["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    ready = {c["type"]: c["status"] for c in claim["status"]["conditions"]}
    assert (ready["Launched"], ready["Ready"]) == ("True", "Unknown")
    assert "nodeName" not in claim["status"]
    assert client.CoreV1Api(kube_client).list_node().items == []

    karpenter.advance(59)
    assert client.CoreV1Api(kube_client).list_node().items == []
    karpenter.advance(1)
    (node,) = client.CoreV1Api(kube_client).list_node(label_selector="karpenter.sh/nodepool=gpu").items
    assert node.spec.taints[0].key == "nvidia.com/gpu"
    assert client.CoreV1Api(kube_client).read_namespaced_pod("train", "default").spec.node_name == node.metadata.name
    status = _pool(kube_client, "gpu")["status"]
    assert status["nodes"] == 1
    assert status["resources"]["cpu"] == "192"
    assert status["resources"]["nvidia.com/gpu"] == "8"


def test_a_cpu_limit_of_zero_blocks_every_launch(kube: KubeHandle, karpenter: model.Karpenter) -> None:
    kube.create(model.nodepool("gpu", limits={"cpu": "0"}, taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=1))
    kube.create(model.pending_gpu_pod("cpu-only", gpus=0))
    karpenter.advance(600)
    assert karpenter.claims("gpu") == []
    assert kube.get("pods", "train")["spec"].get("nodeName") is None


def test_a_gpu_limit_of_zero_alone_still_launches_instance_types_without_gpus(
    kube: KubeHandle, karpenter: model.Karpenter
) -> None:
    kube.create(model.nodepool("gpu", limits={"nvidia.com/gpu": "0"}, taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=1))
    cpu = model.pending_gpu_pod("cpu-only", gpus=0)
    cpu["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    kube.create(cpu)
    (claim,) = karpenter.claims("gpu")  # scheduler.go filterByRemainingResources: 0 GPUs <= 0 remaining
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m7i.xlarge"
    karpenter.advance(60)
    assert kube.get("pods", "cpu-only")["spec"]["nodeName"]
    assert kube.get("pods", "train")["spec"].get("nodeName") is None


def test_a_node_limit_of_zero_blocks_and_a_lowered_limit_removes_nothing(
    kube: KubeHandle, karpenter: model.Karpenter
) -> None:
    kube.create(model.nodepool("gpu", limits={"cpu": "1000"}, taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    karpenter.advance(60)
    pool = kube.get("nodepools", "gpu", api_version=model.API_VERSION)
    assert pool is not None
    pool["spec"]["limits"] = {"cpu": "0", "nodes": "0"}
    kube.put(pool)
    kube.create(model.pending_gpu_pod("later", gpus=8))
    karpenter.advance(600)
    (claim,) = karpenter.claims("gpu")  # the running one stays (#5909); nothing new launches
    assert claim["status"]["nodeName"]
    assert kube.get("pods", "later")["spec"].get("nodeName") is None


# The model: termination through the finalizer -----------------------------------------------------------------------


def _running_claim(kube: KubeHandle, karpenter: model.Karpenter, **pool: Any) -> tuple[str, str]:
    kube.create(model.nodepool("gpu", taints=[model.GPU_TAINT], **pool))
    kube.create(model.pending_gpu_pod("train", gpus=8, grace_s=30))
    karpenter.advance(60)
    (claim,) = karpenter.claims("gpu")
    return claim["metadata"]["name"], claim["status"]["nodeName"]


def _delete_claim(kube_client: Any, name: str) -> Any:
    return _custom(kube_client).delete_cluster_custom_object(GROUP, VERSION, "nodeclaims", name)


def test_a_deleted_claim_drains_its_node_through_evictions_then_goes_with_it(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    kube.cluster.pod_stop_s = 5
    name, node = _running_claim(kube, karpenter)
    answer = _delete_claim(kube_client, name)
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    held = _custom(kube_client).get_cluster_custom_object(GROUP, VERSION, "nodeclaims", name)
    assert held["metadata"]["deletionTimestamp"]  # still there: the finalizer holds it
    tainted = client.CoreV1Api(kube_client).read_node(node)
    assert any(t.key == "karpenter.sh/disrupted" for t in tainted.spec.taints)
    assert kube.get("pods", "train")["metadata"]["deletionTimestamp"]  # evicted (graceful)
    assert _pool(kube_client, "gpu")["status"]["nodes"] == 0  # a claim being deleted no longer counts

    karpenter.advance(5)  # the pod's containers stop
    assert kube.get("pods", "train") is None
    karpenter.advance(29)
    stopping = kube.get("nodeclaims", name, api_version=model.API_VERSION)
    assert stopping is not None  # instance shutting down
    assert {c["type"]: c["status"] for c in stopping["status"]["conditions"]}["InstanceTerminating"] == "True"
    karpenter.advance(1)
    assert kube.get("nodeclaims", name, api_version=model.API_VERSION) is None
    assert kube.get("nodes", node) is None


def test_a_budget_that_allows_no_disruption_stalls_the_drain(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    name, _ = _running_claim(kube, karpenter)
    kube.create(seed.disruption_budget("train", "default", {}, min_available=1))
    _delete_claim(kube_client, name)
    karpenter.advance(3600)
    assert kube.get("pods", "train")["metadata"].get("deletionTimestamp") is None  # 429 every time
    assert kube.get("nodeclaims", name, api_version=model.API_VERSION) is not None
    kube.cluster.delete("poddisruptionbudgets", "train", "default")
    karpenter.advance(30)  # evicted now; 30 s of grace
    karpenter.advance(30)  # the instance stops
    assert kube.get("nodeclaims", name, api_version=model.API_VERSION) is None


def test_do_not_disrupt_stalls_the_drain_until_the_termination_grace_period_forces_it(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    name, _ = _running_claim(kube, karpenter, termination_grace="10m")
    pod = kube.get("pods", "train")
    assert pod is not None
    pod["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    kube.put(pod)
    _delete_claim(kube_client, name)
    annotated = kube.get("nodeclaims", name, api_version=model.API_VERSION)
    assert annotated is not None
    deleted_at = annotated["metadata"]["deletionTimestamp"]
    assert (
        annotated["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"] == "2026-03-02T19:11:00Z"
    )
    assert deleted_at == "2026-03-02T19:01:00Z"
    karpenter.advance(569)  # deadline 600 s, pod grace 30 s: not yet due
    assert kube.get("pods", "train")["metadata"].get("deletionTimestamp") is None
    karpenter.advance(1)  # T = deadline - terminationGracePeriodSeconds: deleted with the 30 s left
    deleted = kube.get("pods", "train")
    assert deleted is not None
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    karpenter.advance(30)
    assert kube.get("pods", "train") is None
    karpenter.advance(30)
    assert kube.get("nodeclaims", name, api_version=model.API_VERSION) is None


def test_a_claim_whose_node_never_registers_stays_not_ready_and_goes_when_deleted(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    kube.create(model.nodepool("gpu", taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    (claim,) = karpenter.claims("gpu")
    name = claim["metadata"]["name"]
    karpenter.never_register.add(name)
    karpenter.advance(600)
    (stuck,) = karpenter.claims("gpu")
    assert {c["type"]: c["status"] for c in stuck["status"]["conditions"]}["Ready"] == "Unknown"
    assert kube.list("nodes") == []
    _delete_claim(kube_client, name)
    karpenter.advance(30)
    assert karpenter.claims("gpu") == [] or all(c["metadata"]["name"] != name for c in karpenter.claims("gpu"))


def test_liveness_deletes_a_claim_not_registered_after_15_minutes(kube: KubeHandle, karpenter: model.Karpenter) -> None:
    kube.create(model.nodepool("gpu", taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    (claim,) = karpenter.claims("gpu")
    karpenter.never_register.add(claim["metadata"]["name"])
    name = claim["metadata"]["name"]
    karpenter.advance(899)
    assert kube.get("nodeclaims", name, api_version=model.API_VERSION)["metadata"].get("deletionTimestamp") is None
    karpenter.advance(1)
    assert kube.get("nodeclaims", name, api_version=model.API_VERSION)["metadata"]["deletionTimestamp"]
    # The pod it was launched for is still pending: Karpenter launches another claim for it.
    assert [c["metadata"]["name"] != name for c in karpenter.claims("gpu")].count(True) == 1


def test_a_deleted_node_takes_its_claim_and_new_finalizers_are_refused(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    kube.cluster.pod_stop_s = 1
    name, node = _running_claim(kube, karpenter)
    client.CoreV1Api(kube_client).delete_node(node)
    claim = _custom(kube_client).get_cluster_custom_object(GROUP, VERSION, "nodeclaims", name)
    assert claim["metadata"]["deletionTimestamp"]
    patch = {"metadata": {"finalizers": ["karpenter.sh/termination", "example.com/keep"]}}
    body = _invalid(lambda: _custom(kube_client).patch_cluster_custom_object(GROUP, VERSION, "nodeclaims", name, patch))
    assert body["details"]["causes"][0]["field"] == "metadata.finalizers"
    karpenter.advance(31)
    assert kube.get("nodes", node) is None
    assert kube.get("nodeclaims", name, api_version=model.API_VERSION) is None


def test_kubectl_reads_patches_and_deletes_karpenter_objects(kube: KubeHandle, karpenter: model.Karpenter) -> None:
    kube.create(model.nodepool("gpu", limits={"cpu": "1000"}, taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    karpenter.advance(60)
    listed = _kubectl(kube, "get", "nodepools", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"][0]["status"]["nodes"] == 1
    table = _kubectl(kube, "get", "nodeclaims")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    assert row.split()[1:3] == ["p5.48xlarge", "on-demand"]
    assert row.split()[-2] == "True"
    patched = _kubectl(kube, "patch", "nodepool", "gpu", "--type", "merge", "-p", '{"spec":{"limits":{"cpu":"0"}}}')
    assert patched.returncode == 0, patched.stderr
    refused = _kubectl(kube, "patch", "nodepool", "gpu", "--type", "merge", "-p", '{"spec":{"limits":{"cpu":"x"}}}')
    assert refused.returncode == 1
    assert 'The NodePool "gpu" is invalid: spec.limits.cpu' in refused.stderr  # kubectl's rendering of the 422
    (claim,) = karpenter.claims("gpu")
    deleted = _kubectl(kube, "delete", "nodeclaim", claim["metadata"]["name"], "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    assert "deleted" in deleted.stdout
    assert kube.get("nodeclaims", claim["metadata"]["name"], api_version=model.API_VERSION) is not None


def test_deleting_a_pools_claims_by_label_holds_each_until_it_is_drained(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    kube.cluster.pod_stop_s = 1
    kube.create(model.nodepool("gpu", taints=[model.GPU_TAINT]))
    kube.create(model.nodepool("other", taints=[model.GPU_TAINT], labels={"team": "b"}))
    kube.create(model.pending_gpu_pod("a", gpus=8))
    kube.create(model.pending_gpu_pod("b", gpus=8))
    elsewhere = model.pending_gpu_pod("elsewhere", gpus=8)
    elsewhere["spec"]["nodeSelector"] = {"team": "b"}  # only "other" labels its nodes so
    kube.create(elsewhere)
    karpenter.advance(60)
    assert (len(karpenter.claims("gpu")), len(karpenter.claims("other"))) == (2, 1)
    deleted = _custom(kube_client).delete_collection_cluster_custom_object(
        GROUP, VERSION, "nodeclaims", label_selector="karpenter.sh/nodepool=gpu"
    )
    assert len(deleted["items"]) == 2
    assert all(c["metadata"]["deletionTimestamp"] for c in karpenter.claims("gpu"))
    karpenter.advance(31)
    assert karpenter.claims("gpu") == []
    (kept,) = karpenter.claims("other")
    assert [n["metadata"]["name"] for n in kube.list("nodes")] == [kept["status"]["nodeName"]]


def _token_call(kube: KubeHandle, token: str, method: str, path: str, body: Any = None) -> int:
    request = urllib.request.Request(
        f"{kube.url}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_rbac_on_karpenter_resources_is_by_group_resource_and_verb(
    kube: KubeHandle, karpenter: model.Karpenter
) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-jobs"}})
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": "gpu-jobs"}})
    rules = [
        {"apiGroups": ["karpenter.sh"], "resources": ["nodepools"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list", "delete"]},
    ]
    kube.create(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}, "rules": rules}
    )
    kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "r"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "gpu-jobs"}],
        }
    )
    kube.create(model.nodepool("gpu", taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    (claim,) = karpenter.claims("gpu")
    token = kube.emulator.issue_token("gpu-jobs", "runner")
    pools, claims = "/apis/karpenter.sh/v1/nodepools", "/apis/karpenter.sh/v1/nodeclaims"
    assert _token_call(kube, token, "PATCH", f"{pools}/gpu", {"spec": {"limits": {"cpu": "0"}}}) == 200
    assert _token_call(kube, token, "DELETE", f"{pools}/gpu") == 403
    assert _token_call(kube, token, "GET", f"{claims}/{claim['metadata']['name']}") == 403  # list, not get
    assert _token_call(kube, token, "DELETE", f"{claims}/{claim['metadata']['name']}") == 200


def test_a_pod_that_fits_a_node_with_room_is_bound_there_and_one_that_does_not_is_unschedulable(
    kube: KubeHandle, kube_client: Any, karpenter: model.Karpenter
) -> None:
    kube.create(model.nodepool("gpu", limits={"nvidia.com/gpu": "8"}, taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("first", gpus=6))
    karpenter.advance(60)
    (claim,) = karpenter.claims("gpu")  # a p5.48xlarge (8 GPUs) for a 6-GPU pod: the smallest that holds it
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    core = client.CoreV1Api(kube_client)
    created = core.create_namespaced_pod("default", model.pending_gpu_pod("second", gpus=2))
    assert created.status.phase == "Pending"
    second = core.read_namespaced_pod("second", "default")
    assert second.spec.node_name == claim["status"]["nodeName"]  # the room left on the node: no new claim
    core.create_namespaced_pod("default", model.pending_gpu_pod("third", gpus=1))
    third = core.read_namespaced_pod("third", "default")
    assert third.spec.node_name is None
    scheduled = next(c for c in third.status.conditions if c.type == "PodScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    assert len(karpenter.claims("gpu")) == 1  # the GPU limit (8) is used up


def test_a_node_delete_held_by_a_finalizer_answers_with_the_node(kube: KubeHandle, kube_client: Any) -> None:
    node = seed.gpu_node("held")
    node["metadata"]["finalizers"] = ["example.com/hold"]
    kube.create(node)
    answer = kube_client.rest_client.request(
        "DELETE", f"{kube.url}/api/v1/nodes/held", headers={"Accept": "application/json"}
    )
    body = json.loads(answer.read())
    assert (answer.status, body["kind"]) == (200, "Node")
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    client.CoreV1Api(kube_client).patch_node("held", {"metadata": {"finalizers": None}})
    assert kube.get("nodes", "held") is None


def test_a_negative_priority_class_for_placeholder_pods_is_served_and_validated(kube_client: Any) -> None:
    scheduling = client.SchedulingV1Api(kube_client)
    created = scheduling.create_priority_class(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gpu-jobs-placeholder"},
            "value": -10,
        }
    )
    assert (created.value, created.preemption_policy) == (-10, "PreemptLowerPriority")
    with pytest.raises(ApiException) as changed:
        scheduling.patch_priority_class("gpu-jobs-placeholder", {"value": -1})
    assert changed.value.status == 422
    assert _status(changed.value)["details"]["causes"][0]["field"] == "value"
    with pytest.raises(ApiException) as reserved:
        scheduling.create_priority_class(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "system-x"},
                "value": 1,
            }
        )
    assert reserved.value.status == 422


def test_a_lost_answer_on_a_limits_patch_still_changed_the_pool(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(model.nodepool("gpu", limits={"cpu": "1000"}))
    kube.inject("patch nodepools", "lost")  # carried out, the answer never arrives: 504 to the client
    with pytest.raises(ApiException) as caught:
        _patch_pool(kube_client, "gpu", {"spec": {"limits": {"cpu": "0"}}})
    assert caught.value.status == 504
    assert _pool(kube_client, "gpu")["spec"]["limits"] == {"cpu": "0"}


def test_a_claim_launched_for_a_pod_deleted_meanwhile_still_registers(
    kube: KubeHandle, karpenter: model.Karpenter
) -> None:
    kube.create(model.nodepool("gpu", taints=[model.GPU_TAINT]))
    kube.create(model.pending_gpu_pod("train", gpus=8))
    (claim,) = karpenter.claims("gpu")
    kube.cluster.delete("pods", "train", "default")
    karpenter.advance(60)
    (registered,) = karpenter.claims("gpu")  # an idle node now: what consolidation (not modelled) would remove
    assert registered["metadata"]["name"] == claim["metadata"]["name"]
    assert registered["status"]["nodeName"]
    kube.create(model.pending_gpu_pod("next", gpus=8))
    karpenter.advance(1)
    assert kube.get("pods", "next")["spec"]["nodeName"] == registered["status"]["nodeName"]  # bound to the idle node


def test_every_cel_rule_of_the_crd_files_has_its_python_twin() -> None:
    from tests.emulators.kube import crd_schema

    def rules(node: Any) -> list[str]:
        found: list[str] = []
        if isinstance(node, dict):
            found += [v["rule"] for v in node.get("x-kubernetes-validations") or []]
            for child in node.values():
                found += rules(child)
        elif isinstance(node, list):
            for child in node:
                found += rules(child)
        return found

    every = rules(crd_schema.schema_of(GROUP, "nodepools")) + rules(crd_schema.schema_of(GROUP, "nodeclaims"))
    assert len(every) == 27  # 17 distinct rules
    assert set(every) == set(crd_schema._RULES)  # and no twin without its rule
