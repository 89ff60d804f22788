"""The sweep's instances part on one account (``jobs.sweep.instances.SweepInstancesWork``) through the real runner, with
the cloud faked at the ``Instances`` Protocol (an account in memory that applies the writes it is sent) and the
Lease in memory: the grace cycle, the limit counting actions only, idempotent resends, the look-again under the
Lease, and the report rows and lines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from jobs import envelope
from jobs.core.limits import ChangeLimit
from jobs.core.policy_sweep import InstanceAction, UntaggedInstances
from jobs.core.untagged import GpuInstance
from jobs.errors import CloudError, Conflict, NotFound, Throttled, Unavailable
from jobs.labels import SWEEP_MARK_TAG
from jobs.outcome import Outcome
from jobs.retry import Backoff
from jobs.runner import Reconcile, RunSettings, Tally
from jobs.scopes import account
from jobs.sweep.instances import InstanceReport, Ports, SweepInstancesWork, extra_scopes, report_of
from jobs.sweep.report import instances_result
from tests.unit.test_runner import Log, MemoryLease

NOW = datetime(2026, 12, 2, 14, 5, tzinfo=UTC)  # a Wednesday afternoon
SCOPE = account("aws", "us-east-1")


@dataclass
class Account:
    """GPU instances of one account, in memory; ``fail`` maps an operation to the errors its next calls raise."""

    instances: dict[str, GpuInstance]
    fail: dict[str, list[CloudError]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    #: What changes between the first list and the one under the Lease (a person tags an instance meanwhile).
    between: dict[str, GpuInstance] = field(default_factory=dict)

    def _call(self, what: str) -> None:
        self.calls.append(what)
        errors = self.fail.get(what.split(maxsplit=1)[0], [])
        if errors:
            raise errors.pop(0)

    def gpu_instances(self, account: str) -> list[GpuInstance]:
        self._call(f"list {account}")
        listed = list(self.instances.values())
        self.instances.update(self.between)
        self.between = {}
        return listed

    def set_tags(self, instance: GpuInstance, changes: Mapping[str, str | None]) -> None:
        self._call(f"tags {instance.id}")
        current = self.instances.get(instance.id)
        if current is None:
            raise NotFound(f"{instance.id} not found")
        tags = {**current.tags, **{k: v for k, v in changes.items() if v is not None}}
        for key in [k for k, v in changes.items() if v is None]:
            tags.pop(key, None)
        self.instances[instance.id] = replace(current, tags=tags)

    def act(self, instance: GpuInstance, action: Literal["stop", "terminate"]) -> None:
        self._call(f"{action} {instance.id}")
        if action == "terminate":
            self.instances.pop(instance.id, None)
        else:
            self.instances[instance.id] = replace(self.instances[instance.id], state="stopped")

    def writes(self) -> list[str]:
        return [c for c in self.calls if not c.startswith("list")]


def gpu(name: str, tags: dict[str, str] | None = None, **changes: Any) -> GpuInstance:
    base = GpuInstance("aws", "us-east-1", f"i-{name}", name, "us-east-1a", "g5.12xlarge", 4, "running", tags or {})
    return replace(base, **changes)


def world(*instances: GpuInstance) -> Account:
    return Account({i.id: i for i in instances})


def section(action: InstanceAction = "stop") -> UntaggedInstances:
    return UntaggedInstances.model_validate({"requiredTags": ["owner"], "action": action, "gracePeriod": "24h"})


def sweep(
    cloud: Account,
    at: datetime = NOW,
    *,
    action: InstanceAction = "stop",
    dry_run: bool = False,
    limit: str = "10",
    lease: MemoryLease | None = None,
) -> InstanceReport:
    log = Log()
    instant = Backoff(deadline_s=5, base_s=0, cap_s=0)  # full jitter of 0: resent at once
    work = SweepInstancesWork(SCOPE, section(action), at, instant, Ports(cloud, lease or MemoryLease()), log)
    settings = RunSettings(dry_run=dry_run, limit=ChangeLimit.parse(limit), holder="me", clock=lambda: NOW)
    (envelope,) = Reconcile({SCOPE: work}, settings, at, log, "actions").run()
    return report_of(envelope)


def tally(report: InstanceReport) -> Tally:
    return envelope.tally(instances_result(report))


def instance_rows(report: InstanceReport) -> list[dict[str, Any]]:
    """The scope's items of the JSON envelope."""
    items: list[dict[str, Any]] = envelope.document("sweep", [instances_result(report)], Outcome())["items"]
    return items


