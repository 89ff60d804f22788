"""How the jobs reach Azure Resource Manager: the credential (``DefaultAzureCredential``: Workload Identity in the
cluster; a fixed token for the local emulators) and the options every ARM client is built with (the SDK's retries
off, timeouts, an overridden endpoint).

Talking to an overridden endpoint (a private ARM endpoint or the local emulator) with the real SDKs needs the two
pieces below; the emulator's tests use the same two, so they exercise the code the product runs.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from azure.core.credentials import AccessToken, TokenCredential
from azure.core.pipeline import PipelineRequest
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.identity import DefaultAzureCredential

from jobs.adapters.settings import AdapterSettings

#: Stands in for an Entra ID token when the endpoint is overridden (the local emulator checks only that a
#: bearer token is present).
STATIC_TOKEN = "gpu-jobs-static-token"  # noqa: S105 - not a secret: never sent to Azure


class StaticTokenCredential:
    """A ``TokenCredential`` with one fixed token, for an overridden endpoint: no Entra ID round-trip."""

    def __init__(self, token: str = STATIC_TOKEN) -> None:
        self._token = token

    def get_token(
        self,
        *scopes: str,
        claims: str | None = None,
        tenant_id: str | None = None,
        enable_cae: bool = False,
        **kwargs: Any,
    ) -> AccessToken:
        return AccessToken(self._token, int(time.time()) + 3600)


class AllowHttpPolicy(SansIOHTTPPolicy[Any, Any]):
    """Sets azure-core's documented per-request ``enforce_https=False`` option on every request of a client.

    ARM's bearer-token policy refuses to send a token over plain http unless a request carries that option;
    a per-call policy sets it on every call and LRO poll while leaving the SDK's own auth policy in place.
    """

    def on_request(self, request: PipelineRequest[Any]) -> None:
        request.context.options["enforce_https"] = False


class ArmAuth:
    """The credential and client options for every ARM client of a process' adapters. Thread-safe: the default
    credential (which caches its tokens) is built once and shared."""

    def __init__(self, settings: AdapterSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._credential: TokenCredential | None = None

    def credential(self) -> TokenCredential:
        if self.settings.emulator_credentials:
            return StaticTokenCredential()
        with self._lock:
            if self._credential is None:
                self._credential = DefaultAzureCredential()
            return self._credential

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for an azure-mgmt client: its retries off (``retry_total=0``, the job retries), the
        timeouts and poll interval of the settings, and the overridden endpoint if there is one."""
        settings = self.settings
        options: dict[str, Any] = {
            "retry_total": 0,
            "connection_timeout": min(10.0, settings.request_timeout_s),
            "read_timeout": settings.request_timeout_s,
            "polling_interval": settings.poll_interval_s,
        }
        if settings.azure_endpoint:
            options["base_url"] = settings.azure_endpoint  # a private ARM endpoint, a proxy or the local emulator
        if settings.emulator_credentials:
            options["per_call_policies"] = [AllowHttpPolicy()]
        return options
