"""How adapters reach their APIs and how long they wait. From the environment, as a CronJob sets it.

AWS uses boto3's own standard settings (``AWS_ENDPOINT_URL``, ``AWS_REGION``, credentials chain); GCP and Azure
endpoints can be pointed elsewhere (a private endpoint, or the local emulators) with the variables below.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from jobs.deadline import Deadline
from jobs.settings import env_flag, seconds_setting


@dataclass(frozen=True)
class AdapterSettings:
    poll_interval_s: float = 5.0  # between polls of an asynchronous operation
    operation_timeout_s: float = 1200.0  # an update that takes longer fails that group
    request_timeout_s: float = 30.0  # one HTTP call
    gcp_endpoint: str | None = None  # GPU_JOBS_GCP_ENDPOINT, e.g. http://127.0.0.1:8085
    azure_endpoint: str | None = None  # GPU_JOBS_AZURE_ENDPOINT, e.g. http://127.0.0.1:8086
    # GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS=true: GCP and Azure calls carry no real credentials (anonymous, a fixed
    # fake token) and may use plain http. For the local emulators only: a custom endpoint alone keeps the real
    # credentials, so pointing the clients at a private endpoint or a proxy never loses authentication.
    emulator_credentials: bool = False
    # The run's deadline: an operation followed past it fails that item ("deadline: ..."), the operation carries on in
    # the cloud and the next run converges. Unbounded for an adapter built outside a run.
    deadline: Deadline = field(default_factory=Deadline.unbounded)

    @classmethod
    def from_env(cls, deadline: Deadline | None = None) -> AdapterSettings:
        deadline = deadline or Deadline.unbounded()
        request_timeout_s = seconds_setting("REQUEST_TIMEOUT", cls.request_timeout_s, minimum=1)
        return cls(
            poll_interval_s=seconds_setting("POLL_INTERVAL", cls.poll_interval_s),
            operation_timeout_s=seconds_setting("OPERATION_TIMEOUT", cls.operation_timeout_s, minimum=1),
            request_timeout_s=deadline.request_timeout(request_timeout_s),
            gcp_endpoint=os.environ.get("GPU_JOBS_GCP_ENDPOINT") or None,
            azure_endpoint=os.environ.get("GPU_JOBS_AZURE_ENDPOINT") or None,
            emulator_credentials=env_flag("INSECURE_EMULATOR_CREDENTIALS"),
            deadline=deadline,
        )

    def request_timeout(self) -> float:
        """One call's timeout: the request timeout, or less when the run's deadline comes first (never below a
        second, so that undoing a temporary change near the end can still be sent)."""
        return min(self.request_timeout_s, max(1.0, self.deadline.left_to_end()))
