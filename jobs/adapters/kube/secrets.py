"""The one Secret the jobs read: the notifications' webhook URL (``notify.webhook.secretRef``), in the job's own
namespace, granted by name only (``resourceNames``): the jobs can read no other Secret."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, request
from jobs.adapters.kube.rbac import Grant
from jobs.core.policy_notify import DEFAULT_SECRET

RBAC = (Grant("", "secrets", ("get",), "namespace", (DEFAULT_SECRET,)),)  # notify: the webhook URL, by name


class KubeSecrets:
    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace

    def value(self, name: str, key: str) -> str:
        """The decoded value of ``key``; raises :class:`jobs.errors.CloudError` (NotFound: no such Secret or key).
        Errors name the Secret and the key, never the value."""
        where = f"Secret {self.namespace}/{name}"
        path = f"/api/v1/namespaces/{quote(self.namespace, safe='')}/secrets/{quote(name, safe='')}"
        found = request(self.api, "get secrets", "GET", path)
        data = found.get("data") or {}
        if key not in data:
            raise errors.NotFound(f"{where} has no key {key}", operation="get secrets")
        try:
            return base64.b64decode(str(data[key]), validate=True).decode().strip()
        except (binascii.Error, UnicodeDecodeError):
            raise errors.Invalid(f"{where} key {key} is not base64 text", operation="get secrets") from None
