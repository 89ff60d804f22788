"""The ``Metrics`` port over a real Prometheus (or Thanos Query, or anything serving the Prometheus HTTP API).

One instant query is one ``POST <url>/api/v1/query`` (form-encoded ``query`` and ``time``): POST so that a long
PromQL string with many matchers never meets a proxy's URL length limit. ``url`` may carry a path prefix
(``http://thanos.monitoring/prom``, an ingress that serves the API under a sub-path); nothing is appended but
``/api/v1/query``.

Authentication: a bearer token read from the file named by ``GPU_JOBS_PROMETHEUS_TOKEN_FILE`` (a projected
service-account token or a mounted Secret), read once per adapter, i.e. once per run, so a rotated token is picked
up by the next run. Without the variable, no Authorization header is sent. Nothing here needs Kubernetes RBAC.

Failures as ``jobs.errors``: unreachable, timeout, 5xx -> Unavailable; 429, or 503 with ``Retry-After`` ->
Throttled (with ``retry_after_s``); 400/422 (``bad_data``, ``execution``) -> Invalid with Prometheus's own error
text; 401/403 -> Denied; 404 -> NotFound (usually a wrong path prefix); a redirect is not followed (the token
stays with the configured host) -> Invalid naming where it points. Retrying is the caller's business
(``jobs.retry.Backoff``): a query is a read, so every retryable error may be retried.

Values: Prometheus sends sample values as strings; ``"NaN"``, ``"+Inf"`` and ``"-Inf"`` are legal. A non-finite
value carries no utilisation (``0/0`` of a used-memory share on a GPU that reports no memory), so such a series is
left out of the result, as if it had no sample, and counted in ``dropped_non_finite``. The response's
``warnings`` (Thanos: a store was unreachable and the answer may be partial) are kept in ``warnings`` for the
caller to log or report; they do not fail the query.
"""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3

from jobs.adapters.settings import AdapterSettings
from jobs.core.idle_pods import Sample
from jobs.errors import CloudError, Denied, Invalid, NotFound, Throttled, Unavailable

TOKEN_FILE_ENV = "GPU_JOBS_PROMETHEUS_TOKEN_FILE"  # noqa: S105 - the name of a variable, not a secret
OPERATION = "prometheus.query"
# How much of a non-JSON error body (a proxy's HTML page) goes into the message.
_BODY_EXCERPT = 300


