"""A policy diff three ways: markdown for a pull-request comment, text for a terminal, JSON (one line) for tools."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

from jobs.core.policy_diff import (
    MISSING,
    DerivedTarget,
    FieldChange,
    GroupHours,
    NamespaceChange,
    PolicyDiff,
    QuotaChange,
    QuotaTargetChange,
    ScheduleChange,
)

NO_SIZE = "n/a (no up size)"
#: Namespaces named per row; the rest are counted (the JSON lists them all).
MAX_NAMES = 20
#: A value longer than this (a whole node group added) is cut: the comment is read, not parsed.
MAX_VALUE = 160
GPU_NOTE = "GPU-h = up-hours x up.desired x gpusPerNode"


def number(value: float) -> str:
    """``1,000.08``, ``41.25``, ``10``: two decimals at most, no trailing zeros."""
    text = f"{value:,.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def signed(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "±0" if value == 0 else ("+" if value > 0 else "-") + number(abs(value))


def _up(hours: GroupHours | None) -> str:
    return "-" if hours is None else number(hours.up_hours)


def _gpu(hours: GroupHours | None) -> str:
    if hours is None:
        return "-"
    return NO_SIZE if hours.gpu_hours is None else number(hours.gpu_hours)


def label(change: ScheduleChange) -> str:
    return " (new)" if change.before is None else " (removed)" if change.after is None else ""


def value_text(value: Any, unit: str | None = None) -> str:
    """A policy value as a reviewer reads it: ``5%`` for a percent given as 5 (the model reads it as 5.0), ``2.5%``
    where it is not whole."""
    if value is MISSING:
        return "(absent)"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and unit is not None:
        return f"{value}{unit}"
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def week_text(diff: PolicyDiff) -> str:
    week = diff.week
    if week.with_overrides:
        return f"the 7 days from {week.start.isoformat()}, overrides included"
    iso = week.start.isocalendar()
    return (
        f"the reference week {iso.year}-W{iso.week:02d} (Mon {week.start.date().isoformat()} 00:00 to"
        f" Mon {week.end.date().isoformat()} 00:00, {week.start.tzinfo}), regular schedule: overrides are listed,"
        " not counted"
    )


def _size_note(diff: PolicyDiff) -> str:
    before, after = diff.totals.without_size
    if not before and not after:
        return f"{GPU_NOTE}."
    return f"{GPU_NOTE}; {NO_SIZE}: {before} group(s) before, {after} after, left out of the GPU-h total."


def names_text(change: NamespaceChange) -> str:
    shown = ", ".join(change.namespaces[:MAX_NAMES])
    more = len(change.namespaces) - MAX_NAMES
    return f"{len(change.namespaces)}: {shown}" + (f" and {more} more" if more > 0 else "")


def read_text(diff: PolicyDiff) -> str:
    return "namespaces read: " + ", ".join(f"{n} in {c}" for c, n in diff.namespaces_read)


def _sections(diff: PolicyDiff) -> list[tuple[str, Sequence[FieldChange]]]:
    out: list[tuple[str, Sequence[FieldChange]]] = []
    if diff.node_group_fields:
        out.append(("node group settings", diff.node_group_fields))
    out += [(s.name, s.changes) for s in diff.sections]
    return out


def target_text(side: DerivedTarget | None) -> str:
    """``768 vCPU`` once converted; before that each group's working maximum in nodes."""
    if side is None:
        return "-"
    if side.value is not None:
        cap = f" (capped at max {side.max:,})" if side.capped else ""
        return f"{side.value:,} {side.unit or ''}".rstrip() + cap
    if side.instances is not None:
        return f"{side.instances[1]} x {side.instances[0]}"
    return ", ".join(f"{n} up.max {m}" if m is not None else f"{n} live max size" for n, m in side.nodes)


def _nodes(side: DerivedTarget | None) -> int | None:
    if side is None:
        return 0
    if side.instances is not None:
        return side.instances[1]
    return None if any(m is None for _, m in side.nodes) else sum(m or 0 for _, m in side.nodes)


