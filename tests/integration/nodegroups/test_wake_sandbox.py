"""Wake on demand through the sandbox and kubectl only: the example policy installed in the sandbox's ml-prod
cluster, its ``nodegroups`` CronJob run as Jobs (``kubectl create job --from=cronjob/nodegroups``, with
``GPU_JOBS_AT``) by the sandbox's executor with nothing but the shipped RBAC, pods created with ``kubectl apply``, and
what a person sees read with ``kubectl describe pod`` and ``kubectl get events``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from jobs.labels import NODE_GROUP_LABEL, RECORD_KEY
from tests.integration.test_install import (
    NAMESPACE,
    conditions,
    exit_code,
    finished,
    kubectl,
    report,
    start_job,
)
from tests.sandbox.world import World

pytestmark = pytest.mark.integration

CLUSTER = "ml-prod"
#: Tue 2027-03-09 (Europe/Berlin): training-a100's window (Mon-Fri 07:00-22:00) is over and it is idle.
EVENING = "2027-03-09T22:01:00+01:00"
NIGHT = "2027-03-09T23:10:00+01:00"
LATER = "2027-03-09T23:20:00+01:00"


def pending_pod(name: str, namespace: str) -> str:
    """A training pod asking for a whole p4d (8 GPUs), for the spot A100 group, tolerating any taint."""
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  nodeSelector: {{eks.amazonaws.com/nodegroup: gpu-a100-spot}}
  tolerations: [{{operator: Exists}}]
  containers:
    - name: train
      image: nvcr.io/nvidia/pytorch:25.01-py3
      resources: {{limits: {{nvidia.com/gpu: "8"}}, requests: {{nvidia.com/gpu: "8"}}}}
"""


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World.start(prometheus=False, sync=False) as started:
        yield started


def ctl(world: World, *args: str, stdin: str | None = None) -> str:
    done = kubectl(world, "--context", CLUSTER, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def run(world: World, name: str, at: str) -> dict[str, object]:
    start_job(world, CLUSTER, "nodegroups", name, GPU_JOBS_AT=at, GPU_JOBS_OUTPUT="json")
    job, pod, logs = finished(world, CLUSTER, name)
    assert conditions(job) == {"SuccessCriteriaMet", "Complete"}, logs
    assert exit_code(pod) == 0
    world.sync_nodes()  # what the cloud does: nodes of a group at zero go, a woken group's nodes join
    return report(logs)


def events_on(world: World, namespace: str, pod: str) -> list[dict[str, str]]:
    found = json.loads(
        ctl(world, "-n", namespace, "get", "events", "--field-selector", f"involvedObject.name={pod}", "-o", "json")
    )
    return [{"reason": e["reason"], "type": e["type"], "message": e["message"]} for e in found["items"]]


def test_at_night_a_pending_gpu_pod_wakes_its_group_and_a_pod_of_another_namespace_wakes_nothing(world: World) -> None:
    from tests.emulators.aws import moto_state

    run(world, "nodegroups-evening", EVENING)
    nodegroup = moto_state.find_nodegroup("eu-west-1", CLUSTER, "gpu-a100-spot")
    assert nodegroup is not None
    assert nodegroup.scaling_config["desiredSize"] == 0

    ctl(world, "create", "namespace", "ml-vision")
    ctl(world, "create", "namespace", "interns")
    ctl(world, "apply", "-f", "-", stdin=pending_pod("train-x", "ml-vision"))
    ctl(world, "apply", "-f", "-", stdin=pending_pod("train-y", "interns"))

    night = run(world, "nodegroups-night", NIGHT)

    nodegroup = moto_state.find_nodegroup("eu-west-1", CLUSTER, "gpu-a100-spot")
    assert nodegroup is not None
    assert 1 <= nodegroup.scaling_config["desiredSize"] <= 2  # 1..maxNodes
    wakes = {i["name"]: i for i in night["items"] if i["kind"] == "wake"}  # type: ignore[union-attr,index]
    assert (wakes["ml-vision/train-x"]["woke"], wakes["interns/train-y"]["woke"]) == (True, False)

    described = ctl(world, "-n", "ml-vision", "describe", "pod", "train-x")
    events = " ".join(described.split("Events:", 1)[1].split())
    print(events)  # what a person sees (pytest -s)
    assert "Normal NodeGroupWaking" in events
    assert "Waking training-a100: 1 node, usually ready in ~5 min, up until 01:10 (policy wake.for)" in events
    (refused,) = events_on(world, "interns", "train-y")
    assert refused["type"] == "Warning"
    assert "namespace interns may not wake it (wake.namespaces: ml-*, nlp)" in refused["message"]
    # The wake is in the group's record, for `kubectl describe` and `gpu-jobs calendar --live`.
    record = ctl(world, "-n", NAMESPACE, "get", "configmap", "-l", f"{NODE_GROUP_LABEL}=training-a100", "-o", "json")
    (configmap,) = json.loads(record)["items"]
    assert json.loads(configmap["data"][RECORD_KEY])["wake"]["by"] == "ml-vision/train-x"

    run(world, "nodegroups-later", LATER)  # the next run: one Event per pod still

    assert [e["reason"] for e in events_on(world, "ml-vision", "train-x")] == ["NodeGroupWaking"]
    assert [e["reason"] for e in events_on(world, "interns", "train-y")] == ["NodeGroupNotWoken"]