def instance_lines(report: InstanceReport) -> list[str]:
    return envelope.scope_text(instances_result(report)).splitlines()


def states(report: InstanceReport) -> list[tuple[str, str]]:
    return [(r.plan.instance.id, r.state) for r in report.rows]


def test_the_grace_cycle_marks_waits_then_stops_and_then_writes_nothing() -> None:
    cloud = world(gpu("a"), gpu("b", {"owner": "ana"}))

    first = sweep(cloud)
    assert states(first) == [("i-a", "marked")]
    assert cloud.instances["i-a"].tags == {SWEEP_MARK_TAG: "stop-after-20261203t1405z"}
    assert tally(first) == replace(tally(first), planned=1, applied=1, failed=0)

    cloud.calls.clear()
    waiting = sweep(cloud, NOW + timedelta(hours=23))
    assert (states(waiting), cloud.writes()) == ([("i-a", "marked")], [])

    acted = sweep(cloud, NOW + timedelta(hours=24))
    assert states(acted) == [("i-a", "acted")]
    assert acted.rows[0].message == "stopped: missing owner; stop was due at 2026-12-03 14:05 UTC"
    assert cloud.writes() == ["stop i-a"]
    assert cloud.instances["i-a"].state == "stopped"

    cloud.calls.clear()
    again = sweep(cloud, NOW + timedelta(hours=25))
    assert states(again) == [("i-a", "acted")]  # stopped and still marked: reported, no call
    assert cloud.writes() == []
    assert cloud.calls == ["list us-east-1"]  # no Lease taken either: one list only


def test_terminate_removes_it_and_the_next_run_does_not_see_it() -> None:
    cloud = world(gpu("a", {SWEEP_MARK_TAG: "terminate-after-20261201t0000z"}))
    assert states(sweep(cloud, action="terminate")) == [("i-a", "acted")]
    assert cloud.instances == {}
    assert sweep(cloud, action="terminate").rows == ()


def test_a_tag_added_during_the_grace_clears_the_mark() -> None:
    cloud = world(gpu("a", {SWEEP_MARK_TAG: "stop-after-20261203t1405z", "owner": "ana"}))
    report = sweep(cloud)
    assert states(report) == [("i-a", "cleared")]
    assert cloud.instances["i-a"].tags == {"owner": "ana"}
    assert instance_rows(report)[0]["action"] is None


def test_a_dry_run_and_tag_only_write_nothing_and_members_and_protected_are_never_touched() -> None:
    cloud = world(
        gpu("a", {SWEEP_MARK_TAG: "stop-after-20261201t0000z"}),
        gpu("g", {SWEEP_MARK_TAG: "stop-after-20261201t0000z"}, group="Auto Scaling group batch"),
        gpu("p", {"gpu-jobs/protect": "true"}),
    )
    dry = sweep(cloud, dry_run=True)
    assert states(dry) == [("i-a", "acted"), ("i-g", "member"), ("i-p", "protected")]
    assert cloud.writes() == []
    assert tally(dry).skipped == 2
    assert any("stop (due)" in line for line in instance_lines(dry))

    tag_only = sweep(cloud, action="tag-only")
    # The stop mark is not this policy's action: it is rewritten, and the instance is only marked.
    assert states(tag_only) == [("i-a", "marked"), ("i-g", "member"), ("i-p", "protected")]
    assert cloud.writes() == ["tags i-a"]
    assert cloud.instances["i-a"].tags[SWEEP_MARK_TAG] == "tag-only-after-20261203t1405z"


