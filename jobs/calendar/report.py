"""The three renderings of a calendar: text for a terminal, JSON as a contract, markdown for a pull request."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jobs.core.calendar import Calendar, GroupCalendar, locator_text
from jobs.core.policy_diff import PolicyDiff
from jobs.diff import report

_HOUR_RULER = "".join(f"{h:02d}  " for h in range(0, 24, 2))
_DAY_WIDTH = len("Tue 01 Dec")  # a grid row's day label (%a %d %b)


def _cell(text: str) -> str:
    """Text inside a markdown table cell: a ``|`` or a line break would end the cell or the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _when(at: datetime | None) -> str:
    return at.strftime("%a %Y-%m-%d %H:%M %z") if at else "no change within 35 days"


def _avoided(group: GroupCalendar) -> str:
    value = group.gpu_hours_avoided_per_week
    if value is None and group.group.karpenter is not None:
        return "n/a (a Karpenter pool sizes itself)"
    if value is None:
        # Exactly what is missing: "up" alone would not say it is the working size.
        return (
            "n/a (set "
            + " and ".join(group.avoided_needs)
            + (", the working size)" if "up" in group.avoided_needs else ")")
        )
    return f"{value:,.0f}"


def to_json(calendar: Calendar, diff: PolicyDiff | None = None) -> str:
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
                "gpuHoursAvoidedNeeds": list(g.avoided_needs),  # the policy fields it lacks, when null
                "changes": [{"at": c.at.isoformat(), "state": c.state, "reason": c.reason} for c in g.changes],
                "wakeOnDemand": g.wake_text,
                "wake": g.woken.to_json() if g.woken else None,
            }
            for g in calendar.groups
        ],
    }
    if diff is not None:
        # The groups whose hours change (the earlier shape), then the whole diff as `gpu-jobs diff` gives it.
        doc["compare"] = [
            {
                "name": c.name,
                "upHoursPerWeekBefore": c.before.up_hours if c.before else None,
                "upHoursPerWeekAfter": c.after.up_hours if c.after else None,
                "delta": c.up_delta,
            }
            for c in diff.schedules
        ]
        doc["diff"] = report.to_doc(diff)
    return json.dumps(doc) + "\n"  # one line: one record for a log collector


def to_text(calendar: Calendar, diff: PolicyDiff | None = None) -> str:
    lines = [f"gpu-jobs calendar at {calendar.at.isoformat()}   (█ up  · down, half-hour cells, local time)", ""]
    for g in calendar.groups:
        lines.append(f"{g.group.name}  [cluster {g.cluster}: {g.group.cloud} {locator_text(g.group)}]  {g.timezone}")
        lines.append(f"  now:   {g.state.upper()} - {g.reason}")
        lines.append(f"  next:  {_when(g.next_change)}")
        if g.woken is not None:
            lines.append(f"  woken: by {g.woken.by} until {_when(g.woken.until)} ({g.woken.nodes} node(s), wake.for)")
        if g.wake_text:
            lines.append(f"  wake:  {g.wake_text}")
        lines.append(
            f"  week:  {g.up_hours_per_week:g} h up of 168 ({g.up_hours_per_week / 1.68:.0f}%);"
            f" GPU-hours avoided vs always-on: {_avoided(g)}"
        )
        lines.append(f"  {'':<{_DAY_WIDTH}}  {_HOUR_RULER}")  # over the cells: as wide as a row's day label
        for day, cells, holiday in g.grid:
            lines.append(f"  {day.strftime('%a %d %b')}  {cells}" + (f"  {holiday}" if holiday else ""))
        lines.append("")
    if diff is not None:
        lines += [f"what this change does, over {report.week_text(diff)}:", ""]
        lines += report.changes_text(diff) if not diff.empty else ["  no change: the policy does exactly what it did"]
    return "\n".join(lines).rstrip() + "\n"


def to_markdown(calendar: Calendar, diff: PolicyDiff | None = None) -> str:
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
    if diff is not None:
        out += ["", "#### What this change does", "", f"Over {report.week_text(diff)} (as the table above).", ""]
        changes = report.changes_markdown(diff, "#####") if not diff.empty else ["No change: the policy does the same."]
        while changes and not changes[-1]:
            changes.pop()
        out += changes
    out += ["", "<details><summary>Week grids (█ up, · down, local time)</summary>", "", "```"]
    for g in calendar.groups:
        out.append(f"{g.group.name} ({g.timezone})")
        out.append(f"{'':<{_DAY_WIDTH}}  {_HOUR_RULER}")
        out += [f"{day.strftime('%a %d %b')}  {cells}" for day, cells, _ in g.grid]
        out.append("")
    out += ["```", "</details>"]
    return "\n".join(out) + "\n"
