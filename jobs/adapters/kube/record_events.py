"""Kubernetes Events on a job's record ConfigMaps, by record key: for account-scoped jobs (cloud quotas), whose
work has no Kubernetes object of its own, ``kubectl describe configmap <record>`` shows what was done and why."""

from __future__ import annotations

from collections.abc import Mapping

from jobs.adapters.kube.client import ApiClient
from jobs.adapters.kube.events import RBAC as EVENTS_RBAC
from jobs.adapters.kube.events import emit_event

RBAC = EVENTS_RBAC


class RecordEvents:
    def __init__(self, api: ApiClient, namespace: str, component: str, records: Mapping[str, str]) -> None:
        self.api = api
        self.namespace = namespace
        self.component = component
        self.records = dict(records)  # key -> ConfigMap name

    def emit(self, key: str, reason: str, message: str, *, warning: bool = False) -> None:
        name = self.records[key]
        emit_event(self.api, self.component, "ConfigMap", name, self.namespace, reason, message, warning=warning)
