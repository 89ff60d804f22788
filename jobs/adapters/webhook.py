"""The ``Webhook`` port (``jobs.notify``) over a Slack-compatible incoming webhook: one message is one
``POST <url>`` of JSON. A webhook URL is a credential (whoever has it may post), so it appears in no error, log or
report: errors name the webhook by its host only.

Failures as ``jobs.errors``: unreachable, timeout, 5xx -> Unavailable; 429 (or 503 with ``Retry-After``) ->
Throttled with ``retry_after_s``; 401/403 -> Denied; 404/410 -> NotFound (a webhook removed on the Slack side
answers 404 or 410); any other status -> Invalid. Retrying is the caller's business (``jobs.retry.Backoff``). A
redirect is not followed. Slack answers 200 with the body ``ok``; any 2xx is delivered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import urllib3

from jobs.adapters.settings import AdapterSettings
from jobs.errors import CloudError, Denied, Invalid, NotFound, Throttled, Unavailable

OPERATION = "post webhook"
#: Where the sandbox and the tests point the jobs at a local receiver instead of the Secret's URL.
URL_ENV = "GPU_JOBS_NOTIFY_URL"
_BODY_EXCERPT = 200
#: One POST's longest wait (less when GPU_JOBS_REQUEST_TIMEOUT or the run's deadline says less).
TIMEOUT_S = 10.0


class WebhookPost:
    """Posts JSON messages to one webhook URL."""

    def __init__(self, url: str, settings: AdapterSettings, *, pool: urllib3.PoolManager | None = None) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            # Not the value itself: it may be a real URL with a typo, and still a credential.
            raise Invalid("the webhook URL needs http:// or https:// and a host", operation=OPERATION)
        self._url = url.strip()
        self.host = parts.hostname
        self._settings = settings
        self._pool = pool or urllib3.PoolManager()

    def post(self, payload: Mapping[str, Any]) -> None:
        where = f"webhook at {self.host}"
        try:
            response = self._pool.urlopen(
                "POST",
                self._url,
                body=json.dumps(payload).encode(),
                headers={"Content-Type": "application/json"},
                # Within the run's deadline, and short: a webhook answers at once, and a hung one must not hold the run.
                timeout=urllib3.Timeout(total=min(TIMEOUT_S, self._settings.request_timeout())),
                retries=False,
                redirect=False,
            )
        except urllib3.exceptions.HTTPError as err:
            # urllib3's own words may carry the URL's path (the secret part): only the kind of failure is kept.
            what = "timed out" if isinstance(err, urllib3.exceptions.TimeoutError) else "unreachable"
            raise Unavailable(f"{where}: {what} ({type(err).__name__})", operation=OPERATION) from None
        if 200 <= response.status < 300:
            return
        raise _http_error(where, response, self._url)


def _retry_after(response: urllib3.BaseHTTPResponse) -> float | None:
    value = (response.headers.get("Retry-After") or "").strip()
    return float(value) if value.isdigit() else None


def _http_error(where: str, response: urllib3.BaseHTTPResponse, url: str) -> CloudError:
    status = response.status
    said = response.data.decode(errors="replace").strip().replace(url, "<url>")[:_BODY_EXCERPT]
    message = f"{where}: HTTP {status}" + (f": {said}" if said else "")
    retry_after = _retry_after(response)
    kind: type[CloudError]
    if status == 429 or (status == 503 and retry_after is not None):
        kind = Throttled
    elif status >= 500:
        kind = Unavailable
    elif status in (401, 403):
        kind = Denied
    elif status in (404, 410):
        kind = NotFound
    else:
        kind = Invalid
    return kind(message, operation=OPERATION, code=str(status), status=status, retry_after_s=retry_after)
