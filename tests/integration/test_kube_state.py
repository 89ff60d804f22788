"""The generic state store (jobs/adapters/kube/state.py) with a kind of state other than node-group records, as
the coming jobs will use it: kinds do not see each other, a malformed entry is that item's error, a stale writer
gets a conflict."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.records import ConfigMapRecords
from jobs.adapters.kube.state import ConfigMapState
from jobs.core.group_config import GroupConfig
from jobs.core.group_identity import GroupIdentity
from jobs.core.group_record import Record
from jobs.errors import Conflict
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace

pytestmark = pytest.mark.integration
NOW = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)


@dataclass(frozen=True)
class RequestId:
    """A cloud quota request the job opened, so it never opens a second one for the same quota."""

    value: str


@dataclass(frozen=True)
class Unusable:
    why: str


@dataclass(frozen=True)
class RequestIds:
    quotas: tuple[str, ...]
    kind: str = "quota-request"

    def keys(self) -> dict[str, str]:
        return {q: f"gpu-jobs-request-{q}" for q in self.quotas}

    def encode(self, key: str, value: RequestId | Unusable) -> tuple[dict[str, str], dict[str, str]]:
        assert isinstance(value, RequestId)
        return {"gpu-jobs.dev/quota": key}, {"request.json": json.dumps({"id": value.value})}

    def decode(self, key: str, name: str, data: Mapping[str, str]) -> RequestId | Unusable:
        try:
            return RequestId(json.loads(data["request.json"])["id"])
        except (KeyError, ValueError, TypeError) as exc:
            return Unusable(f"{name}: {exc!r}")


@pytest.fixture
def api(kube: KubeHandle, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    kube.create(namespace("gpu-jobs"))
    return api_client()


def test_a_second_kind_of_state_round_trips_beside_records_without_seeing_them(api: object, kube: KubeHandle) -> None:
    identity = GroupIdentity.of("c", "aws", {"region": "r", "cluster": "c", "nodegroup": "g"})
    ConfigMapRecords(api, "gpu-jobs", {"g": identity}).save("g", Record(GroupConfig(1, 2, 3), "down", NOW))  # type: ignore[arg-type]
    store: ConfigMapState[RequestId | Unusable] = ConfigMapState(api, "gpu-jobs", RequestIds(("g-vcpus", "a100")))  # type: ignore[arg-type]

    assert store.load() == {}  # the record is another kind
    store.save("g-vcpus", RequestId("req-1"))
    store.save("a100", RequestId("req-2"))
    labels = kube.get("ConfigMap", "gpu-jobs-request-a100", "gpu-jobs")["metadata"]["labels"]  # type: ignore[index]
    assert labels == {
        "app.kubernetes.io/managed-by": "gpu-jobs",
        "gpu-jobs.dev/record": "quota-request",
        "gpu-jobs.dev/quota": "a100",
    }
    # Broken by hand: that entry is an error value, the other still loads.
    broken = kube.get("ConfigMap", "gpu-jobs-request-a100", "gpu-jobs")
    assert broken is not None
    broken["data"] = {"request.json": "{not json"}
    kube.put(broken)
    fresh: ConfigMapState[RequestId | Unusable] = ConfigMapState(api, "gpu-jobs", RequestIds(("g-vcpus", "a100")))  # type: ignore[arg-type]
    loaded = fresh.load()
    assert loaded["g-vcpus"] == RequestId("req-1")
    assert isinstance(loaded["a100"], Unusable)
    assert len(ConfigMapRecords(api, "gpu-jobs", {"g": identity}).load()) == 1  # type: ignore[arg-type]


def test_a_stale_writer_of_any_kind_gets_a_conflict(api: object) -> None:
    first: ConfigMapState[RequestId | Unusable] = ConfigMapState(api, "gpu-jobs", RequestIds(("a100",)))  # type: ignore[arg-type]
    second: ConfigMapState[RequestId | Unusable] = ConfigMapState(api, "gpu-jobs", RequestIds(("a100",)))  # type: ignore[arg-type]
    first.save("a100", RequestId("req-1"))
    assert second.load() == {"a100": RequestId("req-1")}
    first.save("a100", RequestId("req-2"))
    with pytest.raises(Conflict):
        second.save("a100", RequestId("req-3"))  # based on what it loaded: stale, never a silent overwrite
    assert first.load() == {"a100": RequestId("req-2")}
