"""``gpu-jobs cloud-quotas`` on AWS, through boto3 against the AWS emulator (Service Quotas fake, moto's EC2 and the
EKS extension), with its records, Lease and Events in the Kubernetes API emulator."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.cloud_quotas.world import Job

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
P_SPOT, G_ONDEMAND = "L-7212CCBC", "L-DB2E81BA"


def policy(up_max: int = 8, extra: str = "", capacity: str = "spot") -> str:
    return f"""\
    nodeGroups:
      - name: training-a100
        cloud: aws
        aws: {{region: {REGION}, cluster: ml-prod, nodegroup: gpu-a100-spot}}
        up: {{min: 0, desired: 4, max: {up_max}}}
    cloudQuotas:
      - name: p-spot
        cloud: aws
        region: {REGION}
        quota: {{family: P, capacity: {capacity}}}
        target: {{nodeGroups: [training-a100]}}
{extra}"""


G_ENTRY = f"""\
      - name: g-ondemand
        cloud: aws
        region: {REGION}
        quota: {G_ONDEMAND}
        target: {{instances: 4, instanceType: g6.xlarge}}
"""


@pytest.fixture
def job(
    aws: AwsEmulator,
    kube: KubeHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Job:
    world = Job(tmp_path, kube, monkeypatch, capsys)
    world.env(aws.env(REGION))
    aws.add_eks_nodegroup(REGION, "ml-prod", "gpu-a100-spot", 0, 0, 8, ["p4d.24xlarge"], capacity_type="SPOT")
    aws.quotas.set_quota(REGION, P_SPOT, 96)
    world.write(policy())
    return world


def requests(aws: AwsEmulator, code: str = P_SPOT) -> list[tuple[float, str]]:
    return [(r.desired, r.status) for r in aws.quotas.requests() if r.code == code]


def test_a_dry_run_shows_the_conversion_and_requests_nothing(job: Job, aws: AwsEmulator, kube: KubeHandle) -> None:
    kube.log.clear()
    ran = job.run("--dry-run")
    assert ran.code == 0
    assert ran.report["dryRun"] is True
    assert ran.quota("p-spot") == {
        "kind": "cloud quota",
        "scope": f"aws/{REGION}",
        "name": "p-spot",
        "status": "planned",
        "reason": "limit 96 is below target 768",
        "cloud": "aws",
        "account": REGION,
        "unit": "vCPU",
        "limit": 96,
        "usage": None,
        "target": 768,
        "demand": "training-a100: 8 x p4d.24xlarge x 96 vCPU = 768",
        "action": "request",
        "request": None,
    }
    assert requests(aws) == []
    assert kube.log.writes() == []


def test_the_first_run_files_one_request_remembers_it_and_a_second_run_follows_without_writing(
    job: Job, aws: AwsEmulator, kube: KubeHandle
) -> None:
    ran = job.run()
    assert (ran.code, ran.summary["applied"]) == (0, 1)
    (request,) = aws.quotas.requests()
    assert (request.code, request.desired, request.status) == (P_SPOT, 768.0, "PENDING")
    assert ran.quota("p-spot")["request"] == {"id": request.id, "status": "PENDING", "value": 768}
    assert job.record("p-spot") == {
        "value": 768,
        "target": 768,
        "max": None,
        "requestId": request.id,
        "status": "PENDING",
        "outcome": "open",
        "at": job.record("p-spot")["at"],  # type: ignore[index]
    }
    (logged,) = ran.events("cloud_quota.requested")
    assert (logged["request_id"], logged["value"]) == (request.id, 768)
    assert [(n, r) for n, r, _ in job.kube_events()] == [("gpu-jobs-cloud-quota-p-spot", "QuotaRequested")]
    assert request.id in job.kube_events()[0][2]
    assert {lease["metadata"]["name"] for lease in kube.list("Lease", "gpu-jobs")} == {
        "gpu-jobs-cloud-quotas-aws-eu-west-1"
    }

    aws.log.clear()
    kube.log.clear()
    again = job.run()
    assert (again.code, again.quota("p-spot")["action"]) == (0, "pending")
    assert again.quota("p-spot")["request"]["id"] == request.id
    assert len(aws.quotas.requests()) == 1  # never a duplicate while one is open
    assert [r.operation for r in aws.log.writes()] == []
    assert kube.log.writes() == []  # nothing new: no Lease, no record, no Event


def test_outcomes_are_tracked_with_the_clouds_ids(job: Job, aws: AwsEmulator) -> None:
    job.run()
    (request,) = aws.quotas.requests()
    aws.quotas.decide(request.id, "CASE_OPENED")
    (opened,) = aws.quotas.requests()
    case = opened.case_id
    ran = job.run()
    assert ran.quota("p-spot")["action"] == "pending"
    assert ran.quota("p-spot")["request"] == {"id": request.id, "status": "CASE_OPENED", "value": 768, "case": case}
    assert (job.record("p-spot") or {})["status"] == "CASE_OPENED"
    (outcome,) = ran.events("cloud_quota.outcome")
    assert (outcome["request_id"], outcome["case"]) == (request.id, case)

    aws.quotas.decide(request.id, "APPROVED")
    done = job.run()
    assert (done.code, done.quota("p-spot")["action"], done.quota("p-spot")["limit"]) == (0, "none", 768)
    assert (job.record("p-spot") or {})["outcome"] == "approved"
    reasons = [r for _, r, _ in job.kube_events()]
    assert sorted(reasons) == ["QuotaRequestApproved", "QuotaRequestOpen", "QuotaRequested"]


@pytest.mark.parametrize("status", ["DENIED", "NOT_APPROVED", "INVALID_REQUEST"])
def test_a_denied_request_fails_the_run_and_is_not_filed_again_until_the_target_changes(
    job: Job, aws: AwsEmulator, status: str
) -> None:
    job.run()
    (request,) = aws.quotas.requests()
    aws.quotas.decide(request.id, status)
    denied = job.run()
    assert (denied.code, denied.quota("p-spot")["action"]) == (1, "denied")
    assert denied.summary["failed"] == 1
    assert [r for _, r, _ in job.kube_events()].count("QuotaRequestDenied") == 1
    again = job.run()
    assert (again.code, again.quota("p-spot")["action"], len(aws.quotas.requests())) == (1, "denied", 1)

    job.write(policy(up_max=16))  # the PR that raises up.max raises the target: asked again, for the new one
    raised = job.run()
    assert (raised.code, raised.quota("p-spot")["target"], raised.quota("p-spot")["action"]) == (0, 1536, "request")
    assert raised.quota("p-spot")["demand"] == "training-a100: 16 x p4d.24xlarge x 96 vCPU = 1536"
    assert requests(aws) == [(768.0, status), (1536.0, "PENDING")]


def test_no_request_when_the_limit_is_enough_or_raised_by_hand(job: Job, aws: AwsEmulator) -> None:
    aws.quotas.set_quota(REGION, P_SPOT, 800)
    ran = job.run()
    assert (ran.code, ran.quota("p-spot")["action"], requests(aws)) == (0, "none", [])

    aws.quotas.set_quota(REGION, P_SPOT, 96)
    job.run()
    (request,) = aws.quotas.requests()
    aws.quotas.decide(request.id, "DENIED")
    aws.quotas.set_quota(REGION, P_SPOT, 1000)  # a person raised it through support since the denial
    after = job.run()
    assert (after.code, after.quota("p-spot")["action"], len(aws.quotas.requests())) == (0, "none", 1)


def test_a_quota_without_an_applied_value_is_read_from_its_default(job: Job, aws: AwsEmulator) -> None:
    job.write(policy(extra=G_ENTRY))  # G on-demand was never set: GetServiceQuota may answer NoSuchResource
    ran = job.run("--dry-run")
    g = ran.quota("g-ondemand")
    assert (g["limit"], g["target"], g["demand"]) == (0, 16, "instances: 4 x g6.xlarge x 4 vCPU = 16")


def test_a_group_of_another_capacity_type_is_a_plan_error_naming_both_and_the_others_go_on(
    job: Job, aws: AwsEmulator
) -> None:
    job.write(policy(capacity="on-demand", extra=G_ENTRY))
    ran = job.run()
    assert ran.code == 1
    p = ran.quota("p-spot")
    assert p["action"] == "error"
    assert p["reason"] == (
        "node group training-a100 (p4d.24xlarge: family P, spot) does not count against quota p-spot (family P,"
        " on-demand)"
    )
    assert ran.quota("g-ondemand")["action"] == "request"
    assert requests(aws, G_ONDEMAND) == [(16.0, "PENDING")]


def test_an_unknown_quota_code_and_instance_type_are_plan_errors(job: Job, aws: AwsEmulator) -> None:
    job.write(
        policy(
            extra=f"""\
      - {{name: nope, cloud: aws, region: {REGION}, quota: L-00000000, target: 8}}
      - {{name: typo, cloud: aws, region: {REGION}, quota: {G_ONDEMAND}, target: {{instances: 1, instanceType: g9.huge}}}}
