"""The ``notify:`` section of the policy: people hear what the jobs announce (shutdown warnings, wakes, the sweep's
marks) where they work, as one Slack-compatible JSON message per owner, posted to a webhook whose URL is kept in a
Secret (a webhook URL is a credential: it never appears in the policy, the logs or the report).

Its models share the policy's base and field types (``jobs.core.policy_fields``); the root model
(``jobs.core.policy``) imports this module.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, WithJsonSchema

from jobs.core.policy_fields import Model
from jobs.core.policy_quotas import LabelKey
from jobs.core.timespec import quoted

#: The Secret the shipped RBAC lets the jobs read (by resourceName, in their own namespace): another name in the
#: policy needs its own grant (``validate`` says so).
DEFAULT_SECRET = "gpu-jobs-notify"  # noqa: S105 - the name of a Secret, not its value

# A Secret's name is a DNS subdomain; its keys are letters, digits, "-", "_" and ".".
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def _check_secret_name(value: str) -> str:
    if len(value) > 253 or not _SUBDOMAIN.fullmatch(value):
        raise ValueError(f"{quoted(value)} is not a Secret name (lowercase letters, digits, '-' and '.')")
    return value


def _check_secret_key(value: str) -> str:
    if len(value) > 253 or not _SECRET_KEY.fullmatch(value):
        raise ValueError(f"{quoted(value)} is not a Secret key (letters, digits, '-', '_' and '.')")
    return value


SecretName = Annotated[
    str, AfterValidator(_check_secret_name), WithJsonSchema({"type": "string", "examples": [DEFAULT_SECRET]})
]
SecretKey = Annotated[str, AfterValidator(_check_secret_key), WithJsonSchema({"type": "string", "examples": ["url"]})]


class SecretRef(Model):
    """A key of a Secret in the job's own namespace."""

    name: SecretName
    key: SecretKey


class Webhook(Model):
    """A Slack-compatible incoming webhook (one JSON POST per message); its URL is the Secret's value."""

    secret_ref: SecretRef


class OwnerSource(Model):
    """Who a namespace's items are for: the value of this label on the namespace (``owner: alice``)."""

    namespace_label: LabelKey = Field(description="the namespace label whose value names the owner")


class Notify(Model):
    """Shutdown warnings, wakes and sweep marks, also sent as one message per owner to a webhook. Items whose
    namespace has no owner label (and instances, which have no namespace) go in one message marked "no owner"."""

    webhook: Webhook
    owner: OwnerSource
