"""The week's figures per strategy, the product's own ``gpu-jobs report`` beside the simulator's truth, the targets
(printed met / NOT met, asserted nowhere: a benchmark), and the text and one-line JSON renderings."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tests import forkserver
from tests.sandbox.week.model import Figures

#: Targets of issue 26 (a benchmark's: printed, never asserted).
RATIO_TARGET = 1.3
BUSY_WITHIN = 0.02
REPORT_WITHIN = 0.02


@dataclass(frozen=True)
class Column:
    name: str
    figures: Figures
    api_calls: Mapping[str, int]
    #: How long the person who needs a GPU at 21:00 waited for it (minutes; None: outside the slice).
    wake_wait_min: float | None = None

    def as_json(self) -> dict[str, Any]:
        f = self.figures
        return {
            "billedGpuHours": round(f.billed, 2),
            "busyGpuHours": round(f.busy, 2),
            "billedOverBusy": round(f.billed / f.busy, 3) if f.busy else None,
            "idleGpuHours": round(f.billed - f.busy, 2),
            "idleGpuHoursWorkingHours": round(f.idle_working, 2),
            "idleGpuHoursOffHours": round(f.idle_off, 2),
            "workGpuHours": round(f.work, 2),
            "interruptedBusyPods": f.interrupted,
            "interruptedPods": sorted(set(f.interrupted_pods)),
            "waitingPodMinutesWorkingHours": round(f.waiting_working_min),
            "longestWaitMinutesWorkingHours": round(f.max_wait_working_min),
            "apiCalls": dict(self.api_calls),
            "wakeWaitMinutes": None if self.wake_wait_min is None else round(self.wake_wait_min),
        }


def truth_avoided(always_on: Figures, product: Figures) -> float:
    """GPU-hours avoided as the simulator counts them: per group, what always-on billed that gpu-jobs did not."""
    return sum(max(0.0, b - product.per_group_billed.get(g, 0.0)) for g, b in always_on.per_group_billed.items())


def product_report(env: Mapping[str, str], week: str, at: datetime) -> tuple[float | None, str]:
    """``gpu-jobs report --week W --output json``'s total avoided GPU-hours, or None and why (the command may not
    exist yet, or say nothing the hook can read)."""
    # ``at``: the report's now, the simulated week's end (the week lies in the future of the wall clock).
    argv = [sys.executable, "-m", "jobs", "report", "--week", week, "--at", at.isoformat(), "--output", "json"]
    done: subprocess.CompletedProcess[str] = forkserver.run(
        argv, env=dict(env), capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode == 2 and "invalid choice" in done.stderr:
        return None, "`gpu-jobs report` does not exist on this branch yet"
    try:
        found = _avoided(json.loads(done.stdout))
    except ValueError:
        return None, f"`gpu-jobs report` exited {done.returncode} without a JSON report: {done.stderr.strip()[-200:]}"
    if found is None:
        return None, "`gpu-jobs report`'s JSON has no total avoidedGpuHours"
    return found, f"`gpu-jobs report` exited {done.returncode}"


def _avoided(doc: Any) -> float | None:
    """The report's fleet total: a top-level ``avoidedGpuHours``, else one under ``total``/``totals``."""
    if not isinstance(doc, dict):
        return None
    for holder in (doc, doc.get("total"), doc.get("totals")):
        if isinstance(holder, dict) and isinstance(holder.get("avoidedGpuHours"), int | float):
            return float(holder["avoidedGpuHours"])
    return None