"""
        )
    )
    ran = job.run()
    assert ran.code == 1
    assert ran.quota("nope")["action"] == "error"
    assert "L-00000000: no such EC2 quota" in ran.quota("nope")["reason"]
    assert ran.quota("typo")["reason"] == f"g9.huge: not an EC2 instance type in {REGION}"
    assert ran.quota("p-spot")["action"] == "request"  # the others go on


def test_max_caps_the_target(job: Job, aws: AwsEmulator) -> None:
    job.write(
        policy().replace(
            "target: {nodeGroups: [training-a100]}", "target: {nodeGroups: [training-a100]}\n        max: 500"
        )
    )
    ran = job.run()
    assert (ran.quota("p-spot")["target"], requests(aws)) == (500, [(500.0, "PENDING")])


@pytest.mark.parametrize("fault", ["throttle", "server_error"])
def test_a_refused_write_is_retried_once_it_goes_through(job: Job, aws: AwsEmulator, fault: str) -> None:
    aws.inject("RequestServiceQuotaIncrease", fault)  # type: ignore[arg-type]
    ran = job.run()
    if fault == "throttle":  # not taken: sent again
        assert (ran.code, requests(aws)) == (0, [(768.0, "PENDING")])
    else:  # a 5xx may have been taken: looked for, not resent; the next run files it
        assert ran.code == 1
        assert requests(aws) == []
        assert "no request for p-spot is seen in the cloud" in ran.quota("p-spot")["reason"]
        assert (job.record("p-spot") or {})["status"] == "UNKNOWN"
        assert (job.run().code, requests(aws)) == (0, [(768.0, "PENDING")])


def test_a_lost_answer_on_the_write_never_makes_two_requests(job: Job, aws: AwsEmulator) -> None:
    aws.inject("RequestServiceQuotaIncrease", "lost")
    ran = job.run()
    (request,) = aws.quotas.requests()
    assert ran.code == 0
    assert ran.quota("p-spot")["request"]["id"] == request.id  # found again by looking, not by resending
    assert (job.record("p-spot") or {})["requestId"] == request.id
    assert aws.log.count("RequestServiceQuotaIncrease") == 1
    assert (job.run().quota("p-spot")["action"], len(aws.quotas.requests())) == ("pending", 1)


def test_reads_are_retried_through_throttling_and_timeouts(job: Job, aws: AwsEmulator) -> None:
    aws.inject("GetServiceQuota", "throttle")
    aws.inject("DescribeNodegroup", "timeout")
    # One fault each, then answers: room for the backoff and a slow emulator on a loaded machine (the world's 3 s
    # retry deadline is for the tests whose faults never end).
    job.env({"GPU_JOBS_RETRY_DEADLINE": "30"})
    ran = job.run()
    assert (ran.code, requests(aws)) == (0, [(768.0, "PENDING")])


def test_text_report_reads_for_people(job: Job) -> None:
    ran = job.run("--dry-run", text=True)
    assert ran.code == 0
    assert "gpu-jobs cloud-quotas in account aws/eu-west-1" in ran.text
    assert "p-spot      request  limit 96 vCPU, target 768" in ran.text
    assert "demand: training-a100: 8 x p4d.24xlarge x 96 vCPU = 768" in ran.text


def test_a_run_says_each_fact_once_and_prints_one_json_line(job: Job, aws: AwsEmulator) -> None:
    ran = job.run(text=True)
    (request,) = aws.quotas.requests()
    assert ran.text.splitlines()[1:] == [
        "  p-spot      request  limit 96 vCPU, target 768",
        "              demand: training-a100: 8 x p4d.24xlarge x 96 vCPU = 768",
        f"              request {request.id} (PENDING) for 768",
    ]
    assert job.kube_events() == [
        (
            "gpu-jobs-cloud-quota-p-spot",
            "QuotaRequested",
            f"Asked for 768 vCPU for p-spot in eu-west-1 (request {request.id}, PENDING): limit 96 is below target"
            " 768; demand training-a100: 8 x p4d.24xlarge x 96 vCPU = 768.",
        )
    ]
    aws.quotas.decide(request.id, "APPROVED")
    job.run()
    job.write(policy(up_max=12, extra="        max: 1000\n"))
    capped = job.run("--dry-run", text=True).text
    assert "  p-spot      request  limit 768 vCPU, target 1000 (capped at max 1000)\n" in capped
    assert capped.count("768 vCPU") == 1
    assert capped.count("1000") == 2  # the target and the cap that made it
    json_run = job.run("--dry-run")
    assert json_run.report["items"][0]["reason"] == "limit 768 is below target 1000 (capped at max 1000)"
    assert json_run.text.splitlines() == [json.dumps(json_run.report)]  # one line, as the CronJob's log has it


def test_the_job_calls_only_what_the_iam_document_grants(job: Job, aws: AwsEmulator) -> None:
    from jobs.adapters.aws.quotas import PERMISSIONS
    from tests.unit.test_permissions import aws_actions, aws_policy

    job.write(
        policy(extra=G_ENTRY.replace("target:", "headroom: {whenUsageAbove: 80%, raiseBy: 50%}\n        target:"))
    )
    job.run()
    job.run()
    assert aws.iam_actions() <= set(PERMISSIONS.actions) <= set(aws_actions(aws_policy()))
    # Every other call is exercised here. Not yet: the launch template and ASG reads (EKS groups with instanceTypes
    # here) and the request by id (only once it left the open list).
    assert set(PERMISSIONS.actions) - aws.iam_actions() <= {
        "ec2:DescribeLaunchTemplateVersions",
        "autoscaling:DescribeAutoScalingGroups",
        "servicequotas:GetRequestedServiceQuotaChange",
    }


def test_a_partial_approval_fails_the_run_and_is_not_filed_again(job: Job, aws: AwsEmulator) -> None:
    job.run()
    (request,) = aws.quotas.requests()
    aws.quotas.decide(request.id, "APPROVED", value=384)  # support grants half
    partial = job.run()
    p = partial.quota("p-spot")
    assert (partial.code, p["action"], p["limit"]) == (1, "partial", 384)
    assert (job.record("p-spot") or {})["outcome"] == "partial"
    assert (job.run().quota("p-spot")["action"], len(aws.quotas.requests())) == ("partial", 1)


def test_a_quota_that_is_not_adjustable_is_a_plan_error(job: Job, aws: AwsEmulator) -> None:
    from tests.emulators.aws.service_quotas import EC2_QUOTAS

    aws.quotas.define_quota(replace(EC2_QUOTAS[P_SPOT], adjustable=False))
    ran = job.run()
    assert (ran.code, ran.quota("p-spot")["action"], requests(aws)) == (1, "error", [])
    assert ran.quota("p-spot")["reason"] == f"limit 96 is below target 768, and {P_SPOT} is not Adjustable"


def test_a_bad_section_or_none_at_all_is_exit_2_and_nothing_is_asked(job: Job, aws: AwsEmulator) -> None:
    job.write(policy().replace("target: {nodeGroups: [training-a100]}", "target: {nodeGroups: [training-h100]}"))
    ran = job.run()
    assert (ran.code, ran.summary["exit_code"]) == (2, 2)
    (invalid,) = ran.events("policy.invalid")
    assert any(
        p.endswith('policy.yaml:13: cloudQuotas[0].target.nodeGroups[0]: unknown node group "training-h100"')
        for p in invalid["problems"]
    )
    job.write("nodeGroups: []\n")
    assert job.run().code == 2
    assert requests(aws) == []