def test_only_actions_count_against_the_limit() -> None:
    due = {SWEEP_MARK_TAG: "stop-after-20261201t0000z"}
    cloud = world(gpu("a", due), gpu("b", due), gpu("c"), gpu("d"), gpu("e"))
    refused = sweep(cloud, limit="1")  # two stops (marks do not count): refused as a whole
    assert (refused.state, tally(refused).refused, cloud.writes()) == ("refused", True, [])
    assert refused.reason is not None
    assert "the plan changes 2 actions" in refused.reason
    assert any("REFUSED" in line for line in instance_lines(refused))

    fine = sweep(cloud, limit="2")
    assert sorted(cloud.writes()) == ["stop i-a", "stop i-b", "tags i-c", "tags i-d", "tags i-e"]
    assert tally(fine).applied == 5


def test_throttling_and_lost_answers_are_resent_because_every_write_is_idempotent() -> None:
    cloud = world(gpu("a", {SWEEP_MARK_TAG: "stop-after-20261201t0000z"}), gpu("b"))
    cloud.fail = {
        "list": [Throttled("slow down")],
        "stop": [Unavailable("504"), Throttled("slow down")],
        "tags": [Unavailable("connection reset")],
    }
    report = sweep(cloud)
    assert [(r.state, r.failed) for r in report.rows] == [("acted", False), ("marked", False)]
    assert cloud.writes().count("stop i-a") == 3
    assert cloud.instances["i-a"].state == "stopped"
    assert SWEEP_MARK_TAG in cloud.instances["i-b"].tags


def test_a_failed_write_fails_that_item_only_and_the_run() -> None:
    cloud = world(gpu("a"), gpu("b"))
    cloud.fail = {"tags": [Conflict("labelFingerprint is stale")]}
    report = sweep(cloud)
    assert [(r.state, r.failed) for r in report.rows] == [("failed", True), ("marked", False)]
    assert report.rows[0].message == "mark failed: labelFingerprint is stale"
    assert tally(report).failed == 1
    assert instance_rows(report)[0]["state"] == "failed"


def test_an_instance_gone_before_its_write_is_no_failure() -> None:
    cloud = world(gpu("a"))
    cloud.fail = {"tags": [NotFound("InvalidInstanceID.NotFound")]}
    report = sweep(cloud)
    assert (report.rows[0].state, report.rows[0].message, tally(report).failed) == (
        "marked",
        "i-a is gone: nothing to mark",
        0,
    )


def test_under_the_lease_the_instances_are_listed_again_and_judged_as_they_are_now() -> None:
    due = {SWEEP_MARK_TAG: "stop-after-20261201t0000z"}
    cloud = world(gpu("a", due), gpu("b", due))
    cloud.between = {"i-a": gpu("a", {**due, "owner": "ana"})}  # tagged while the run planned
    report = sweep(cloud)
    assert states(report) == [("i-a", "cleared"), ("i-b", "acted")]
    assert sorted(cloud.writes()) == ["stop i-b", "tags i-a"]
    assert cloud.instances["i-a"].state == "running"


def test_an_unreadable_account_fails_the_scope_and_changes_nothing() -> None:
    cloud = world(gpu("a"))
    cloud.fail = {"list": [CloudError("ec2: UnauthorizedOperation")]}
    report = sweep(cloud)
    assert (report.state, report.rows, tally(report).failed) == ("failed", (), 1)
    assert instance_lines(report)[1].startswith("  FAILED: account aws/us-east-1 cannot be read")


def test_another_run_holding_the_lease_does_nothing() -> None:
    cloud = world(gpu("a"))
    report = sweep(cloud, lease=MemoryLease(holder="other-pod", renewed=NOW))
    assert (report.state, report.reason, cloud.writes()) == ("locked", "other-pod", [])


