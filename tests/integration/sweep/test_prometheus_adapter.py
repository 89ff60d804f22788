"""``PrometheusMetrics`` against the real Prometheus (backfilled DCGM series), behind a path-prefix proxy that wants a
bearer token, and against a small fault-injecting HTTP server for every failure the adapter translates."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from werkzeug.wrappers import Request, Response

from jobs.adapters.prometheus import TOKEN_FILE_ENV, PrometheusMetrics
from jobs.adapters.settings import AdapterSettings
from jobs.errors import CloudError, Denied, Invalid, NotFound, Throttled, Unavailable
from tests.emulators.base import RunningServer, serve
from tests.emulators.prometheus.dcgm import FB_USED, GPU_UTIL, GR_ENGINE_ACTIVE
from tests.emulators.prometheus.server import PrometheusServer

pytestmark = [pytest.mark.integration]

SETTINGS = AdapterSettings(request_timeout_s=5.0)
AT = datetime(2026, 3, 2, 9, 15, 30, 250000, tzinfo=UTC)


def pod_of(labels: dict[str, str] | Any) -> str:
    return str(labels.get("exported_pod") or labels.get("pod") or labels.get("pod_name") or "")


# --- the real Prometheus ----------------------------------------------------------------------------------------


@pytest.mark.prometheus
def test_instant_vector_from_the_real_prometheus_separates_idle_and_busy(prometheus: PrometheusServer) -> None:
    metrics = PrometheusMetrics(prometheus.url, SETTINGS)

    result = metrics.query(f"avg_over_time({GPU_UTIL}[1h])", prometheus.now)

    by_pod: dict[str, list[float]] = {}
    for sample in result:
        assert "__name__" not in sample.labels  # *_over_time drops the name
        by_pod.setdefault(pod_of(sample.labels), []).append(sample.value)
    assert metrics.queries == 1
    truth: dict[str, list[bool]] = {}
    for w in prometheus.workloads:
        if GPU_UTIL in w.metrics() and w.pod:
            truth.setdefault(w.pod, []).append(w.idle_over(timedelta(hours=1)))
    assert set(truth) <= set(by_pod)
    for pod, idle in truth.items():
        # One value per GPU (a 2-GPU pod has two), in some order: as many idle values as idle GPUs.
        values = sorted(by_pod[pod])
        assert len(values) == len(idle), (pod, values)
        assert sum(v <= 3 for v in values) == sum(idle), (pod, values)
        assert sum(v >= 50 for v in values) == len(idle) - sum(idle), (pod, values)


@pytest.mark.prometheus
def test_the_query_time_is_honoured_to_the_millisecond(prometheus: PrometheusServer) -> None:
    metrics = PrometheusMetrics(prometheus.url, SETTINGS)

    newest = metrics.query(f"max(timestamp({FB_USED}))", prometheus.now)
    after_lookback = metrics.query(FB_USED, prometheus.now + timedelta(minutes=6))

    assert newest[0].value == pytest.approx(prometheus.now.timestamp(), abs=1e-3)
    assert after_lookback == []


@pytest.mark.prometheus
def test_a_parse_error_is_invalid_with_prometheus_own_words(prometheus: PrometheusServer) -> None:
    metrics = PrometheusMetrics(prometheus.url, SETTINGS)

    with pytest.raises(Invalid, match="parse error") as caught:
        metrics.query(f"avg_over_time({GPU_UTIL}[1h]", prometheus.now)

    assert (caught.value.status, caught.value.code) == (400, "bad_data")


@pytest.mark.prometheus
def test_a_scalar_result_is_refused(prometheus: PrometheusServer) -> None:
    with pytest.raises(Invalid, match="scalar, not an instant vector"):
        PrometheusMetrics(prometheus.url, SETTINGS).query("scalar(vector(1))", prometheus.now)


@pytest.mark.prometheus
def test_nan_values_are_left_out_and_counted(prometheus: PrometheusServer) -> None:
    metrics = PrometheusMetrics(prometheus.url, SETTINGS)
    every = metrics.query(f"avg_over_time({GR_ENGINE_ACTIVE}[5m])", prometheus.now)

    # 0/0 per series is NaN in PromQL: no value at all, not a 0 % GPU.
    nan = metrics.query(f"avg_over_time({GR_ENGINE_ACTIVE}[5m]) * 0 / 0", prometheus.now)

    assert every
    assert nan == []
    assert metrics.dropped_non_finite == len(every)


@dataclass
class Proxy:
    """An ingress in front of Prometheus: serves it under /prom and wants ``Authorization: Bearer <token>``."""

    upstream: str
    token: str
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # (path, authorization, form body)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        body = request.get_data()
        self.seen.append((request.path, request.headers.get("Authorization", ""), body.decode()))
        if not request.path.startswith("/prom/"):
            return Response("404 page not found", status=404)(environ, start_response)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return Response("Unauthorized", status=401)(environ, start_response)
        forwarded = urllib.request.Request(
            self.upstream + request.path.removeprefix("/prom"),
            data=body,
            headers={"Content-Type": request.content_type or ""},
        )
        try:
            with urllib.request.urlopen(forwarded, timeout=10) as answer:
                status, payload = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        return Response(payload, status=status, content_type="application/json")(environ, start_response)


@pytest.fixture
def proxied(prometheus: PrometheusServer) -> Iterator[tuple[RunningServer, Proxy]]:
    proxy = Proxy(prometheus.url, token="s3cret-token")
    with serve(proxy) as running:
        yield running, proxy


@pytest.mark.prometheus
def test_a_path_prefix_and_a_bearer_token_from_the_token_file(
    prometheus: PrometheusServer,
    proxied: tuple[RunningServer, Proxy],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running, proxy = proxied
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(token_file))
    metrics = PrometheusMetrics(f"{running.url}/prom/", SETTINGS)

    first = metrics.query(f'avg_over_time({GPU_UTIL}{{pod="jupyter-alice"}}[1h])', prometheus.now)
    token_file.write_text("rotated\n")  # read once per run: this run keeps its token, the next one reads anew
    second = metrics.query(f'avg_over_time({GPU_UTIL}{{pod="jupyter-alice"}}[1h])', prometheus.now)

    assert [pod_of(s.labels) for s in first] == ["jupyter-alice"]
    assert second == first
    path, authorization, body = proxy.seen[0]
    assert (path, authorization) == ("/prom/api/v1/query", "Bearer s3cret-token")
    form = urllib.parse.parse_qs(body)
    assert form["time"] == [prometheus.now.isoformat(timespec="milliseconds").replace("+00:00", "Z")]
    with pytest.raises(Denied, match="HTTP 401"):
        PrometheusMetrics(f"{running.url}/prom", SETTINGS).query("vector(1)", prometheus.now)


@pytest.mark.prometheus
def test_without_the_token_variable_no_authorization_is_sent(
    proxied: tuple[RunningServer, Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    running, proxy = proxied
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)

    with pytest.raises(Denied):
        PrometheusMetrics(f"{running.url}/prom", SETTINGS).query("vector(1)", AT)

    assert proxy.seen[-1][1] == ""


@pytest.mark.prometheus
def test_a_wrong_path_prefix_is_not_found(proxied: tuple[RunningServer, Proxy]) -> None:
    running, _ = proxied

    with pytest.raises(NotFound, match="path prefix"):
        PrometheusMetrics(f"{running.url}/prometheus", SETTINGS, token_file="").query("vector(1)", AT)


def test_an_unreadable_token_file_is_denied(tmp_path: Path) -> None:
    metrics = PrometheusMetrics("http://127.0.0.1:9", SETTINGS, token_file=str(tmp_path / "missing"))

    with pytest.raises(Denied, match=f"token file .*missing.*{TOKEN_FILE_ENV}"):
        metrics.query("vector(1)", AT)


@pytest.mark.parametrize("url", ["127.0.0.1:9090", "ftp://prom", "http://"])
def test_a_url_without_scheme_or_host_is_refused(url: str) -> None:
    with pytest.raises(Invalid, match="http:// or https://"):
        PrometheusMetrics(url, SETTINGS)


# --- faults: a tiny HTTP server that answers as a failing Prometheus or proxy would -------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    content_type: str = "application/json"


@dataclass
class FaultyPrometheus:
    answers: list[Answer] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        with self._lock:
            self.requests.append((request.method, request.path, urllib.parse.parse_qs(request.get_data().decode())))
            answer = self.answers.pop(0) if self.answers else Answer(200, _success([]))
        if answer.delay_s:
            time.sleep(answer.delay_s)
        response = Response(answer.body, status=answer.status, content_type=answer.content_type)
        response.headers.update(answer.headers)
        return response(environ, start_response)


def _success(result: list[dict[str, Any]], warnings: list[str] | None = None, kind: str = "vector") -> str:
    body: dict[str, Any] = {"status": "success", "data": {"resultType": kind, "result": result}}
    if warnings:
        body["warnings"] = warnings
    return json.dumps(body)


def _error(error_type: str, error: str) -> str:
    return json.dumps({"status": "error", "errorType": error_type, "error": error})


@pytest.fixture
def faulty() -> Iterator[tuple[str, FaultyPrometheus]]:
    app = FaultyPrometheus()
    with serve(app) as running:
        yield running.url, app


def test_the_request_is_a_form_post_with_the_query_and_an_rfc3339_time(faulty: tuple[str, FaultyPrometheus]) -> None:
    url, app = faulty

    PrometheusMetrics(url, SETTINGS, token_file="").query('up{cluster="a b"}', AT)

    method, path, form = app.requests[0]
    assert (method, path) == ("POST", "/api/v1/query")
    assert form == {"query": ['up{cluster="a b"}'], "time": ["2026-03-02T09:15:30.250Z"]}


def test_values_are_strings_and_inf_is_dropped_warnings_kept(faulty: tuple[str, FaultyPrometheus]) -> None:
    url, app = faulty
    app.answers.append(
        Answer(
            200,
            _success(
                [
                    {"metric": {"pod": "a", "gpu": "0"}, "value": [1772442930.25, "2.5"]},
                    {"metric": {"pod": "b"}, "value": [1772442930.25, "+Inf"]},
                    {"metric": {"pod": "c"}, "value": [1772442930.25, "NaN"]},
                    {"metric": {"pod": "d"}, "value": [1772442930.25, "-Inf"]},
                    {"metric": {"pod": "e"}, "value": [1772442930.25, "1e-3"]},
                ],
                warnings=["partial response: store eu-west-1 unreachable"],
            ),
        )
    )
    metrics = PrometheusMetrics(url, SETTINGS, token_file="")

    result = metrics.query("x", AT)

    assert [(dict(s.labels), s.value) for s in result] == [({"pod": "a", "gpu": "0"}, 2.5), ({"pod": "e"}, 0.001)]
    assert metrics.dropped_non_finite == 3
    assert metrics.warnings == ["partial response: store eu-west-1 unreachable"]


@pytest.mark.parametrize(
    ("answer", "kind", "match", "retry_after"),
    [
        (Answer(429, "Too Many Requests", {"Retry-After": "7"}, content_type="text/plain"), Throttled, "429", 7.0),
        (Answer(429, "slow down", content_type="text/plain"), Throttled, "429", None),
        (Answer(503, _error("unavailable", "overloaded"), {"Retry-After": "3"}), Throttled, "overloaded", 3.0),
        (Answer(503, _error("timeout", "query timed out in expression evaluation")), Unavailable, "timed out", None),
        (Answer(500, _error("internal", "boom")), Unavailable, "boom", None),
        (Answer(502, "<html><body>Bad Gateway</body></html>", content_type="text/html"), Unavailable, "Bad", None),
        (Answer(400, _error("bad_data", "1:14: parse error: unclosed left parenthesis")), Invalid, "unclosed", None),
        (Answer(422, _error("execution", "many-to-many matching not allowed")), Invalid, "many-to-many", None),
        (Answer(401, "Unauthorized", content_type="text/plain"), Denied, "401", None),
        (Answer(403, "Forbidden", content_type="text/plain"), Denied, "403", None),
        (Answer(200, "<html>Sign in</html>", content_type="text/html"), Unavailable, "not a Prometheus", None),
        (Answer(302, "", {"Location": "https://sso.example/sign_in"}, content_type="text/html"), Invalid, "sso", None),
        (Answer(200, _success([], kind="matrix")), Invalid, "matrix", None),
        (Answer(200, json.dumps({"status": "success", "data": None})), Invalid, "None, not an instant", None),
        (Answer(200, _success([{"metric": {}, "value": [1, 2]}])), Unavailable, "malformed sample", None),
    ],
    ids=[
        "429-retry-after",
        "429",
        "503-retry-after",
        "503-timeout",
        "500",
        "502-html",
        "400-bad-data",
        "422-execution",
        "401",
        "403",
        "200-login-page",
        "302-not-followed",
        "matrix",
        "no-data",
        "value-not-a-string",
    ],
)
def test_failures_become_jobs_errors(
    faulty: tuple[str, FaultyPrometheus],
    answer: Answer,
    kind: type[CloudError],
    match: str,
    retry_after: float | None,
) -> None:
    url, app = faulty
    app.answers.append(answer)

    with pytest.raises(CloudError, match=match) as caught:
        PrometheusMetrics(url, SETTINGS, token_file="").query("x", AT)

    assert type(caught.value) is kind
    assert caught.value.retry_after_s == retry_after
    assert caught.value.operation == "prometheus.query"
    if answer.status != 200:
        assert caught.value.status == answer.status


def test_a_timeout_is_unavailable(faulty: tuple[str, FaultyPrometheus]) -> None:
    url, app = faulty
    app.answers.append(Answer(200, _success([]), delay_s=1.5))
    metrics = PrometheusMetrics(url, AdapterSettings(request_timeout_s=0.3), token_file="")

    began = time.monotonic()
    with pytest.raises(Unavailable, match="timed out") as caught:
        metrics.query("x", AT)

    assert time.monotonic() - began < 1.2
    assert caught.value.retryable


def test_a_refused_connection_is_unavailable() -> None:
    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(Unavailable, match="unreachable") as caught:
            PrometheusMetrics(f"http://127.0.0.1:{port}", SETTINGS, token_file="").query("x", AT)

    assert caught.value.status == 0


def sweep_queries(cluster: str, metric: str = GPU_UTIL, window: str = "1h") -> tuple[str, str, str]:
    """The sweep's three queries as SWEEP.md writes them, for one cluster of a shared Prometheus."""
    m = f'cluster="{cluster}"'
    used = f"avg_over_time({FB_USED}{{{m}}}[{window}])"
    free = f"avg_over_time(DCGM_FI_DEV_FB_FREE{{{m}}}[{window}])"
    return (
        f"avg_over_time({metric}{{{m}}}[{window}])",
        f"{used} / ({used} + {free})",
        f'avg_over_time({GR_ENGINE_ACTIVE}{{{m},GPU_I_ID!=""}}[{window}])',
    )