class PrometheusMetrics:
    """Instant queries against one Prometheus-compatible endpoint; implements ``jobs.sweep.ports.Metrics``."""

    def __init__(
        self,
        url: str,
        settings: AdapterSettings,
        *,
        token_file: str | None = None,
        pool: urllib3.PoolManager | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise Invalid(f"prometheus url {url!r}: needs http:// or https:// and a host", operation=OPERATION)
        self.url = url.rstrip("/")
        self.endpoint = f"{self.url}/api/v1/query"
        self._settings = settings
        self._pool = pool or urllib3.PoolManager()
        # token_file="" (or the variable set empty) means no token: tests pass it to ignore the environment.
        self._token_file = (token_file if token_file is not None else os.environ.get(TOKEN_FILE_ENV)) or None
        self._token: str | None = None
        self.queries = 0  # how many queries were sent (the sweep promises at most 3 per cluster)
        self.warnings: list[str] = []
        self.dropped_non_finite = 0

    def query(self, promql: str, at: datetime) -> list[Sample]:
        """The vector result of ``promql`` evaluated at ``at``."""
        headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
        token = self._bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.queries += 1
        try:
            response = self._pool.urlopen(
                "POST",
                self.endpoint,
                body=urlencode({"query": promql, "time": rfc3339_millis(at)}),
                headers=headers,
                timeout=urllib3.Timeout(total=self._settings.request_timeout()),  # within the run's deadline
                retries=False,
                redirect=False,
            )
        except urllib3.exceptions.HTTPError as err:
            # Refused, reset, DNS, TLS, read or connect timeout: no answer at all.
            raise Unavailable(
                f"{self.url}: {_transport_reason(err)}", operation=OPERATION, code=type(err).__name__
            ) from err
        body = _json(response.data)
        if response.status != 200:
            raise _http_error(self.url, response, body)
        return self._vector(body)

    def _bearer(self) -> str | None:
        if self._token_file is None:
            return None
        if self._token is None:
            try:
                self._token = Path(self._token_file).read_text(encoding="utf-8").strip()
            except OSError as err:
                raise Denied(
                    f"{self.url}: cannot read the bearer token file {self._token_file} ({TOKEN_FILE_ENV}): "
                    f"{err.strerror or err}",
                    operation=OPERATION,
                    code="TokenFile",
                ) from err
        return self._token

    def _vector(self, body: Any) -> list[Sample]:
        if not isinstance(body, dict) or body.get("status") != "success":
            raise Unavailable(f"{self.url}: not a Prometheus API answer: {_excerpt(body)}", operation=OPERATION)
        for warning in body.get("warnings") or ():
            self.warnings.append(str(warning))
        data = body.get("data")
        kind = data.get("resultType") if isinstance(data, dict) else None
        if not isinstance(data, dict) or kind != "vector":
            # A scalar or string result means the query is not the per-series one the caller meant.
            raise Invalid(
                f"{self.url}: the query returned a {kind}, not an instant vector",
                operation=OPERATION,
                code="resultType",
            )
        samples: list[Sample] = []
        for item in data.get("result") or ():
            value = _number(item.get("value")) if isinstance(item, dict) else None
            if value is None:
                raise Unavailable(f"{self.url}: malformed sample {_excerpt(item)}", operation=OPERATION)
            if not math.isfinite(value):
                self.dropped_non_finite += 1
                continue
            metric = item.get("metric") or {}
            samples.append(Sample({str(k): str(v) for k, v in metric.items()}, value))
        return samples


def rfc3339_millis(at: datetime) -> str:
    """``at`` as RFC 3339 UTC with milliseconds: exact, where float unix seconds would go through a lossy parse."""
    if at.tzinfo is None:
        raise ValueError("at must be timezone-aware")
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _number(value: Any) -> float | None:
    # [<unix seconds>, "<value>"]; float() reads Prometheus's "NaN", "+Inf" and "-Inf".
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        return None
    try:
        return float(value[1])
    except ValueError:
        return None


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", errors="replace")


def _excerpt(body: Any) -> str:
    text = body if isinstance(body, str) else json.dumps(body)
    text = " ".join(text.split())
    return text[:_BODY_EXCERPT] + ("..." if len(text) > _BODY_EXCERPT else "")


def _transport_reason(err: urllib3.exceptions.HTTPError) -> str:
    # With retries=False urllib3 raises the cause itself; NewConnectionError subclasses ConnectTimeoutError, so
    # it is told apart first.
    if isinstance(err, urllib3.exceptions.NewConnectionError):
        return f"unreachable ({err})"
    if isinstance(err, urllib3.exceptions.TimeoutError):
        return f"timed out ({err})"
    return str(err)


def _retry_after(response: urllib3.BaseHTTPResponse) -> float | None:
    # Seconds only: an HTTP date is rare from Prometheus or its proxies, and a backoff works without it.
    value = (response.headers.get("Retry-After") or "").strip()
    return float(value) if value.isdigit() else None


def _http_error(url: str, response: urllib3.BaseHTTPResponse, body: Any) -> CloudError:
    status = response.status
    error_type = body.get("errorType", "") if isinstance(body, dict) else ""
    said = str(body.get("error", "")) if isinstance(body, dict) else _excerpt(body)
    message = f"{url}: HTTP {status}" + (f" {error_type}" if error_type else "") + (f": {said}" if said else "")
    retry_after = _retry_after(response)
    kind: type[CloudError]
    if status == 429 or (status == 503 and retry_after is not None):
        kind = Throttled
    elif status in (401, 403):
        kind = Denied
    elif 300 <= status < 400:
        # Not followed: the bearer token must not travel to wherever a redirect points (often a sign-in page).
        kind = Invalid
        message = f"{url}: HTTP {status} redirect to {response.headers.get('Location', '?')}: use that url"
    elif status == 404:
        kind = NotFound
        message += " (is the path prefix of the url right?)"
    elif status >= 500:
        kind = Unavailable  # incl. 503 errorType timeout/canceled: the query ran out of time on the server
    else:
        kind = Invalid  # 400 bad_data (a PromQL parse error), 422 execution
    return kind(
        message,
        operation=OPERATION,
        code=error_type or str(status),
        status=status,
        reason=error_type,
        retry_after_s=retry_after,
    )
