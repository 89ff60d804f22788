"""``gpu-jobs report``'s figures and renderings: what the clusters' histories measure over a window (``jobs.history``),
priced per group (the policy's ``pricing:``, else the shipped list prices, ``jobs.core.list_prices``), as text for a
terminal, markdown for a weekly post, or one JSON line.

GPU-hours avoided are measured, not planned: the hours a group's nodes were really gone (from the first run that saw
none of them until the run that brought the group back) times the GPUs that would have run (the size recorded
before the shutdown x ``gpusPerNode``, no more nodes than its autoscaler's ``min`` where one was on, none for a
Karpenter pool that consolidates empty nodes: they would have removed the empty nodes by themselves). The figure
is conservative by up to a run's interval at each end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobs.core.list_prices import CURRENCY, LIST_PRICES
from jobs.core.policy import Policy
from jobs.history import GroupSavings, Savings


@dataclass(frozen=True)
class Price:
    gpu_hour: float
    currency: str
    source: str


def price_of(policy: Policy, group: str) -> Price | None:
    """A group's price per GPU-hour: its own, its instance type's in the policy, or the list price of its instance
    type; None when the policy names neither (GPU-hours without money)."""
    pricing = policy.pricing
    given = pricing.node_groups.get(group)
    if given is None:
        return None
    if given.gpu_hour is not None:
        return Price(given.gpu_hour, pricing.currency, f"policy pricing.nodeGroups.{group}.gpuHour")
    kind = given.instance_type or ""
    listed = LIST_PRICES.get(kind)
    if kind in pricing.instance_types:
        try:
            per_node = policy.group(group).gpus_per_node
        except KeyError:
            per_node = None
        gpus = listed.gpus if listed is not None else per_node
        if not gpus:
            return None
        return Price(pricing.instance_types[kind] / gpus, pricing.currency, f"policy pricing.instanceTypes.{kind}")
    if listed is not None:
        return Price(listed.gpu_hour, CURRENCY, listed.source)
    return None


@dataclass(frozen=True)
class ScopeRead:
    """One scope's history as the report read it: its name, and why it could not be read (a failed item)."""

    name: str
    error: str | None = None


@dataclass(frozen=True)
class SavingsReport:
    label: str  # 2026-W49, or "since 7d"
    start: datetime
    end: datetime
    savings: Savings
    prices: dict[str, Price | None]  # by group
    scopes: tuple[ScopeRead, ...] = ()

    @property
    def failed(self) -> int:
        return sum(s.error is not None for s in self.scopes)


def _money(g: GroupSavings, price: Price | None) -> float | None:
    if price is None or g.avoided_gpu_hours is None:
        return None
    return g.avoided_gpu_hours * price.gpu_hour


def totals(report: SavingsReport) -> dict[str, Any]:
    money: dict[str, float] = {}
    for g in report.savings.groups:
        price = report.prices.get(g.group)
        amount = _money(g, price)
        if amount is not None and price is not None:
            money[price.currency] = money.get(price.currency, 0.0) + amount
    groups = report.savings.groups
    return {
        "avoidedGpuHours": round(sum(g.avoided_gpu_hours or 0.0 for g in groups), 2),
        "avoidedNodeHours": round(sum(g.avoided_node_hours for g in groups), 2),
        "keptUpBusyHours": round(sum(g.busy_hours for g in groups), 2),
        "keptUpWakeHours": round(sum(g.wake_hours for g in groups), 2),
        "idleGpuHoursReclaimed": round(report.savings.idle_gpu_hours, 2),
        "money": {currency: round(amount, 2) for currency, amount in sorted(money.items())},
    }


def document(report: SavingsReport) -> dict[str, Any]:
    s = report.savings
    groups = []
    for g in s.groups:
        price = report.prices.get(g.group)
        amount = _money(g, price)
        groups.append(
            {
                "cluster": g.scope,
                "group": g.group,
                "goneHours": round(g.gone_hours, 2),
                "avoidedNodeHours": round(g.avoided_node_hours, 2),
                "avoidedGpuHours": None if g.avoided_gpu_hours is None else round(g.avoided_gpu_hours, 2),
                "keptUpBusyHours": round(g.busy_hours, 2),
                "keptUpWakeHours": round(g.wake_hours, 2),
                "autoscalerFloorNodes": g.floor,
                "price": None
                if price is None
                else {"gpuHour": round(price.gpu_hour, 4), "currency": price.currency, "source": price.source},
                "money": None if amount is None else round(amount, 2),
            }
        )
    return {
        "apiVersion": "gpu-jobs/v1",
        "report": "savings",
        "window": {"label": report.label, "from": report.start.isoformat(), "to": report.end.isoformat()},
        "groups": groups,
        "sweep": {
            "podsActedOn": s.pods,
            "idleGpuHoursReclaimed": round(s.idle_gpu_hours, 2),
            "instancesStopped": s.instances,
            "instanceGpus": s.instance_gpus,
        },
        "shutdowns": s.downs,
        "wakes": s.wakes,
        "total": totals(report),
        "scopes": [
            {"name": r.name, "state": "failed" if r.error else "read", "reason": r.error} for r in report.scopes
        ],
    }


def to_json(report: SavingsReport) -> str:
    return json.dumps(document(report), separators=(",", ":")) + "\n"


def _sources(report: SavingsReport) -> list[str]:
    return sorted({p.source for g in report.savings.groups if (p := report.prices.get(g.group)) is not None})


