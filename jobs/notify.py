"""Notifications: after a run, what it announced to people (a shutdown warning, a wake, a sweep mark on a pod or an
instance) is also sent to the policy's webhook, as one Slack-compatible JSON message per owner and cluster.

Built from the run's one report (``jobs.envelope``), once, after every job's run, so no job has code of its own for
it. Only items really written are sent (status ``applied``): a dry run sends nothing, and since each announcement is
written once (its Event or mark exists after), a second run with nothing new sends nothing.

The owner of an item is the value of the label ``notify.owner.namespaceLabel`` on its namespace, in the cluster the
item was read from. Items whose namespace has no such label, or could not be read, and instances (no namespace) go
in one message per cluster marked "no owner": never dropped, never merged into another owner's message.

A notification is a courtesy on top of the work, like an Event: it never blocks or fails the run. Each message is
retried with backoff on 429, 5xx and timeouts, within one budget for all of a run's messages and the run's
deadline; once a message was retried to the end, the receiver is taken to be down and the others are not tried.
One that is not delivered is a warning line of its scope in the report and a ``notify.failed`` log event. The exit
code is the work's. The webhook's URL is a credential: it is never logged nor reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from jobs.core.policy_notify import Notify
from jobs.envelope import ItemResult, ScopeResult
from jobs.errors import CloudError, DeadlineReached, Stopped
from jobs.retry import Backoff
from jobs.scopes import Scope

#: What each announcing item is called in a message, by the item's kind (a sweep item only when it is a mark).
WARNING, WAKE, POD_MARK, INSTANCE_MARK = "shutdown warning", "wake", "idle pod marked", "instance marked"
#: The owner label's value in a message for items nobody owns.
NO_OWNER = "no owner"
#: The longest a message's text lists items one by one; the structured ``items`` keep them all.
TEXT_ITEMS = 20
#: A message not sent because the run was asked to stop (SIGTERM): it ends with its report, not its notifications.
STOPPED = "not sent: the run was asked to stop"
#: No message is started with less of the run's deadline left: its report comes first.
MIN_LEFT_S = 1.0
#: How long all of a run's notifications may take together, retries included (and never past the run's deadline).
NOTIFY_BUDGET_S = 30.0


@dataclass(frozen=True)
class Notice:
    """One announcement of the run, as a message lists it."""

    kind: str  # WARNING, WAKE, POD_MARK, INSTANCE_MARK
    scope: Scope
    name: str  # the item's name in the report ("team-a/train-0", an instance id)
    namespace: str | None
    pod: str | None
    reason: str | None  # what the person reads: the Event's message, the mark's reason

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "pod": self.pod,
            "reason": self.reason,
        }


def _kind(item: ItemResult) -> str | None:
    """What the item announces, or None when it announces nothing (a change, a skip, an act already announced)."""
    if item.kind == "warning":
        return WARNING
    if item.kind == "wake":
        return WAKE
    if item.detail.get("state") == "marked":  # the sweep's mark: the act comes after the grace period
        return {"pod": POD_MARK, "instance": INSTANCE_MARK}.get(item.kind)
    return None


def notices(results: Iterable[ScopeResult]) -> list[Notice]:
    """The run's announcements really written, in report order: never a dry run's, never one not applied."""
    found = []
    for result in results:
        if result.dry_run:
            continue
        for item in result.items:
            kind = _kind(item)
            if kind is None or item.status != "applied":
                continue
            namespace, pod = item.detail.get("namespace"), item.detail.get("pod")
            found.append(
                Notice(
                    kind,
                    result.scope,
                    item.name,
                    str(namespace) if namespace else None,
                    str(pod) if pod else None,
                    item.reason,
                )
            )
    return found


# --- owners and messages (pure) -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One message: one owner's (None: nobody's) announcements in one scope."""

    owner: str | None
    scope: Scope
    notices: tuple[Notice, ...]

    def text(self) -> str:
        """What Slack shows: who it is for, where, and each item with its reason."""
        where = f"cluster {self.scope.name}" if self.scope.kind == "cluster" else f"account {self.scope.name}"
        why = "namespace without the owner label" if self.scope.kind == "cluster" else "an instance has no namespace"
        who = f"for {self.owner}" if self.owner is not None else f"{NO_OWNER} ({why})"
        count = len(self.notices)
        lines = [f"gpu-jobs on {where}, {who}: {count} notice{'' if count == 1 else 's'}"]
        for n in self.notices[:TEXT_ITEMS]:
            # A GCP or Azure instance id is a resource path: its last part is what a person calls it.
            name = n.name.rsplit("/", 1)[-1] if n.kind == INSTANCE_MARK else n.name
            lines.append(f"- {n.kind}: {name}: {n.reason or ''}".rstrip(": "))
        if count > TEXT_ITEMS:
            lines.append(f"- and {count - TEXT_ITEMS} more")
        return _slack_escaped("\n".join(lines))

    def payload(self) -> dict[str, Any]:
        """The JSON body: Slack reads ``text``; a tool reads the rest (``owner`` null: nobody's)."""
        cluster = self.scope.name if self.scope.kind == "cluster" else None
        account = self.scope.name if self.scope.kind == "account" else None
        return {
            "text": self.text(),
            "owner": self.owner,
            "cluster": cluster,
            **({"account": account} if account else {}),
            "items": [n.to_json() for n in self.notices],
        }

    def describe(self) -> str:
        """The message in a report line or a log event (never the URL)."""
        who = self.owner if self.owner is not None else NO_OWNER
        return f"{who} ({len(self.notices)} item{'' if len(self.notices) == 1 else 's'})"


