"""The logs as a pod shows them: one JSON object per line, whatever the threads logging at once."""

from __future__ import annotations

import io
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from jobs import logs


class Pipe(io.StringIO):
    """A pipe that lets other threads run between two writes, as a busy pod's stderr does."""

    def write(self, text: str) -> int:
        time.sleep(0)
        return super().write(text)


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    out = Pipe()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure("info", json_lines=True)
    return out


def test_every_event_is_one_json_line_when_threads_log_at_once(stream: io.StringIO) -> None:
    log = logs.get_logger(job="quotas").bind(cluster="ml-prod")

    def many(worker: int) -> None:
        for n in range(200):
            log.info("quota.changed", namespace=f"team-{worker}", n=n, note="x" * 300)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(many, range(8)))

    lines = stream.getvalue().splitlines()
    assert len(lines) == 1600
    events = [json.loads(line) for line in lines]
    assert {e["event"] for e in events} == {"quota.changed"}
    assert all(e["job"] == "quotas" and e["cluster"] == "ml-prod" and e["level"] == "info" for e in events)


def test_an_event_below_the_level_is_not_written_and_a_trace_is_kept(stream: io.StringIO) -> None:
    log = logs.get_logger()
    log.debug("not.shown")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("crashed", scope="ml-prod")
    (line,) = stream.getvalue().splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"], event["scope"]) == ("crashed", "error", "ml-prod")
    assert "ValueError: boom" in event["exception"]
