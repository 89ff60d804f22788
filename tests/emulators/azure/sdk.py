"""How the real Azure SDK clients are pointed at the emulator, the same way product code must do it.

Three things differ from talking to Azure, and all three are plain client-constructor options:

1. ``base_url=<endpoint>``: every azure-mgmt-* client takes it (``ContainerServiceClient``,
   ``QuotaMgmtClient``, ``ComputeManagementClient``).
2. ``credential=StaticTokenCredential(...)``: a TokenCredential that returns a fixed token, so no Entra ID
   (AAD) round-trip happens. Use it only when the endpoint override is set; otherwise use the normal
   ``DefaultAzureCredential``.
3. ``per_call_policies=[AllowHttpPolicy()]``: azure-core's ``BearerTokenCredentialPolicy`` (of which ARM's
   ``ARMChallengeAuthenticationPolicy`` is a subclass) refuses to put a token on a non-https URL
   (``ServiceRequestError: Bearer token authentication is not permitted for non-TLS protected (non-https)
   URLs``) unless the request carries azure-core's documented per-request opt-out ``enforce_https=False``
   (azure-core 1.3.0, PR Azure/azure-sdk-for-python#9821; read in ``pipeline/policies/_authentication.py``,
   ``_enforce_https``). Passing ``enforce_https=False`` to every operation call would work but would leak into
   all product code; a per-call policy (``per_call_policies`` runs before the retry and auth policies) sets that
   same option on every request of the client instead, including LRO polls. The SDK's own ARM auth policy,
   retry policy and pollers stay exactly as in production.

Rejected alternatives: a custom ``authentication_policy=`` (replaces ARM's auth policy, so the product would
run different auth code against the emulator), or overriding the private ``_enforce_https``.

LRO polling speed needs nothing in the product: the emulator sends retry-after headers (see
``arm.retry_after_headers``) and ARMPolling sleeps what they say instead of its 30 s default.

Product sketch (behind one setting, ``GPU_JOBS_AZURE_ENDPOINT``)::

    endpoint = os.environ.get("GPU_JOBS_AZURE_ENDPOINT")
    if endpoint:
        kwargs = {"base_url": endpoint, "per_call_policies": [AllowHttpPolicy()]}
        credential = StaticTokenCredential("gpu-jobs-emulator")
    else:
        kwargs, credential = {}, DefaultAzureCredential()
    ContainerServiceClient(credential, subscription_id, **kwargs)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.containerservice import ContainerServiceClient
from azure.mgmt.quota import QuotaMgmtClient

from jobs.adapters.azure.auth import AllowHttpPolicy, StaticTokenCredential

EMULATOR_TOKEN = "gpu-jobs-emulator-token"


def emulator_client_kwargs(endpoint: str, token: str = EMULATOR_TOKEN) -> dict[str, Any]:
    """``credential``, ``base_url`` and ``per_call_policies`` for any azure-mgmt-* client constructor."""
    return {
        "credential": StaticTokenCredential(token),
        "base_url": endpoint,
        "per_call_policies": [AllowHttpPolicy()],
    }


@dataclass(frozen=True)
class AzureClients:
    """The three clients the product uses, built against an emulator endpoint."""

    containerservice: ContainerServiceClient
    quota: QuotaMgmtClient
    compute: ComputeManagementClient

    @classmethod
    def connect(cls, endpoint: str, subscription: str, **client_kwargs: Any) -> AzureClients:
        """``client_kwargs`` go to every client: e.g. ``retry_total=0``, ``read_timeout=0.5``."""
        kwargs = {**emulator_client_kwargs(endpoint), **client_kwargs}
        return cls(
            containerservice=ContainerServiceClient(subscription_id=subscription, **kwargs),
            quota=QuotaMgmtClient(subscription_id=subscription, **kwargs),
            compute=ComputeManagementClient(subscription_id=subscription, **kwargs),
        )

    def close(self) -> None:
        self.containerservice.close()
        self.quota.close()
        self.compute.close()