def target_delta(change: QuotaTargetChange) -> str:
    delta = change.delta
    if delta is None:
        # Not converted: the change in nodes at up.max (where every group gives one), or in instances of one shape.
        was, now = _nodes(change.before), _nodes(change.after)
        shapes = {s.instances[0] if s.instances else None for s in (change.before, change.after) if s is not None}
        noun = "instances" if None not in shapes and len(shapes) == 1 else "nodes"
        return "n/a" if was is None or now is None else f"{signed(now - was)} {noun}"
    unit = next((s.unit for s in (change.after, change.before) if s is not None and s.unit), "")
    return f"{signed(delta)} {unit}".rstrip()


def target_how(change: QuotaTargetChange, read: bool) -> str:
    side = change.after or change.before
    assert side is not None  # a change has a side
    if side.error is not None:
        return f"not converted: {side.error}"
    if side.demand is not None:
        return side.demand
    counted = "instances" if side.instances is not None else "nodes"
    return f"in {counted} (--cloud-quotas converts)" if not read else ""


def targets_note(read: bool) -> str:
    counted = (
        "A target of `{nodeGroups}` counts each group at up.max (its live max size without up), one of"
        " `{instances, instanceType}` that many of the shape"
    )
    if read:
        return f"{counted}, in the quota's unit from the shapes the cloud reports."
    return (
        f"{counted}. With --cloud-quotas the diff reads the groups' shapes (read-only) and gives the targets in the"
        " quota's unit: vCPU on AWS and Azure, GPUs on GCP."
    )