def _when(at: datetime) -> str:
    return at.strftime("%a %Y-%m-%d %H:%M %Z")


def _amount(value: float | None, price: Price | None, sources: list[str]) -> str:
    if value is None or price is None:
        return "-"
    return f"{value:,.2f} {price.currency} [{sources.index(price.source) + 1}]"


def _gpu_hours(g: GroupSavings, mark: str = "*") -> str:
    if g.avoided_gpu_hours is None:
        return "? (no gpusPerNode)"
    return f"{g.avoided_gpu_hours:,.1f}" + (mark if g.floor is not None else "")


#: The mark beside a figure an autoscaler floor capped, escaped for markdown (a lone * may open emphasis).
ESCAPED_MARK = "\\*"


def _floor_note(report: SavingsReport, mark: str = "*") -> list[str]:
    """What the mark beside a capped figure means, naming the groups and their floors."""
    capped = [
        f"{g.scope}/{g.group} ({g.floor} node{'' if g.floor == 1 else 's'})"
        for g in report.savings.groups
        if g.floor is not None
    ]
    if not capped:
        return []
    return [
        f"{mark} no more nodes than the group's autoscaler keeps once they are empty, which it would have removed"
        f" by itself: {', '.join(capped)}"
    ]


def _money_total(total: dict[str, Any]) -> str:
    return ", ".join(f"{v:,.2f} {c}" for c, v in total["money"].items()) or "-"


def to_text(report: SavingsReport) -> str:
    sources = _sources(report)
    lines = [
        f"gpu-jobs report {report.label}: {_when(report.start)} to {_when(report.end)}, measured from the history",
    ]
    lines += [f"  {r.name}: FAILED: {r.error}" for r in report.scopes if r.error]
    groups = report.savings.groups
    if not groups:
        lines.append("  no node group was down or kept up in this window")
    else:
        width = max(len(f"{g.scope}/{g.group}") for g in groups) + 2
        lines.append(
            f"  {'group':<{width}}{'nodes gone':>11}{'GPU-h avoided':>15}{'kept up busy':>14}{'by wake':>9}  money"
        )
        for g in groups:
            price = report.prices.get(g.group)
            lines.append(
                f"  {g.scope + '/' + g.group:<{width}}{g.gone_hours:>10.1f}h{_gpu_hours(g):>15}"
                f"{g.busy_hours:>13.1f}h{g.wake_hours:>8.1f}h  {_amount(_money(g, price), price, sources)}"
            )
    total = totals(report)
    lines.append(
        f"  total: {total['avoidedGpuHours']:,.1f} GPU-hours avoided ({_money_total(total)}),"
        f" {total['keptUpBusyHours']:,.1f} h kept up for busy work, {total['keptUpWakeHours']:,.1f} h by wakes"
    )
    s = report.savings
    lines.append(
        f"  sweep: {s.pods} idle pod{'s' if s.pods != 1 else ''} deleted or scaled down, at least"
        f" {s.idle_gpu_hours:,.1f} idle GPU-hours ended; {s.instances} instance{'s' if s.instances != 1 else ''}"
        f" stopped ({s.instance_gpus} GPUs)"
    )
    lines += [f"  {note}" for note in _floor_note(report)]
    lines += [f"  [{n}] {source}" for n, source in enumerate(sources, 1)]
    return "\n".join(lines) + "\n"


def to_markdown(report: SavingsReport) -> str:
    """A weekly post: a heading, the table, the totals, the prices' sources."""
    sources = _sources(report)
    total = totals(report)
    lines = [
        f"### GPU savings {report.label}",
        "",
        f"**{total['avoidedGpuHours']:,.1f} GPU-hours avoided** ({_money_total(total)}), measured from the clusters'"
        f" history from {_when(report.start)} to {_when(report.end)}.",
        "",
    ]
    lines += [f"> **{r.name}: not read**: {r.error}" for r in report.scopes if r.error]
    if report.savings.groups:
        lines += [
            "| cluster | group | nodes gone (h) | GPU-hours avoided | kept up, busy (h) | by wakes (h) | money |",
            "|---|---|--:|--:|--:|--:|--:|",
        ]
        for g in report.savings.groups:
            price = report.prices.get(g.group)
            lines.append(
                f"| {g.scope} | {g.group} | {g.gone_hours:.1f} | {_gpu_hours(g, ESCAPED_MARK)} | {g.busy_hours:.1f} |"
                f" {g.wake_hours:.1f} | {_amount(_money(g, price), price, sources)} |"
            )
        lines.append("")
    s = report.savings
    lines.append(
        f"The sweep deleted or scaled down {s.pods} idle pods (at least {s.idle_gpu_hours:,.1f} idle GPU-hours ended)"
        f" and stopped {s.instances} untagged instances ({s.instance_gpus} GPUs)."
    )
    notes = [f"{note}  " for note in _floor_note(report, ESCAPED_MARK)]
    if notes or sources:
        lines += ["", *notes, *[f"[{n}] {source}  " for n, source in enumerate(sources, 1)]]
    return "\n".join(lines) + "\n"


def build(
    label: str,
    start: datetime,
    end: datetime,
    savings: Savings,
    policy: Policy,
    scopes: Sequence[ScopeRead],
) -> SavingsReport:
    prices = {g.group: price_of(policy, g.group) for g in savings.groups}
    return SavingsReport(label, start, end, savings, prices, tuple(scopes))
