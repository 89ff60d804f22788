"""Notifications built from a run's report (``jobs.notify``): which items are announced, one message per owner and
cluster, the nobody's message, the Slack-compatible body, retries within a budget, and failures reported, never
raised."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from jobs.core.policy_notify import Notify
from jobs.deadline import Deadline
from jobs.envelope import ItemResult, ScopeResult
from jobs.errors import Invalid, NotFound, Throttled, Unavailable
from jobs.notify import (
    INSTANCE_MARK,
    NO_OWNER,
    POD_MARK,
    STOPPED,
    WAKE,
    WARNING,
    Delivery,
    Message,
    Notice,
    Ports,
    deliver,
    messages,
    notices,
    notify,
    owners_of,
)
from jobs.retry import Backoff
from jobs.scopes import Scope, account, cluster
from tests.fakes import RecordingLog

AT = datetime(2026, 12, 1, 18, 40, tzinfo=UTC)  # any instant: nothing here reads the clock
PROD, LAB = cluster("ml-prod"), cluster("lab")
SECTION = Notify.model_validate(
    {"webhook": {"secretRef": {"name": "gpu-jobs-notify", "key": "url"}}, "owner": {"namespaceLabel": "owner"}}
)


def warning(ns: str, pod: str, status: str = "applied") -> ItemResult:
    detail = {"cluster": "ml-prod", "nodeGroup": "train", "namespace": ns, "pod": pod}
    return ItemResult("warning", f"{ns}/{pod}", status, f"train goes down at 20:00 ({pod})", True, detail)  # type: ignore[arg-type]


def sweep_pod(ns: str, pod: str, state: str, status: str = "applied") -> ItemResult:
    detail = {"cluster": "ml-prod", "namespace": ns, "pod": pod, "state": state, "action": "delete"}
    return ItemResult("pod", f"{ns}/{pod}", status, f"idle: delete after 21:10 ({pod})", True, detail)  # type: ignore[arg-type]


def result(scope: Scope, *items: ItemResult, dry_run: bool = False) -> ScopeResult:
    return ScopeResult("nodegroups", scope, AT, dry_run, "applied", items=items)


class Labels:
    """Namespaces by name, as a cluster's API holds them; ``down`` makes every read fail."""

    def __init__(self, labels: Mapping[str, Mapping[str, str]], down: bool = False) -> None:
        self.known, self.down, self.reads = labels, down, 0

    def labels(self, name: str) -> Mapping[str, str] | None:
        self.reads += 1
        if self.down:
            raise Unavailable("the API is down", operation="get namespaces")
        return self.known.get(name)


class Receiver:
    """A webhook that fails with ``errors`` in turn, then takes every message."""

    def __init__(self, *errors: Exception) -> None:
        self.errors, self.posted, self.attempts = list(errors), [], 0

    def post(self, payload: Mapping[str, Any]) -> None:
        self.attempts += 1
        if self.errors:
            raise self.errors.pop(0)
        self.posted.append(dict(payload))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def backoff(clock: Clock, deadline_s: float = 30.0) -> Backoff:
    return Backoff(deadline_s=deadline_s, base_s=0.5, cap_s=4.0, clock=clock)


# --- which items are announced ------------------------------------------------------------------------------------


def test_only_announcements_really_written_are_sent() -> None:
    items = (
        warning("team-a", "train-0"),
        warning("team-a", "train-1", status="skipped"),  # its Event could not be written: nobody was told
        warning("team-b", "nb-0", status="planned"),
        ItemResult(
            "wake", "team-c/job-0", "applied", "waking train: 1 node", True, {"namespace": "team-c", "pod": "job-0"}
        ),
        sweep_pod("team-a", "idle-0", "marked"),
        sweep_pod("team-a", "idle-1", "acted"),  # the act itself was announced by its mark before
        sweep_pod("team-a", "snoozed-0", "snoozed"),  # a capped snooze is a write, not an announcement
        ItemResult("node group", "train", "applied", "3 -> 0", True, {"cluster": "ml-prod"}),
    )
    found = notices([result(PROD, *items)])
    assert [(n.kind, n.name) for n in found] == [
        (WARNING, "team-a/train-0"),
        (WAKE, "team-c/job-0"),
        (POD_MARK, "team-a/idle-0"),
    ]
    assert found[0] == Notice(
        WARNING, PROD, "team-a/train-0", "team-a", "train-0", "train goes down at 20:00 (train-0)"
    )


def test_a_dry_run_announces_nothing() -> None:
    assert notices([result(PROD, warning("team-a", "train-0"), dry_run=True)]) == []