# --- markdown ------------------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text inside a markdown table cell: a ``|`` or a line break would end the cell or the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def schedule_markdown(diff: PolicyDiff, heading: str = "####") -> list[str]:
    total = diff.totals
    out = [f"{heading} Node groups: {len(diff.schedules)} of {max(total.groups)} change their hours", ""]
    if not diff.schedules:
        return out
    out += [
        "| node group | before h/week | after h/week | change | GPU-h/week before | GPU-h/week after | GPU-h change"
        " | cluster |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in diff.schedules:
        out.append(
            f"| {_code(c.name)}{label(c)} | {_up(c.before)} | {_up(c.after)} | {signed(c.up_delta)} | {_gpu(c.before)}"
            f" | {_gpu(c.after)} | {signed(c.gpu_delta)} | {c.cluster} |"
        )
    groups = f"{total.groups[0]}" if total.groups[0] == total.groups[1] else f"{total.groups[0]} -> {total.groups[1]}"
    out.append(
        f"| **all {groups} groups** | {number(total.up_hours[0])} | {number(total.up_hours[1])} | "
        f"**{signed(total.up_delta)}** | {number(total.gpu_hours[0])} | {number(total.gpu_hours[1])} | "
        f"**{signed(total.gpu_delta)}** | |"
    )
    return [*out, "", _size_note(diff), ""]


def _quota_markdown(changes: Sequence[QuotaChange], heading: str) -> list[str]:
    out = [f"{heading} Namespace quotas (`namespaceQuotas`)", "", "| what | before | after |", "|---|---|---|"]
    out += [f"| {_cell(q.subject)} | {_cell(q.before or '(none)')} | {_cell(q.after or '(none)')} |" for q in changes]
    return [*out, ""]


def _namespaces_markdown(diff: PolicyDiff, heading: str) -> list[str]:
    out = [f"{heading} Namespaces whose quota changes", "", f"{read_text(diff)}.", ""]
    if not diff.namespaces:
        return [*out, "None.", ""]
    out += ["| cluster | namespaces | before | after |", "|---|---|---|---|"]
    out += [f"| {n.cluster} | {_cell(names_text(n))} | {_cell(n.before)} | {_cell(n.after)} |" for n in diff.namespaces]
    return [*out, ""]


def _fields_markdown(title: str, changes: Sequence[FieldChange], heading: str) -> list[str]:
    out = [f"{heading} {title[0].upper()}{title[1:]}", "", "| setting | before | after |", "|---|---|---|"]
    out += [
        f"| {_code(c.path)} | {_cell(value_text(c.before, c.unit))} | {_cell(value_text(c.after, c.unit))} |"
        for c in changes
    ]
    return [*out, ""]


def _targets_markdown(diff: PolicyDiff, heading: str) -> list[str]:
    out = [
        f"{heading} Cloud quota targets given in nodes or instances (`cloudQuotas`)",
        "",
        "| quota | account | before | after | change | counted |",
        "|---|---|---:|---:|---:|---|",
    ]
    out += [
        f"| {_code(c.name)} | {_cell(c.where)} | {_cell(target_text(c.before))} | {_cell(target_text(c.after))}"
        f" | {target_delta(c)} | {_cell(target_how(c, diff.quota_targets_read))} |"
        for c in diff.quota_targets
    ]
    return [*out, "", targets_note(diff.quota_targets_read).replace("--cloud-quotas", "`--cloud-quotas`"), ""]


def changes_markdown(diff: PolicyDiff, heading: str = "####") -> list[str]:
    """Every section that changed (the calendar's markdown appends these too, a level lower)."""
    out = schedule_markdown(diff, heading)
    if diff.quota_targets:
        out += _targets_markdown(diff, heading)
    if diff.quotas:
        out += _quota_markdown(diff.quotas, heading)
    if diff.namespaces_read:
        out += _namespaces_markdown(diff, heading)
    for title, changes in _sections(diff):
        out += _fields_markdown(title, changes, heading)
    return out


def to_markdown(diff: PolicyDiff, before: str = "base", after: str = "change") -> str:
    # The base is usually a temporary file (the runner's), so the title names the policy changed.
    out = [f"### What this change to {_code(after)} does (`gpu-jobs diff`)", ""]
    if diff.empty:
        return (
            "\n".join([*out, "No change: the policy does exactly what it did (only comments or layout changed)."])
            + "\n"
        )
    where = f" Cluster {diff.cluster} only." if diff.cluster else ""
    out += [f"Hours per week over {week_text(diff)}.{where}", ""]
    return "\n".join(out + changes_markdown(diff)).rstrip() + "\n"


# --- text ----------------------------------------------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def schedule_text(diff: PolicyDiff) -> list[str]:
    total = diff.totals
    out = [f"node groups: {len(diff.schedules)} of {max(total.groups)} change their hours"]
    if not diff.schedules:
        return out
    rows = [
        ["node group", "before h/wk", "after h/wk", "change", "GPU-h/wk before", "GPU-h/wk after", "change", "cluster"]
    ]
    for c in diff.schedules:
        rows.append(
            [
                c.name + label(c),
                _up(c.before),
                _up(c.after),
                signed(c.up_delta),
                _gpu(c.before),
                _gpu(c.after),
                signed(c.gpu_delta),
                c.cluster,
            ]
        )
    rows.append(
        [
            "all groups",
            number(total.up_hours[0]),
            number(total.up_hours[1]),
            signed(total.up_delta),
            number(total.gpu_hours[0]),
            number(total.gpu_hours[1]),
            signed(total.gpu_delta),
            "",
        ]
    )
    return [*out, *_table(rows, right=(1, 2, 3, 4, 5, 6)), "  " + _size_note(diff)]


def changes_text(diff: PolicyDiff) -> list[str]:
    out = schedule_text(diff)
    if diff.quota_targets:
        out += ["", "cloud quota targets given in nodes or instances:"]
        rows = [["quota", "account", "before", "after", "change", "counted"]]
        rows += [
            [
                c.name,
                c.where,
                target_text(c.before),
                target_text(c.after),
                target_delta(c),
                target_how(c, diff.quota_targets_read),
            ]
            for c in diff.quota_targets
        ]
        out += [
            *_table(rows, right=(2, 3, 4)),
            *textwrap.wrap(targets_note(diff.quota_targets_read), 116, initial_indent="  ", subsequent_indent="  "),
        ]
    if diff.quotas:
        out += ["", "namespace quotas:"]
        out += _table(
            [["what", "before", "after"]]
            + [[q.subject, q.before or "(none)", q.after or "(none)"] for q in diff.quotas]
        )
    if diff.namespaces_read:
        out += ["", f"namespaces whose quota changes ({read_text(diff)}):"]
        rows = [["cluster", "namespaces", "before", "after"]]
        rows += [[n.cluster, names_text(n), n.before, n.after] for n in diff.namespaces]
        out += _table(rows) if diff.namespaces else ["  none"]
    for title, changes in _sections(diff):
        out += ["", f"{title}:"]
        out += _table(
            [["setting", "before", "after"]]
            + [[c.path, value_text(c.before, c.unit), value_text(c.after, c.unit)] for c in changes]
        )
    return out


def to_text(diff: PolicyDiff, before: str = "base", after: str = "change") -> str:
    head = f"gpu-jobs diff {before} -> {after}"
    if diff.empty:
        return f"{head}\nno change: the policy does exactly what it did\n"
    where = f"; cluster {diff.cluster} only" if diff.cluster else ""
    return "\n".join([head, f"hours per week over {week_text(diff)}{where}", "", *changes_text(diff)]) + "\n"


# --- JSON ----------------------------------------------------------------------------------------------------------


def _hours_doc(hours: GroupHours | None) -> dict[str, Any] | None:
    if hours is None:
        return None
    return {"upHoursPerWeek": hours.up_hours, "gpuHoursPerWeek": hours.gpu_hours, "gpusWhileUp": hours.gpus_up}


def _field_doc(change: FieldChange) -> dict[str, Any]:
    return {
        "path": change.path,
        "kind": change.kind,
        "before": None if change.before is MISSING else change.before,
        "after": None if change.after is MISSING else change.after,
        **({"unit": change.unit} if change.unit else {}),
    }


def to_doc(diff: PolicyDiff) -> dict[str, Any]:
    total = diff.totals
    return {
        "week": {
            "start": diff.week.start.isoformat(),
            "end": diff.week.end.isoformat(),
            "overridesCounted": diff.week.with_overrides,
        },
        "cluster": diff.cluster,
        "empty": diff.empty,
        "nodeGroups": [
            {
                "name": c.name,
                "cluster": c.cluster,
                "before": _hours_doc(c.before),
                "after": _hours_doc(c.after),
                "upHoursDelta": c.up_delta,
                "gpuHoursDelta": c.gpu_delta,
            }
            for c in diff.schedules
        ],
        "totals": {
            "groups": list(total.groups),
            "upHoursPerWeek": list(total.up_hours),
            "gpuHoursPerWeek": list(total.gpu_hours),
            "groupsWithoutSize": list(total.without_size),
            "upHoursDelta": total.up_delta,
            "gpuHoursDelta": total.gpu_delta,
        },
        "nodeGroupFields": [_field_doc(c) for c in diff.node_group_fields],
        "namespaceQuotas": [
            {"subject": q.subject, "kind": q.kind, "before": q.before, "after": q.after} for q in diff.quotas
        ],
        "sections": {s.name: [_field_doc(c) for c in s.changes] for s in diff.sections},
        "namespaces": [
            {"cluster": n.cluster, "before": n.before, "after": n.after, "namespaces": list(n.namespaces)}
            for n in diff.namespaces
        ],
        "namespacesRead": dict(diff.namespaces_read),
        "cloudQuotaTargets": [
            {
                "name": c.name,
                "account": c.where,
                "before": _target_doc(c.before),
                "after": _target_doc(c.after),
                "delta": c.delta,
            }
            for c in diff.quota_targets
        ],
        "cloudQuotaTargetsRead": diff.quota_targets_read,
    }


def _target_doc(side: DerivedTarget | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {
        "nodeGroupsUpMax": dict(side.nodes),  # null: the group's live max size counts
        "instances": {"shape": side.instances[0], "count": side.instances[1]} if side.instances else None,
        "value": side.value,
        "unit": side.unit,
        "demand": side.demand,
        "error": side.error,
        "max": side.max,
    }


def to_json(diff: PolicyDiff, before: str = "base", after: str = "change") -> str:
    """One line: a log collector reads one record per line."""
    return json.dumps({"base": before, "change": after, **to_doc(diff)}, separators=(",", ":")) + "\n"