@pytest.mark.prometheus
@pytest.mark.parametrize("cluster", ["ml-prod", "research", "notebooks"])
def test_the_sweeps_three_queries_answer_one_sample_per_series_on_every_shape(
    prometheus: PrometheusServer, cluster: str
) -> None:
    metrics = PrometheusMetrics(prometheus.url, SETTINGS, token_file="")
    mine = [w for w in prometheus.workloads if w.cluster == cluster]

    util, memory, mig = (metrics.query(q, prometheus.now) for q in sweep_queries(cluster))

    # One-to-one on all labels works for every shape (time-sliced copies, exporter labels, old names): no 422.
    assert len(util) == sum(GPU_UTIL in w.metrics() for w in mine)
    assert len(memory) == len(mine)
    assert len(mig) == sum(w.is_mig for w in mine)
    assert all(0 < s.value < 1 for s in memory)
    assert {s.labels["cluster"] for s in (*util, *memory, *mig)} == {cluster}
    assert metrics.queries == 3
    assert metrics.dropped_non_finite == 0


@pytest.mark.prometheus
def test_the_broken_prof_cluster_reads_exactly_zero_through_the_adapter(prometheus: PrometheusServer) -> None:
    result = PrometheusMetrics(prometheus.url, SETTINGS, token_file="").query(
        sweep_queries("notebooks", GR_ENGINE_ACTIVE)[0], prometheus.now
    )

    assert len(result) == 2
    assert {s.value for s in result} == {0.0}