def test_the_json_items_are_the_contract() -> None:
    cloud = world(gpu("a"), gpu("m", group="EKS node group ml/gpu"))
    report = sweep(cloud, dry_run=True)
    assert instance_rows(report) == [
        {
            "kind": "instance",
            "scope": "aws/us-east-1",
            "name": "i-a",
            "status": "planned",
            "reason": "missing owner: stop after 2026-12-03 14:05 UTC unless tagged",
            "cloud": "aws",
            "id": "i-a",
            "account": "us-east-1",
            "type": "g5.12xlarge",
            "gpus": 4,
            "missingTags": ["owner"],
            "state": "marked",
            "action": "stop",
        },
        {
            "kind": "instance",
            "scope": "aws/us-east-1",
            "name": "i-m",
            "status": "skipped",
            "reason": "belongs to EKS node group ml/gpu: never stopped one by one (the group would replace it)",
            "cloud": "aws",
            "id": "i-m",
            "account": "us-east-1",
            "type": "g5.12xlarge",
            "gpus": 4,
            "missingTags": ["owner"],
            "state": "member",
            "action": None,
        },
    ]
    lines = instance_lines(report)
    assert lines[0] == "gpu-jobs sweep in account aws/us-east-1 at 2026-12-02T14:05:00+00:00 (dry run: nothing changed)"
    assert lines[1].split()[:4] == ["i-a", "g5.12xlarge", "4", "GPUs"]


def test_the_sections_scopes_are_account_scopes() -> None:
    extra = UntaggedInstances.model_validate(
        {
            "requiredTags": ["owner"],
            "scopes": [{"cloud": "aws", "regions": ["us-east-1", "eu-west-1"]}, {"cloud": "gcp", "projects": ["ml"]}],
        }
    )
    assert extra_scopes(extra) == (SCOPE, account("aws", "eu-west-1"), account("gcp", "ml"))
    assert extra_scopes(section()) == ()


def azure_vm(name: str, **changes: Any) -> GpuInstance:
    """An Azure VM as the adapter reads it: its id the full resource path (about 150 to 250 characters)."""
    rg = "rg-machine-learning-platform-production-westeurope"
    path = f"/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/{rg}/providers/Microsoft.Compute"
    vm = GpuInstance(
        "azure", "sub", f"{path}/virtualMachines/{name}", name, "westeurope", "Standard_NC24ads_A100_v4", 1, "running"
    )
    return replace(vm, **changes)


def test_the_text_keeps_lines_short_and_says_a_groups_untagged_members_once() -> None:
    """29 untagged VMs of one scale set are one fact (left alone: the group would replace them), with a few names;
    no line is longer than 120 characters (short names in the text, the full resource paths in the JSON)."""
    members = [azure_vm(f"aks-gpu-{i:02d}", group="scale set aks-gpu-31415926-vmss") for i in range(29)]
    alone = azure_vm("notebook-of-someone-with-a-rather-long-virtual-machine-name")
    report = sweep(world(alone, *members), dry_run=True)

    lines = instance_lines(report)
    assert max(len(line) for line in lines) <= 120, "\n".join(lines)
    assert lines[1].split()[:2] == [
        "notebook-of-someone-with-a-rather-long-virtual-machine-name",
        "Standard_NC24ads_A100_v4",
    ]
    text = "\n".join(lines[1:])
    assert "/subscriptions/" not in text
    assert lines[3:] == [
        "  29 instances of scale set aks-gpu-31415926-vmss (Standard_NC24ads_A100_v4, 1 GPU each), missing owner",
        "    left alone (the group would replace one stopped on its own): aks-gpu-00, aks-gpu-01, aks-gpu-02 and 26 more",
    ]
    assert sum("aks-gpu-" in line for line in lines) == 2
    # The JSON keeps every member, by its full id.
    items = instance_rows(report)
    assert sorted((i["name"], i["state"]) for i in items) == sorted(
        [(alone.id, "marked"), *((m.id, "member") for m in members)]
    )