def _slack_escaped(text: str) -> str:
    """Slack reads ``<...>`` as a link or a mention (``keep-alive-until=<RFC 3339>`` would vanish) and ``&`` as an
    entity: its three control characters are escaped, as its message formatting asks."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def messages(found: Sequence[Notice], owners: Mapping[tuple[Scope, str], str | None]) -> list[Message]:
    """One message per (scope, owner), in the order owners first appear; the nobody's message last in its scope.
    ``owners`` maps (scope, namespace) to the owner label's value (None: no label, or not known)."""
    grouped: dict[tuple[Scope, str | None], list[Notice]] = {}
    for n in found:
        owner = owners.get((n.scope, n.namespace)) if n.namespace else None
        grouped.setdefault((n.scope, owner), []).append(n)
    keys = sorted(grouped, key=lambda k: k[1] is None)  # stable: first-seen order within owned and nobody's
    return [Message(owner, scope, tuple(grouped[(scope, owner)])) for scope, owner in keys]


# --- the ports ----------------------------------------------------------------------------------------------------


class Namespaces(Protocol):
    """A cluster's namespaces, read through that cluster's own API."""

    def labels(self, name: str) -> Mapping[str, str] | None:
        """The namespace's labels; None when it does not exist. Raises :class:`CloudError`."""
        ...


class Webhook(Protocol):
    def post(self, payload: Mapping[str, Any]) -> None:
        """Send one message. Raises :class:`CloudError` (Throttled, Unavailable: retryable)."""
        ...


@dataclass(frozen=True)
class Ports:
    #: The scope's namespaces (a cluster's API, made on first use: a run with nothing to send reads nothing).
    namespaces: Callable[[Scope], Namespaces]
    #: The webhook; raises :class:`CloudError` when there is none (its Secret cannot be read): every message then
    #: fails with that reason.
    webhook: Callable[[], Webhook]


# --- one run's notifications ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    message: Message
    error: str | None = None  # None: delivered
    attempts: int = 0


def owners_of(
    found: Sequence[Notice], section: Notify, namespaces: Callable[[Scope], Namespaces]
) -> tuple[dict[tuple[Scope, str], str | None], list[tuple[Scope, str]]]:
    """Each (scope, namespace)'s owner, and the warnings of namespaces that could not be read (their items go to the
    nobody's message: a notice is never lost for want of its owner)."""
    label = section.owner.namespace_label
    owners: dict[tuple[Scope, str], str | None] = {}
    problems: list[tuple[Scope, str]] = []
    wanted = list(dict.fromkeys((n.scope, n.namespace) for n in found if n.namespace))
    ports: dict[Scope, Namespaces] = {}
    for scope, namespace in wanted:
        try:
            port = ports.get(scope) or ports.setdefault(scope, namespaces(scope))
            labels = port.labels(namespace)
        except CloudError as exc:
            owners[(scope, namespace)] = None
            problems.append((scope, f"the owner of namespace {namespace} is not known ({exc}): sent as {NO_OWNER}"))
            continue
        value = (labels or {}).get(label, "").strip()
        owners[(scope, namespace)] = value or None
    return owners, problems


