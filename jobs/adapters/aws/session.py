"""How the jobs reach AWS: one botocore session per process, one client per (service, region), every call
translated into ``jobs.errors`` and every paginated list read to the end.

botocore finds its endpoint, region and credentials the standard way (``AWS_ENDPOINT_URL``, the credential chain);
its own retries are off because the job retries Busy/Throttled/Unavailable itself, with backoff and a deadline.

botocore, not boto3: the clients are botocore's either way (``boto3.Session.client`` creates them through its
botocore session), and the jobs use no boto3 resource or S3 transfer. Importing boto3 imports s3transfer and its
multiprocessing and concurrency modules too, and its session adds the resource and S3 handlers every client copies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

# botocore ships no type information and no stubs are installed: its clients are typed ``Any`` here.
import botocore.session  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from jobs.adapters.aws.errors import translate
from jobs.adapters.settings import AdapterSettings

T = TypeVar("T")

# One botocore session per process, shared by every adapter instance: a session loads the service models on its first
# client (~0.5 s each), and sessions are not thread-safe, so clients are created from it under this lock only.
# The clients themselves are thread-safe.
_SESSION_LOCK = threading.Lock()
_SESSION: dict[str, Any] = {}


def _new_client(service: str, region: str, config: Config) -> Any:
    with _SESSION_LOCK:
        if "session" not in _SESSION:
            _SESSION["session"] = botocore.session.get_session()
        return _SESSION["session"].create_client(service, region_name=region, config=config)


class AwsClients:
    """One client per (service, region), created on first use. Thread-safe."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._config = Config(
            retries={"total_max_attempts": 1},  # one attempt in all: the job does the retrying
            connect_timeout=settings.request_timeout_s,
            read_timeout=settings.request_timeout_s,
        )
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], Any] = {}

    def client(self, service: str, region: str) -> Any:
        with self._lock:
            found = self._clients.get((service, region))
            if found is None:
                found = self._clients[(service, region)] = _new_client(service, region, self._config)
            return found


def call(operation: str, method: Callable[..., T], **kwargs: Any) -> T:
    """One API call; whatever botocore raises comes out as ``jobs.errors`` (``operation`` names the API action)."""
    try:
        return method(**kwargs)
    except (ClientError, BotoCoreError) as error:
        raise translate(error, operation) from error


def paged(operation: str, method: Callable[..., Any], items: str, token_key: str, **kwargs: Any) -> list[Any]:
    """Every item of a paginated list call (``token_key`` names the token in both request and response, as
    ``NextToken`` / ``nextToken`` do across AWS services)."""
    results: list[Any] = []
    token: dict[str, str] = {}
    while True:
        page = call(operation, method, **kwargs, **token)
        results.extend(page.get(items) or [])
        if not page.get(token_key):
            return results
        token = {token_key: str(page[token_key])}