def test_an_instance_mark_has_no_namespace_and_goes_to_its_accounts_nobody() -> None:
    scope = account("gcp", "ml-research")
    path = "projects/ml-research/zones/europe-west4-a/instances/old-t4"
    item = ItemResult("instance", path, "applied", "missing team: stop after 21:00", True, {"state": "marked"})
    (found,) = notices([ScopeResult("sweep", scope, AT, False, "applied", items=(item,))])
    assert (found.kind, found.namespace, found.pod, found.scope) == (INSTANCE_MARK, None, None, scope)
    (message,) = messages([found], {})
    body = message.payload()
    assert (body["owner"], body["cluster"], body["account"], body["items"][0]["name"]) == (
        None,
        None,
        "gcp/ml-research",
        path,
    )
    assert body["text"] == (
        "gpu-jobs on account gcp/ml-research, no owner (an instance has no namespace): 1 notice\n"
        "- instance marked: old-t4: missing team: stop after 21:00"
    )


# --- owners and messages ------------------------------------------------------------------------------------------


def test_one_message_per_owner_and_cluster_and_the_nobodys_last() -> None:
    found = notices(
        [
            result(
                PROD,
                warning("team-a", "a-0"),
                warning("team-x", "x-0"),  # no owner label
                warning("team-b", "b-0"),
                warning("team-a2", "a2-0"),  # alice owns two namespaces: one message
            ),
            result(LAB, warning("team-a", "lab-0")),  # alice in another cluster: that cluster's own message
        ]
    )
    owners = {
        (PROD, "team-a"): "alice",
        (PROD, "team-a2"): "alice",
        (PROD, "team-b"): "bob",
        (PROD, "team-x"): None,
        (LAB, "team-a"): "alice",
    }
    made = messages(found, owners)
    assert [(m.scope.name, m.owner, [n.pod for n in m.notices]) for m in made] == [
        ("ml-prod", "alice", ["a-0", "a2-0"]),
        ("ml-prod", "bob", ["b-0"]),
        ("lab", "alice", ["lab-0"]),
        ("ml-prod", None, ["x-0"]),
    ]


def test_the_body_is_slack_text_with_structured_fields() -> None:
    (n,) = notices([result(PROD, warning("team-a", "train-0"))])
    body = Message("alice", PROD, (n,)).payload()
    assert body == {
        "text": "gpu-jobs on cluster ml-prod, for alice: 1 notice\n"
        "- shutdown warning: team-a/train-0: train goes down at 20:00 (train-0)",
        "owner": "alice",
        "cluster": "ml-prod",
        "items": [
            {
                "kind": "shutdown warning",
                "name": "team-a/train-0",
                "namespace": "team-a",
                "pod": "train-0",
                "reason": "train goes down at 20:00 (train-0)",
            }
        ],
    }
    nobody = Message(None, PROD, (n,)).payload()
    assert nobody["owner"] is None
    assert nobody["text"].startswith(f"gpu-jobs on cluster ml-prod, {NO_OWNER} (namespace without the owner label)")


def test_the_text_escapes_what_slack_would_read_as_a_link() -> None:
    item = ItemResult("wake", "ml/job-0", "applied", "keep it: gpu-jobs/keep-up-until=<RFC 3339> & more", True, {})
    (n,) = notices([result(PROD, item)])
    body = Message("alice", PROD, (n,)).payload()
    assert body["text"].endswith("keep it: gpu-jobs/keep-up-until=&lt;RFC 3339&gt; &amp; more")
    assert body["items"][0]["reason"] == "keep it: gpu-jobs/keep-up-until=<RFC 3339> & more"  # the fields as said


def test_a_long_message_lists_twenty_items_in_its_text_and_all_in_its_fields() -> None:
    found = notices([result(PROD, *(warning("team-a", f"p-{i}") for i in range(25)))])
    body = Message("alice", PROD, tuple(found)).payload()
    assert body["text"].splitlines()[-1] == "- and 5 more"
    assert len(body["text"].splitlines()) == 1 + 20 + 1
    assert len(body["items"]) == 25


def test_owners_are_read_once_per_namespace_and_an_unreadable_one_goes_to_nobody() -> None:
    found = notices([result(PROD, warning("team-a", "a-0"), warning("team-a", "a-1"), warning("gone", "g-0"))])
    prod = Labels({"team-a": {"owner": " alice "}, "team-b": {"owner": "bob"}})
    owners, problems = owners_of(found, SECTION, lambda scope: prod)
    assert owners == {(PROD, "team-a"): "alice", (PROD, "gone"): None}
    assert (prod.reads, problems) == (2, [])

    down = Labels({}, down=True)
    owners, problems = owners_of(found, SECTION, lambda scope: down)
    assert owners == {(PROD, "team-a"): None, (PROD, "gone"): None}
    assert [p for _, p in problems] == [
        "the owner of namespace team-a is not known (the API is down): sent as no owner",
        "the owner of namespace gone is not known (the API is down): sent as no owner",
    ]


# --- delivery -----------------------------------------------------------------------------------------------------


def one_message() -> Message:
    return Message("alice", PROD, tuple(notices([result(PROD, warning("team-a", "train-0"))])))