def targets(columns: Mapping[str, Column], report: float | None, truth: float) -> list[tuple[str, bool | None]]:
    """(target, met): None where it cannot be judged (no report yet)."""
    product, always = columns["gpu-jobs"].figures, columns["always-on"].figures
    ratio = product.billed / product.busy if product.busy else float("inf")
    same = abs(product.busy - always.busy) <= BUSY_WITHIN * always.busy if always.busy else True
    found: list[tuple[str, bool | None]] = [
        (f"gpu-jobs billed/busy <= {RATIO_TARGET} (is {ratio:.2f})", ratio <= RATIO_TARGET),
        (f"0 busy pods interrupted by gpu-jobs (is {product.interrupted})", product.interrupted == 0),
        (
            f"busy GPU-hours within {BUSY_WITHIN:.0%} of always-on ({product.busy:.1f} vs {always.busy:.1f})",
            same,
        ),
    ]
    found.append(
        (
            f"report within {REPORT_WITHIN:.0%} of the truth ({report if report is not None else 'n/a'} vs {truth:.1f})",
            None if report is None else abs(report - truth) <= REPORT_WITHIN * max(truth, 1e-9),
        )
    )
    return found


def render_text(
    columns: Mapping[str, Column],
    report: float | None,
    report_note: str,
    truth: float,
    warm_up_min: float,
    header: list[str],
) -> str:
    names = list(columns)
    rows: list[tuple[str, list[str]]] = []
    docs = {n: c.as_json() for n, c in columns.items()}
    for label, key in (
        ("billed GPU-hours", "billedGpuHours"),
        ("busy GPU-hours", "busyGpuHours"),
        ("billed / busy", "billedOverBusy"),
        ("idle GPU-hours", "idleGpuHours"),
        ("  of which in working hours", "idleGpuHoursWorkingHours"),
        ("  of which off hours (warm-up incl.)", "idleGpuHoursOffHours"),
        ("work GPU-hours (busy, w/o idle/leaked pods)", "workGpuHours"),
        ("busy pods interrupted", "interruptedBusyPods"),
        ("pod-minutes waiting (working hours)", "waitingPodMinutesWorkingHours"),
        ("longest wait in working hours (min)", "longestWaitMinutesWorkingHours"),
        ("the 21:00 person waited (min)", "wakeWaitMinutes"),
    ):
        rows.append((label, [str(docs[n][key]) for n in names]))
    for cloud in ("aws", "gcp", "azure", "kube"):
        rows.append((f"API calls: {cloud}", [str(docs[n]["apiCalls"].get(cloud, 0)) for n in names]))
    width = max(len(r[0]) for r in rows)
    lines = [*header, "", f"{'':{width}}  " + "  ".join(f"{n:>10}" for n in names)]
    lines += [f"{label:{width}}  " + "  ".join(f"{v:>10}" for v in values) for label, values in rows]
    for n in names:
        if docs[n]["interruptedPods"]:
            lines.append(f"interrupted ({n}): {', '.join(docs[n]['interruptedPods'])}")
    lines.append("")
    shown = f"{report:.1f}" if report is not None else "n/a"
    lines.append(f"gpu-jobs report, avoided GPU-hours: {shown}  ({report_note}); simulator's truth: {truth:.1f}")
    lines.append("")
    lines.append("targets (a benchmark: printed, not asserted):")
    for text, met in targets(columns, report, truth):
        lines.append(f"  [{'met' if met else 'n/a' if met is None else 'NOT met'}] {text}")
    longest = columns["gpu-jobs"].figures.max_wait_working_min
    said = "met" if longest <= warm_up_min else "NOT met"
    lines.append(f"  [{said}] working-hours wait <= the groups' warmUp ({longest:.0f} min vs {warm_up_min:.0f} min)")
    return "\n".join(lines)


def render_json(columns: Mapping[str, Column], report: float | None, truth: float, extra: dict[str, Any]) -> str:
    doc = {
        "strategies": {n: c.as_json() for n, c in columns.items()},
        "report": {"avoidedGpuHours": report, "truthAvoidedGpuHours": round(truth, 2)},
        **extra,
    }
    return json.dumps(doc)


def iso_week(at: datetime) -> str:
    year, week, _ = at.isocalendar()
    return f"{year}-W{week:02d}"
