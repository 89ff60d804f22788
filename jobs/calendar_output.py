"""The three renderings of a calendar: text for a terminal, JSON as a contract, markdown for a pull request."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jobs.core.calendar import Calendar, Comparison, GroupCalendar, locator_text

_HOUR_RULER = "".join(f"{h:02d}  " for h in range(0, 24, 2))
_DAY_WIDTH = len("Tue 01 Dec")  # a grid row's day label (%a %d %b)


def _label(c: Comparison) -> str:
    return " (new)" if c.before is None else " (removed)" if c.after is None else ""


def _cell(text: str) -> str:
    """Text inside a markdown table cell: a ``|`` or a line break would end the cell or the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _when(at: datetime | None) -> str:
    return at.strftime("%a %Y-%m-%d %H:%M %z") if at else "no change within 35 days"


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _avoided(group: GroupCalendar) -> str:
    value = group.gpu_hours_avoided_per_week
    return "n/a (set gpusPerNode and up)" if value is None else f"{value:,.0f}"


def to_json(calendar: Calendar, comparisons: tuple[Comparison, ...] | None = None) -> str:
    doc: dict[str, Any] = {
        "at": calendar.at.isoformat(),
        "nodeGroups": [
            {
                "name": g.group.name,
                "state": g.state,
                "reason": g.reason,
                "nextChange": g.next_change.isoformat() if g.next_change else None,
                "cloud": g.group.cloud,
                "cluster": g.cluster,
                "timezone": g.timezone,
                "upHoursPerWeek": g.up_hours_per_week,
                "gpuHoursAvoidedPerWeek": g.gpu_hours_avoided_per_week,
                "changes": [{"at": c.at.isoformat(), "state": c.state, "reason": c.reason} for c in g.changes],
            }
            for g in calendar.groups
        ],
    }
    if comparisons is not None:
        doc["compare"] = [
            {"name": c.name, "upHoursPerWeekBefore": c.before, "upHoursPerWeekAfter": c.after, "delta": c.delta}
            for c in comparisons
        ]
    return json.dumps(doc, indent=2)


def to_text(calendar: Calendar, comparisons: tuple[Comparison, ...] | None = None) -> str:
    lines = [f"gpu-jobs calendar at {calendar.at.isoformat()}   (█ up  · down, half-hour cells, local time)", ""]
    for g in calendar.groups:
        lines.append(f"{g.group.name}  [cluster {g.cluster}: {g.group.cloud} {locator_text(g.group)}]  {g.timezone}")
        lines.append(f"  now:   {g.state.upper()} - {g.reason}")
        lines.append(f"  next:  {_when(g.next_change)}")
        lines.append(
            f"  week:  {g.up_hours_per_week:g} h up of 168 ({g.up_hours_per_week / 1.68:.0f}%);"
            f" GPU-hours avoided vs always-on: {_avoided(g)}"
        )
        lines.append(f"  {'':<{_DAY_WIDTH}}  {_HOUR_RULER}")  # over the cells: as wide as a row's day label
        for day, cells, holiday in g.grid:
            lines.append(f"  {day.strftime('%a %d %b')}  {cells}" + (f"  {holiday}" if holiday else ""))
        lines.append("")
    if comparisons is not None:
        lines.append(_compare_text(comparisons))
    return "\n".join(lines).rstrip() + "\n"


def _compare_text(comparisons: tuple[Comparison, ...]) -> str:
    names = [c.name + _label(c) for c in comparisons]
    width = max([len(n) for n in names] + [10])
    rows = [f"{'node group':<{width}}  before h/wk  after h/wk   change"]
    for c, name in zip(comparisons, names, strict=True):
        rows.append(f"{name:<{width}}  {_hours(c.before):>11}  {_hours(c.after):>10}  {c.delta:>+7g}")
    return "\n".join(rows)


def to_markdown(calendar: Calendar, comparisons: tuple[Comparison, ...] | None = None) -> str:
    out = [
        f"### GPU node group schedule at {calendar.at.isoformat()}",
        "",
        "| node group | cluster | cloud | now | why | next change | up h/week | GPU-h avoided/week |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    for g in calendar.groups:
        out.append(
            f"| `{g.group.name}` | {g.cluster} | {g.group.cloud} | **{g.state}** | {_cell(g.reason)} "
            f"| {_when(g.next_change)} | {g.up_hours_per_week:g} | {_avoided(g)} |"
        )
    if comparisons is not None:
        out += ["", "#### What this change does", "", "| node group | before h/week | after h/week | change |"]
        out.append("|---|---:|---:|---:|")
        for c in comparisons:
            out.append(f"| `{c.name}`{_label(c)} | {_hours(c.before)} | {_hours(c.after)} | {c.delta:+g} |")
    out += ["", "<details><summary>Week grids (█ up, · down, local time)</summary>", "", "```"]
    for g in calendar.groups:
        out.append(f"{g.group.name} ({g.timezone})")
        out.append(f"{'':<{_DAY_WIDTH}}  {_HOUR_RULER}")
        out += [f"{day.strftime('%a %d %b')}  {cells}" for day, cells, _ in g.grid]
        out.append("")
    out += ["```", "</details>"]
    return "\n".join(out) + "\n"
