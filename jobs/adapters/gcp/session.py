"""How the jobs reach Google Cloud: credentials (Application Default Credentials, Workload Identity in the
cluster; anonymous for the local emulators), the endpoint (a private one, a proxy or the emulator), call options
(the SDKs' own retries off: the job retries with its own backoff and deadline), and an authorised session for the
few plain REST reads whose SDK would cost more to import than the call is worth."""

from __future__ import annotations

import threading
from typing import Any

import google.auth
from google.api_core import exceptions as api_exceptions
from google.auth.credentials import AnonymousCredentials, Credentials
from google.auth.transport.requests import AuthorizedSession

from jobs.adapters.gcp.errors import translated
from jobs.adapters.settings import AdapterSettings

COMPUTE_ENDPOINT = "https://compute.googleapis.com"
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


class GcpSession:
    """Shared by a cloud's adapter modules. Thread-safe: the authorised session is built once, under a lock."""

    def __init__(self, settings: AdapterSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._authorized: AuthorizedSession | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """What every google-cloud client is built with (endpoint, credentials); use with ``transport="rest"``."""
        kwargs: dict[str, Any] = {}  # Application Default Credentials (Workload Identity in the cluster)
        if self.settings.gcp_endpoint:
            # A private endpoint, a proxy or the local emulator: "http://" is kept as is by the REST transports.
            kwargs["client_options"] = {"api_endpoint": self.settings.gcp_endpoint}
        if self.settings.emulator_credentials:
            anonymous: Credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]  # untyped in google-auth
            kwargs["credentials"] = anonymous
        return kwargs

    def call_options(self) -> dict[str, Any]:
        # retry=None: the job retries Busy/Throttled/Unavailable with its own backoff and deadline.
        return {"retry": None, "timeout": self.settings.request_timeout()}

    def get_json(self, operation: str, path: str, target: str, base: str = COMPUTE_ENDPOINT) -> Any:
        """One GET of a Google REST API (``path`` from ``/compute/v1/...``) as JSON, errors translated."""
        url = (self.settings.gcp_endpoint or base).rstrip("/") + path
        with translated(operation, target):
            response = self._session().get(url, timeout=self.settings.request_timeout())
            if response.status_code >= 400:
                raise api_exceptions.from_http_response(response)  # type: ignore[no-untyped-call]
            return response.json()

    def _session(self) -> AuthorizedSession:
        with self._lock:
            if self._authorized is None:
                with translated("client", "Application Default Credentials"):
                    credentials = self.client_kwargs().get("credentials") or google.auth.default(scopes=_SCOPES)[0]
                    self._authorized = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
            return self._authorized
