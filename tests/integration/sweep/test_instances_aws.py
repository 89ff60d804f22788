"""The sweep's instances part on AWS: ``AwsInstances`` through the real boto3 against the AWS emulator (moto's EC2
behind the wire layer with its faults), driven by ``SweepInstancesWork`` and the real runner, the Lease in memory.

GPU detection by EC2's type data, the grace cycle (marked, cleared, stopped, terminated), group members and
protected instances reported and never touched, a second run that writes nothing, throttling / 5xx / timeouts /
lost answers resent, and the calls made equal to the module's ``PERMISSIONS`` and within the IAM document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import pytest

from jobs.adapters.aws import instances as aws_instances
from jobs.adapters.aws.instances import PERMISSIONS, AwsInstances
from jobs.adapters.settings import AdapterSettings
from jobs.core.limits import ChangeLimit
from jobs.core.policy_sweep import InstanceAction, UntaggedInstances
from jobs.labels import SWEEP_MARK_TAG
from jobs.retry import Backoff
from jobs.runner import Reconcile, RunSettings
from jobs.scopes import account
from jobs.sweep.instances import InstanceReport, Ports, SweepInstancesWork, report_of
from tests.emulators.aws import moto_state
from tests.unit.test_permissions import aws_actions, aws_policy
from tests.unit.test_runner import Log, MemoryLease
from tests.unit.test_untagged_sweep import instance_rows, tally

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
SCOPE = account("aws", REGION)
NOW = datetime(2026, 12, 2, 14, 5, tzinfo=UTC)  # a Wednesday afternoon
DAY = timedelta(hours=24)
TAGGED = {"owner": "ana", "project": "llm"}


@pytest.fixture
def adapter(aws: AwsEmulator, monkeypatch: pytest.MonkeyPatch) -> AwsInstances:
    for key, value in aws.env(REGION).items():
        monkeypatch.setenv(key, value)
    # A client timeout below the emulator's 3 s hold, so a "timeout" fault is a timeout here.
    return AwsInstances(AdapterSettings(request_timeout_s=1.0))


def sweep(
    adapter: AwsInstances,
    at: datetime = NOW,
    action: InstanceAction = "stop",
    *,
    dry_run: bool = False,
    deadline_s: float = 30,
) -> InstanceReport:
    section = UntaggedInstances.model_validate(
        {"requiredTags": ["owner", "project"], "action": action, "gracePeriod": "24h"}
    )
    log = Log()
    backoff = Backoff(deadline_s=deadline_s, base_s=0.01, cap_s=0.05)
    work = SweepInstancesWork(SCOPE, section, at, backoff, Ports(adapter, MemoryLease()), log)
    settings = RunSettings(dry_run=dry_run, limit=ChangeLimit(count=10), holder="me", clock=lambda: NOW)
    (envelope,) = Reconcile({SCOPE: work}, settings, at, log, "actions").run()
    return report_of(envelope)


def tags(instance_id: str) -> dict[str, str]:
    """The instance's tags as EC2 holds them (read in moto's backend: not a call the adapter made)."""
    return {t["key"]: t["value"] for t in moto_state.ec2(REGION).describe_tags(filters={"resource-id": [instance_id]})}


def tag(instance_id: str, **values: str) -> None:
    """A person tags the instance (in moto's backend, so the request log and IAM actions stay the adapter's)."""
    moto_state.ec2(REGION).create_tags([instance_id], values)


def state(instance_id: str) -> str:
    return str(moto_state.ec2(REGION).get_instance(instance_id).state)


def rows(report: InstanceReport) -> dict[str, tuple[str, str | None]]:
    return {r["id"]: (r["state"], r["action"]) for r in instance_rows(report)}


def test_gpu_instances_are_told_by_ec2_type_data_not_by_name(aws: AwsEmulator, adapter: AwsInstances) -> None:
    p4d = aws.add_instance(REGION, "p4d.24xlarge", {"Name": "train"})
    g5 = aws.add_instance(REGION, "g5.12xlarge")
    g5g = aws.add_instance(REGION, "g5g.xlarge")  # Graviton with a T4g: a GPU whatever the name says
    aws.add_instance(REGION, "m5.large")
    aws.add_instance(REGION, "inf2.xlarge")  # Inferentia: an accelerator, no GpuInfo
    aws.add_instance(REGION, "trn1.2xlarge")

    found = {i.id: i for i in adapter.gpu_instances(REGION)}

    assert {i: (f.type, f.gpus, f.state, f.zone) for i, f in found.items()} == {
        p4d: ("p4d.24xlarge", 8, "running", f"{REGION}a"),
        g5: ("g5.12xlarge", 4, "running", f"{REGION}a"),
        g5g: ("g5g.xlarge", 1, "running", f"{REGION}a"),
    }
    assert (found[p4d].name, found[g5].name, found[p4d].account, found[p4d].group) == ("train", g5, REGION, None)
    # Type data is read once: a second list describes no type again.
    aws.log.clear()
    adapter.gpu_instances(REGION)
    assert aws.log.operations() == ["DescribeInstances"]


def test_every_page_of_instances_is_read(
    aws: AwsEmulator, adapter: AwsInstances, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aws_instances, "_PAGE", 5)  # EC2's smallest page; the adapter asks for 1000
    seeded = {aws.add_instance(REGION, "g5.xlarge") for _ in range(12)}
    aws.log.clear()

    assert {i.id for i in adapter.gpu_instances(REGION)} == seeded
    assert aws.log.count("DescribeInstances") == 3


def test_the_state_filter_is_exact_and_uses_no_wildcard(aws: AwsEmulator, adapter: AwsInstances) -> None:
    # EC2 reads "*" and "?" in filter values as wildcards and moto does not: the adapter must need neither.
    kept = aws.add_instance(REGION, "g5.xlarge")
    gone = aws.add_instance(REGION, "g5.xlarge")
    aws.client("ec2", REGION).terminate_instances(InstanceIds=[gone])
    aws.log.clear()

    assert [i.id for i in adapter.gpu_instances(REGION)] == [kept]
    (request,) = [r for r in aws.log.all() if r.operation == "DescribeInstances"]
    form = parse_qs(request.body.decode())
    values = [v for k, vs in form.items() if k.startswith("Filter.") and ".Value." in k for v in vs]
    assert sorted(values) == ["pending", "running", "stopped", "stopping"]
    assert not any("*" in v or "?" in v for v in values)


def test_untagged_is_marked_then_stopped_after_the_grace_and_a_second_run_writes_nothing(
    aws: AwsEmulator, adapter: AwsInstances
) -> None:
    untagged = aws.add_instance(REGION, "p4d.24xlarge", {"owner": "ana"})
    aws.add_instance(REGION, "p4d.24xlarge", TAGGED)
    aws.add_instance(REGION, "m5.large")  # no GPU: never judged

    first = sweep(adapter)
    assert rows(first) == {untagged: ("marked", "stop")}
    assert instance_rows(first)[0]["missingTags"] == ["project"]
    assert tags(untagged) == {"owner": "ana", SWEEP_MARK_TAG: "stop-after-20261203t1405z"}

    aws.log.clear()
    waiting = sweep(adapter, NOW + DAY - timedelta(minutes=1))
    assert rows(waiting) == {untagged: ("marked", "stop")}
    assert aws.log.writes() == []

    due = sweep(adapter, NOW + DAY)
    assert rows(due) == {untagged: ("acted", "stop")}
    assert state(untagged) == "stopped"
    assert [w.operation for w in aws.log.writes()] == ["StopInstances"]
    assert tally(due).applied == 1

    aws.log.clear()
    again = sweep(adapter, NOW + DAY + timedelta(hours=1))
    assert rows(again) == {untagged: ("acted", "stop")}  # stopped, still marked: reported, nothing sent
    assert aws.log.writes() == []
    assert aws.log.operations() == ["DescribeInstances"]


def test_a_pending_instance_is_judged_as_running_and_a_stopping_one_is_left_alone(
    aws: AwsEmulator, adapter: AwsInstances
) -> None:
    from moto.ec2.models.instances import InstanceState as MotoState

    pending = aws.add_instance(REGION, "g5.xlarge")
    stopping = aws.add_instance(REGION, "g5.xlarge", {SWEEP_MARK_TAG: "stop-after-20261201t0000z"})
    moto_state.ec2(REGION).get_instance(pending)._state = MotoState("pending", 0)
    moto_state.ec2(REGION).get_instance(stopping)._state = MotoState("stopping", 64)

    report = sweep(adapter)

    assert rows(report) == {pending: ("marked", "stop"), stopping: ("acted", "stop")}
    assert SWEEP_MARK_TAG in tags(pending)
    assert [w.operation for w in aws.log.writes()] == ["CreateTags"]  # nothing sent to the stopping one


def test_terminate_after_the_grace(aws: AwsEmulator, adapter: AwsInstances) -> None:
    untagged = aws.add_instance(REGION, "g5.12xlarge", {SWEEP_MARK_TAG: "terminate-after-20261201t0000z"})

    assert rows(sweep(adapter, action="terminate")) == {untagged: ("acted", "terminate")}
    assert state(untagged) == "terminated"
    assert sweep(adapter, action="terminate").rows == ()  # terminated instances are not listed


def test_a_tag_added_during_the_grace_clears_the_mark(aws: AwsEmulator, adapter: AwsInstances) -> None:
    instance = aws.add_instance(REGION, "g5.xlarge", {"owner": "ana"})
    sweep(adapter)
    assert SWEEP_MARK_TAG in tags(instance)
    tag(instance, project="llm")

    cleared = sweep(adapter, NOW + DAY)
    assert rows(cleared) == {instance: ("cleared", None)}
    assert tags(instance) == TAGGED
    assert state(instance) == "running"


def test_group_members_and_protected_instances_are_reported_never_touched(
    aws: AwsEmulator, adapter: AwsInstances
) -> None:
    aws.add_asg(REGION, "batch", 1, 1, 1, instance_type="g5.xlarge")
    aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 1, 2, instance_types=["g5.12xlarge"])
    protected = aws.add_instance(REGION, "p4d.24xlarge", {"gpu-jobs/protect": "benchmarks"})
    aws.log.clear()

    report = sweep(adapter, NOW + 3 * DAY)

    found = {r.plan.instance.type: (r.state, r.plan.instance.group) for r in report.rows}
    assert found["g5.xlarge"] == ("member", "Auto Scaling group batch")
    assert found["g5.12xlarge"] == ("member", "EKS node group ml/gpu")
    assert rows(report)[protected] == ("protected", None)
    assert aws.log.writes() == []
    assert tally(report).skipped == 3
    assert all(state(r.plan.instance.id) == "running" for r in report.rows)


def test_a_dry_run_writes_nothing(aws: AwsEmulator, adapter: AwsInstances) -> None:
    untagged = aws.add_instance(REGION, "g5.xlarge", {SWEEP_MARK_TAG: "stop-after-20261201t0000z"})
    aws.add_instance(REGION, "g5.xlarge")
    aws.log.clear()

    report = sweep(adapter, dry_run=True)

    assert rows(report)[untagged] == ("acted", "stop")
    assert aws.log.writes() == []
    assert state(untagged) == "running"


@pytest.mark.parametrize(
    ("operation", "fault"),
    [
        ("DescribeInstances", "throttle"),
        ("DescribeInstances", "server_error"),
        ("DescribeInstances", "timeout"),
        ("DescribeInstanceTypes", "throttle"),
        ("CreateTags", "throttle"),
        ("CreateTags", "server_error"),
        ("CreateTags", "lost"),
        ("StopInstances", "throttle"),
        ("StopInstances", "server_error"),
        ("StopInstances", "timeout"),
        ("StopInstances", "lost"),  # stopped, the answer lost: resent, and a stop of a stopped instance is fine
        ("StopInstances", "busy"),  # IncorrectInstanceState: a transition under way, tried again
    ],
)
def test_faults_are_retried_and_the_run_succeeds(
    aws: AwsEmulator, adapter: AwsInstances, operation: str, fault: str
) -> None:
    due = aws.add_instance(REGION, "g5.xlarge", {SWEEP_MARK_TAG: "stop-after-20261201t0000z"})
    fresh = aws.add_instance(REGION, "g5.xlarge")
    aws.log.clear()
    aws.inject(operation, fault)  # type: ignore[arg-type]

    report = sweep(adapter)

    assert report.state == "applied"
    assert rows(report) == {due: ("acted", "stop"), fresh: ("marked", "stop")}
    assert tally(report).failed == 0
    assert state(due) == "stopped"
    assert SWEEP_MARK_TAG in tags(fresh)
    # The fault was met and that call made once more than a run without faults makes it (DescribeInstances: once
    # to plan, once again under the Lease).
    assert aws.log.count(operation) == {"DescribeInstances": 2}.get(operation, 1) + 1


def test_an_account_that_cannot_be_read_fails_and_changes_nothing(aws: AwsEmulator, adapter: AwsInstances) -> None:
    aws.add_instance(REGION, "g5.xlarge")
    aws.log.clear()
    aws.inject("DescribeInstances", "server_error", times=10_000)

    report = sweep(adapter, deadline_s=0.5)  # retried until the deadline, then given up

    assert (report.state, report.rows, tally(report).failed) == ("failed", (), 1)
    assert report.reason is not None
    assert "InternalError" in report.reason
    assert aws.log.writes() == []


def test_the_calls_made_are_the_modules_permissions_and_the_iam_document_grants_them(
    aws: AwsEmulator, adapter: AwsInstances
) -> None:
    # Seeding and tagging go straight to moto: every call the emulator saw is the adapter's.
    stopped = aws.add_instance(REGION, "g5.xlarge")
    tagged_later = aws.add_instance(REGION, "g5.xlarge", {"owner": "ana"})
    sweep(adapter)  # DescribeInstances, DescribeInstanceTypes, CreateTags (the marks)
    tag(tagged_later, project="llm")
    sweep(adapter, NOW + DAY)  # StopInstances, DeleteTags (the cleared mark)
    terminated = aws.add_instance(REGION, "g5.xlarge", {SWEEP_MARK_TAG: "terminate-after-20261201t0000z"})
    sweep(adapter, NOW + DAY, action="terminate")  # TerminateInstances

    assert (state(stopped), state(tagged_later), state(terminated)) == ("stopped", "running", "terminated")
    assert aws.iam_actions() == set(PERMISSIONS.actions)
    assert set(PERMISSIONS.actions) <= set(aws_actions(aws_policy()))