def deliver(
    found: Sequence[Message],
    webhook: Callable[[], Webhook],
    backoff: Backoff,
    log: Any,
    *,
    budget_s: float = NOTIFY_BUDGET_S,
    sleep: Callable[[float], None] = time.sleep,
    stopped: Callable[[], bool] = lambda: False,
) -> list[Delivery]:
    """Post each message, retrying what is worth retrying, all within ``budget_s`` (and the run's deadline, which
    ``backoff`` carries). A message not delivered is reported; the others are still tried, unless the receiver is
    down or the run was asked to stop (``stopped``: SIGTERM; its report and exit come first)."""
    if not found:
        return []
    try:
        hook = webhook()
    except CloudError as exc:
        why = f"no webhook: {exc}"
        for m in found:
            log.error("notify.failed", owner=m.owner, scope=m.scope.name, items=len(m.notices), error=why)
        return [Delivery(m, why) for m in found]
    started = backoff.clock()
    done = []
    down: str | None = None  # why the receiver is taken to be down: a message retried to the end, never answered
    for m in found:
        left = budget_s - (backoff.clock() - started)
        attempts = 0

        def post(m: Message = m) -> None:
            nonlocal attempts
            if stopped():  # asked to stop while waiting to retry
                raise Stopped(STOPPED)
            attempts += 1
            hook.post(m.payload())

        def retrying(exc: CloudError, delay: float, m: Message = m) -> None:
            log.warning("notify.retry", owner=m.owner, scope=m.scope.name, error=str(exc), delay_s=round(delay, 2))

        error: str | None = None
        run = backoff.run
        if stopped():
            error = STOPPED
        elif down is not None:  # not another full round of retries per message: one down receiver costs one
            error = f"not sent: the webhook is down ({down})"
        elif left <= 0:
            error = f"not sent: the notifications' {budget_s:g} s ran out"
        elif run is not None and run.left_to_end() <= MIN_LEFT_S:  # the report must still be printed
            error = f"not sent: the run's deadline of {run.seconds:g} s ran out"
        else:
            try:
                replace(backoff, deadline_s=min(backoff.deadline_s, left)).call(post, sleep=sleep, on_retry=retrying)
            except Stopped:
                error = STOPPED
            except (CloudError, DeadlineReached) as exc:
                error = str(exc)
                if isinstance(exc, DeadlineReached) or exc.retryable:
                    down = error
        if error is None:
            log.info("notify.sent", owner=m.owner, scope=m.scope.name, items=len(m.notices), attempts=attempts)
        else:
            log.error(
                "notify.failed", owner=m.owner, scope=m.scope.name, items=len(m.notices), attempts=attempts, error=error
            )
        done.append(Delivery(m, error, attempts))
    return done


def notify(
    results: Sequence[ScopeResult],
    section: Notify | None,
    ports: Callable[[], Ports],
    backoff: Backoff,
    log: Any,
    *,
    sleep: Callable[[float], None] = time.sleep,
    stopped: Callable[[], bool] = lambda: False,
) -> list[ScopeResult]:
    """The run's notifications (none without ``section``, in a dry run, or with nothing announced), and the results
    with a warning line in each scope where one was not delivered or an owner was not known."""
    if section is None:
        return list(results)
    found = notices(results)
    if not found:
        return list(results)
    wired = ports()
    owners, problems = owners_of(found, section, wired.namespaces)
    deliveries = deliver(messages(found, owners), wired.webhook, backoff, log, sleep=sleep, stopped=stopped)
    for scope, problem in problems:
        log.warning("notify.owner_unknown", scope=scope.name, message=problem)
    warnings: dict[Scope, list[str]] = {}
    for scope, problem in problems:
        warnings.setdefault(scope, []).append(f"notification: {problem}")
    for d in deliveries:
        if d.error is not None:
            line = f"notification to {d.message.describe()} not delivered: {d.error}"
            warnings.setdefault(d.message.scope, []).append(line)
    return [replace(r, warnings=(*r.warnings, *warnings.get(r.scope, ()))) for r in results]
