"""Kube emulator: label selectors, field selectors and limit/continue paging, through the official client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration


@pytest.fixture
def labelled_nodes(kube: KubeHandle) -> None:
    """Five nodes: three GPU pools and two unlabelled CPU nodes."""
    pools = {"a100-1": "a100", "a100-2": "a100", "h100-1": "h100", "l4-1": "l4"}
    for name, pool in pools.items():
        kube.create(seed.gpu_node(name, labels={"pool": pool, "gpu": "true"}))
    kube.create(seed.gpu_node("cpu-1", gpus=0, labels={"pool": "cpu"}))
    kube.create(seed.gpu_node("bare", gpus=0))


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("pool=a100", ["a100-1", "a100-2"]),
        ("pool==h100", ["h100-1"]),
        ("pool!=a100", ["bare", "cpu-1", "h100-1", "l4-1"]),  # != also matches nodes without the label
        ("pool in (h100, l4)", ["h100-1", "l4-1"]),
        ("pool notin (a100,cpu)", ["bare", "h100-1", "l4-1"]),
        ("gpu", ["a100-1", "a100-2", "h100-1", "l4-1"]),
        ("!gpu", ["bare", "cpu-1"]),
        ("gpu,pool notin (a100)", ["h100-1", "l4-1"]),
        ("pool in (a100),kubernetes.io/hostname=a100-2", ["a100-2"]),
    ],
)
@pytest.mark.usefixtures("labelled_nodes")
def test_label_selector_operators(kube_client: Any, selector: str, expected: list[str]) -> None:
    nodes = client.CoreV1Api(kube_client).list_node(label_selector=selector)
    assert sorted(n.metadata.name for n in nodes.items) == expected


@pytest.mark.usefixtures("labelled_nodes")
def test_a_malformed_label_selector_is_400(kube_client: Any) -> None:
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(kube_client).list_node(label_selector="pool in a100")
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["reason"] == "BadRequest"


@pytest.fixture
def gpu_pods(kube: KubeHandle) -> None:
    kube.create(seed.namespace("team-a"))
    kube.create(seed.gpu_pod("train", "team-a", node="gpu-1"))
    kube.create(seed.gpu_pod("done", "team-a", node="gpu-1", phase="Succeeded"))
    kube.create(seed.gpu_pod("infer", "default", node="gpu-2"))
    kube.create(seed.gpu_pod("queued", "default", phase="Pending"))


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=gpu-1", ["team-a/done", "team-a/train"]),
        ("spec.nodeName==gpu-2", ["default/infer"]),
        ("spec.nodeName!=", ["default/infer", "team-a/done", "team-a/train"]),  # scheduled pods
        ("status.phase=Running", ["default/infer", "team-a/train"]),
        ("status.phase!=Succeeded,status.phase!=Failed", ["default/infer", "default/queued", "team-a/train"]),
        ("metadata.name=train", ["team-a/train"]),
        ("metadata.namespace=default", ["default/infer", "default/queued"]),
        ("metadata.namespace!=default,spec.nodeName=gpu-1,status.phase=Running", ["team-a/train"]),
    ],
)
@pytest.mark.usefixtures("gpu_pods")
def test_pod_field_selectors_across_namespaces(kube_client: Any, selector: str, expected: list[str]) -> None:
    pods = client.CoreV1Api(kube_client).list_pod_for_all_namespaces(field_selector=selector)
    assert [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods.items] == expected


@pytest.mark.usefixtures("gpu_pods")
def test_namespaced_list_and_unsupported_field_label(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    assert [p.metadata.name for p in core.list_namespaced_pod("team-a").items] == ["done", "train"]
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_pod("team-a", field_selector="spec.priority=1")
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == "field label not supported: spec.priority"


def test_node_field_selector_on_unschedulable(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(seed.gpu_node("cordoned", unschedulable=True))
    kube.create(seed.gpu_node("open"))
    nodes = client.CoreV1Api(kube_client).list_node(field_selector="spec.unschedulable=false")
    assert [n.metadata.name for n in nodes.items] == ["open"]


def test_limit_and_continue_page_through_25_pods(kube: KubeHandle, kube_client: Any) -> None:
    for index in range(25):
        kube.create(seed.gpu_pod(f"pod-{index:02d}", "default"))
    core = client.CoreV1Api(kube_client)
    seen: list[str] = []
    pages: list[int] = []
    remaining: list[int | None] = []
    token: str | None = None
    while True:
        page = core.list_namespaced_pod("default", limit=10, _continue=token)
        pages.append(len(page.items))
        remaining.append(page.metadata.remaining_item_count)
        seen += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert pages == [10, 10, 5]
    assert remaining == [15, 5, None]
    assert seen == [f"pod-{i:02d}" for i in range(25)]
    assert kube.log.count("list pods") == 3
    queries = [r.query for r in kube.log.all()]
    assert "continue=" not in queries[0]
    assert all("continue=" in q for q in queries[1:])


def test_paging_with_a_selector_and_a_bogus_continue_token(kube: KubeHandle, kube_client: Any) -> None:
    for index in range(6):
        kube.create(seed.gpu_pod(f"p{index}", "default", labels={"parity": "even" if index % 2 == 0 else "odd"}))
    core = client.CoreV1Api(kube_client)
    first = core.list_namespaced_pod("default", label_selector="parity=even", limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p2"]
    second = core.list_namespaced_pod(
        "default", label_selector="parity=even", limit=2, _continue=first.metadata._continue
    )
    assert [p.metadata.name for p in second.items] == ["p4"]
    assert second.metadata.resource_version == first.metadata.resource_version
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_pod("default", limit=2, _continue="not-a-token")
    assert caught.value.status == 400
