"""Talking to an overridden Azure endpoint (a private ARM endpoint or the local emulator) with the real SDKs.

Shared by every Azure adapter; the emulator's tests use the same two pieces, so they exercise the code the
product runs.
"""

from __future__ import annotations

import time
from typing import Any

from azure.core.credentials import AccessToken
from azure.core.pipeline import PipelineRequest
from azure.core.pipeline.policies import SansIOHTTPPolicy

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