@pytest.mark.parametrize(
    "errors",
    [
        [Throttled("HTTP 429", retry_after_s=1.0)],
        [Unavailable("HTTP 500"), Unavailable("timed out")],
    ],
)
def test_a_message_is_retried_after_429_5xx_and_timeouts(errors: list[Exception]) -> None:
    clock, hook, log = Clock(), Receiver(*errors), RecordingLog()
    (done,) = deliver([one_message()], lambda: hook, backoff(clock), log, sleep=clock.sleep)
    assert (done.error, done.attempts, len(hook.posted)) == (None, len(errors) + 1, 1)
    assert log.names == ["notify.retry"] * len(errors) + ["notify.sent"]
    if isinstance(errors[0], Throttled):
        assert clock.now >= 1.0  # waited at least what the receiver asked (Retry-After)


def test_a_refusal_is_not_retried_and_the_next_message_is_still_sent() -> None:
    clock, hook, log = Clock(), Receiver(Invalid("HTTP 400: invalid_payload")), RecordingLog()
    first, second = deliver([one_message(), one_message()], lambda: hook, backoff(clock), log, sleep=clock.sleep)
    assert (first.error, first.attempts) == ("HTTP 400: invalid_payload", 1)
    assert (second.error, len(hook.posted)) == (None, 1)


def test_a_receiver_that_stays_down_fails_within_the_budget_and_is_not_tried_again() -> None:
    clock, log = Clock(), RecordingLog()
    hook = Receiver(*[Unavailable("HTTP 503") for _ in range(1000)])
    done = deliver([one_message()] * 3, lambda: hook, backoff(clock, 600), log, budget_s=10.0, sleep=clock.sleep)
    assert [d.error for d in done] == ["HTTP 503", *["not sent: the webhook is down (HTTP 503)"] * 2]
    assert clock.now <= 10.0  # no wait is started that would end past the budget
    assert hook.attempts == done[0].attempts > 1  # the first retried to the end; the others not tried
    assert log.names.count("notify.failed") == 3


def test_no_message_starts_when_the_runs_deadline_is_at_its_end() -> None:
    clock, hook, log = Clock(), Receiver(), RecordingLog()
    run = Deadline.start(10.0, clock)
    clock.now = 9.5
    (done,) = deliver([one_message()], lambda: hook, replace(backoff(clock), run=run), log, sleep=clock.sleep)
    assert (done.error, hook.attempts) == ("not sent: the run's deadline of 10 s ran out", 0)


def test_a_stop_request_ends_the_retries_and_sends_nothing_more() -> None:
    clock, log = Clock(), RecordingLog()
    asked: list[bool] = []
    hook = Receiver(Unavailable("HTTP 503"))

    def sleep(seconds: float) -> None:  # SIGTERM arrives while the first message waits to be retried
        clock.sleep(seconds)
        asked.append(True)

    done = deliver(
        [one_message(), one_message()], lambda: hook, backoff(clock), log, sleep=sleep, stopped=lambda: bool(asked)
    )
    assert [(d.error, d.attempts) for d in done] == [(STOPPED, 1), (STOPPED, 0)]
    assert hook.attempts == 1


def test_no_webhook_fails_every_message_with_the_reason() -> None:
    def missing() -> Receiver:
        raise NotFound("Secret gpu-jobs/gpu-jobs-notify has no key url")

    log = RecordingLog()
    done = deliver([one_message()], missing, backoff(Clock()), log)
    assert done == [Delivery(one_message(), "no webhook: Secret gpu-jobs/gpu-jobs-notify has no key url")]


def test_notify_reports_failures_as_scope_warnings_and_changes_nothing_else() -> None:
    results = [result(PROD, warning("team-a", "a-0"), warning("team-b", "b-0")), result(LAB)]
    hook = Receiver(Invalid("HTTP 400"))
    ports = Ports(lambda scope: Labels({"team-a": {"owner": "alice"}, "team-b": {"owner": "bob"}}), lambda: hook)
    clock = Clock()
    done = notify(results, SECTION, lambda: ports, backoff(clock), RecordingLog())
    assert done[0].warnings == ("notification to alice (1 item) not delivered: HTTP 400",)
    assert [p["owner"] for p in hook.posted] == ["bob"]
    assert done[1] == results[1]
    assert [r.items for r in done] == [r.items for r in results]


def test_nothing_is_wired_without_a_section_or_an_announcement() -> None:
    def never() -> Ports:
        raise AssertionError("nothing to send: nothing is read")

    quiet = [result(PROD, warning("team-a", "a-0", status="skipped"))]
    assert notify(quiet, SECTION, never, backoff(Clock()), RecordingLog()) == quiet
    loud = [result(PROD, warning("team-a", "a-0"))]
    assert notify(loud, None, never, backoff(Clock()), RecordingLog()) == loud
