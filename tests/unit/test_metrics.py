"""The run's gauges (``jobs.metrics``) in the Prometheus text format: what a night's report counts."""

from __future__ import annotations

from datetime import datetime

from jobs.envelope import ItemResult, ScopeResult
from jobs.history import GroupSavings, Savings
from jobs.metrics import Gauge, exposition, run_gauges
from jobs.scopes import cluster

AT = datetime.fromisoformat("2026-12-01T20:05:00+01:00")


def test_the_text_format_escapes_label_values() -> None:
    gauge = Gauge("g", "help", (((("scope", 'a "b"\\c'),), 1.5),))
    assert exposition([gauge]) == '# HELP g help\n# TYPE g gauge\ng{scope="a \\"b\\"\\\\c"} 1.5\n'


def test_a_nights_gauges_count_the_groups_down_and_the_failures() -> None:
    down = ItemResult("node group", "train", "applied", "off", detail={"direction": "down"})
    quiet = ItemResult("node group", "batch", "unchanged", "ok", detail={"size": {"desired": 0}})
    up = ItemResult("node group", "infer", "unchanged", "ok", detail={"size": {"desired": 2}})
    failed = ItemResult("node group", "vision", "failed", "503")
    result = ScopeResult("nodegroups", cluster("ml-prod"), AT, False, "applied", items=(down, quiet, up, failed))
    week = {"ml-prod": Savings((GroupSavings("ml-prod", "train", 1.0, 3.0, 24.0), GroupSavings("ml-prod", "b", 1.0)))}
    text = exposition(run_gauges("nodegroups", 1764615900.0, 1, [result], week))
    assert 'gpu_jobs_last_exit_code{gpu_job="nodegroups"} 1\n' in text
    assert 'gpu_jobs_items_failed{gpu_job="nodegroups",scope="ml-prod"} 1\n' in text
    assert 'gpu_jobs_groups_down{cluster="ml-prod"} 2\n' in text
    assert 'gpu_jobs_avoided_gpu_hours_week{cluster="ml-prod",node_group="train"} 24\n' in text
    assert 'gpu_jobs_last_run_timestamp_seconds{gpu_job="nodegroups"} 1764615900\n' in text  # to the second
    assert exposition([Gauge("t", "h", (((), 1764615900.25),))]).endswith("t 1764615900.25\n")
