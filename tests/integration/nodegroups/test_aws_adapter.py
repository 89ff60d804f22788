"""The AWS node group adapters (EKS managed node groups, plain Auto Scaling groups) against the AWS emulator,
through the real boto3 over HTTP, each reached by the provider kind its group's locator selects, as the job does.

The adapter finds the emulator the way it finds AWS in production: boto3's standard ``AWS_ENDPOINT_URL`` and
credential variables (set here with monkeypatch), nothing adapter-specific.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from jobs.adapters.aws import asg, eks
from jobs.adapters.aws.asg import AsgNodeGroups
from jobs.adapters.aws.eks import EksNodeGroups
from jobs.adapters.settings import AdapterSettings
from jobs.commands.nodegroup_clouds import nodegroup_cloud
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetAutoscaling, SetPower, SetSize, Step, down_config, steps_between
from jobs.core.policy import AwsLocator, NodeGroup
from jobs.core.providers import PROVIDERS, rules_for
from jobs.errors import Busy, CloudError, Invalid, NotFound, Throttled, Unavailable
from jobs.labels import CA_ENABLED_TAG
from jobs.retry import Backoff
from tests.emulators.aws import AwsEmulator, UpdateTiming
from tests.emulators.base import FaultKind

pytestmark = pytest.mark.integration

REGION = "eu-central-1"
CLUSTER_TAG = "k8s.io/cluster-autoscaler/ml"
EKS_TAGS = {CA_ENABLED_TAG: "true", CLUSTER_TAG: "owned"}  # what EKS puts on the backing ASG
FAST = AdapterSettings(poll_interval_s=0.01, operation_timeout_s=5.0, request_timeout_s=2.0)
#: What the two AWS adapters may call between them.
PERMISSIONS = frozenset(eks.PERMISSIONS.actions) | frozenset(asg.PERMISSIONS.actions)


class AwsNodeGroups:
    """The two AWS adapters as the job reaches them: each group through the adapter of the provider kind its
    locator selects (the resolved policy's ``kind``), so one test may drive an EKS group and an ASG alike."""

    def __init__(self, settings: AdapterSettings) -> None:
        self.kinds = {"eks": EksNodeGroups(settings), "asg": AsgNodeGroups(settings)}

    def of(self, group: NodeGroup) -> EksNodeGroups | AsgNodeGroups:
        return self.kinds[rules_for(group.cloud, group.locator).kind]

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        return self.of(group).describe(group, live_size=live_size)

    def apply(self, group: NodeGroup, step: Step) -> None:
        self.of(group).apply(group, step)

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        return [
            found
            for kind, adapter in self.kinds.items()
            for found in adapter.discover([g for g in groups if rules_for(g.cloud, g.locator).kind == kind])
        ]


@pytest.fixture
def adapter(aws: AwsEmulator, monkeypatch: pytest.MonkeyPatch) -> AwsNodeGroups:
    for key, value in aws.env(REGION).items():
        monkeypatch.setenv(key, value)
    return AwsNodeGroups(FAST)


def eks_group(nodegroup: str = "gpu-a10g", cluster: str = "ml", **kw: Any) -> NodeGroup:
    return NodeGroup(
        name=nodegroup, cloud="aws", aws=AwsLocator(region=REGION, cluster=cluster, nodegroup=nodegroup), **kw
    )


def asg_group(name: str = "gpu-plain", **kw: Any) -> NodeGroup:
    return NodeGroup(name=name, cloud="aws", aws=AwsLocator(region=REGION, auto_scaling_group=name), **kw)


def seed_eks(aws: AwsEmulator, nodegroup: str = "gpu-a10g", sizes: tuple[int, int, int] = (0, 2, 4), **kw: Any) -> str:
    """An EKS node group; returns the name of its backing ASG."""
    return aws.add_eks_nodegroup(REGION, "ml", nodegroup, *sizes, **kw).asg_name


def asg_tags(aws: AwsEmulator, name: str) -> dict[str, tuple[str, bool]]:
    """All tags of an ASG as key -> (value, PropagateAtLaunch), read with a plain client."""
    found = aws.client("autoscaling", REGION).describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    return {t["Key"]: (t["Value"], t["PropagateAtLaunch"]) for t in found["AutoScalingGroups"][0]["Tags"]}


def eks_scaling(aws: AwsEmulator, nodegroup: str = "gpu-a10g") -> tuple[str, dict[str, int]]:
    group = aws.client("eks", REGION).describe_nodegroup(clusterName="ml", nodegroupName=nodegroup)["nodegroup"]
    return group["status"], group["scalingConfig"]


WRITE_OPERATIONS = frozenset(
    {"UpdateNodegroupConfig", "UpdateAutoScalingGroup", "CreateOrUpdateTags", "DeleteTags", "SetDesiredCapacity"}
)


def writes(aws: AwsEmulator) -> list[str]:
    """Write calls in the log. By name: Auto Scaling's query protocol POSTs its reads too, so the method says
    nothing."""
    return [op for op in aws.log.operations() if op in WRITE_OPERATIONS]


def converge(adapter: AwsNodeGroups, group: NodeGroup, target: GroupConfig) -> list[str]:
    """Apply the job's steps from what the cloud says now to ``target``; the steps' descriptions."""
    kind = rules_for(group.cloud, group.locator).kind
    steps = steps_between(kind, adapter.describe(group), target)
    for step in steps:
        adapter.apply(group, step)
    return [s.describe() for s in steps]


# --- kind, labels, registry ----------------------------------------------------------------------------------


def test_registry_builds_an_adapter_per_kind(adapter: AwsNodeGroups) -> None:
    assert isinstance(nodegroup_cloud("eks", FAST), EksNodeGroups)
    assert isinstance(nodegroup_cloud("asg", FAST), AsgNodeGroups)


def test_the_provider_table_tells_the_kind_and_node_label(adapter: AwsNodeGroups) -> None:
    labelled = asg_group(node_selector={"pool": "gpu", "zone": "a"})

    assert rules_for("aws", eks_group().locator).kind == "eks"
    assert rules_for("aws", asg_group().locator).kind == "asg"
    assert rules_for("aws", labelled.locator).kind == "asg"
    assert PROVIDERS["eks"].node_label == "eks.amazonaws.com/nodegroup"
    assert PROVIDERS["asg"].node_label is None  # the job matches every key of the policy's nodeSelector


def test_each_adapter_refuses_the_other_kinds_group(adapter: AwsNodeGroups) -> None:
    with pytest.raises(Invalid):
        adapter.kinds["eks"].describe(asg_group())
    with pytest.raises(Invalid):
        adapter.kinds["asg"].describe(eks_group())


# --- describe ------------------------------------------------------------------------------------------------


def test_describe_eks_reads_sizes_and_discovery_tags_in_two_reads(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws)
    aws.log.clear()

    config = adapter.describe(eks_group())

    assert config == GroupConfig(
        min=0, desired=2, max=4, autoscaling=True, autoscaler_tags=EKS_TAGS, propagated_tags=frozenset(EKS_TAGS)
    )
    assert aws.log.operations() == ["DescribeNodegroup", "DescribeTags"]
    assert writes(aws) == []


def test_describe_eks_zero_sizes_without_tags(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    asg = seed_eks(aws, sizes=(0, 0, 1))
    aws.client("autoscaling", REGION).delete_tags(
        Tags=[{"ResourceId": asg, "ResourceType": "auto-scaling-group", "Key": k} for k in EKS_TAGS]
    )

    config = adapter.describe(eks_group())

    assert (config.min, config.desired, config.max) == (0, 0, 1)
    assert config.autoscaling is False
    assert dict(config.autoscaler_tags) == {}


def test_describe_eks_reports_busy_while_updating(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws)
    aws.update_timing = UpdateTiming(polls=None, seconds=None)  # the update never finishes by itself
    aws.client("eks", REGION).update_nodegroup_config(
        clusterName="ml", nodegroupName="gpu-a10g", scalingConfig={"minSize": 1, "desiredSize": 1, "maxSize": 2}
    )

    config = adapter.describe(eks_group())

    assert config.busy is True
    assert (config.min, config.desired, config.max) == (0, 2, 4)  # the old config until the update completes


def test_describe_asg_is_one_read_and_ignores_other_tags(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    aws.add_asg(
        REGION,
        "gpu-plain",
        1,
        2,
        3,
        tags={
            CA_ENABLED_TAG: "true",
            "k8s.io/cluster-autoscaler/batch": "owned",
            # A node template tag (the autoscaler needs it to scale from zero): not a discovery tag.
            "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "1",
            "team": "research",
        },
    )
    aws.log.clear()

    config = adapter.describe(asg_group())

    assert config == GroupConfig(
        min=1,
        desired=2,
        max=3,
        autoscaling=True,
        autoscaler_tags={CA_ENABLED_TAG: "true", "k8s.io/cluster-autoscaler/batch": "owned"},
        propagated_tags=frozenset({CA_ENABLED_TAG, "k8s.io/cluster-autoscaler/batch"}),
    )
    assert aws.log.operations() == ["DescribeAutoScalingGroups"]


@pytest.mark.parametrize("group", [eks_group("absent"), asg_group("absent")], ids=["eks", "asg"])
def test_describe_missing_group_is_not_found(aws: AwsEmulator, adapter: AwsNodeGroups, group: NodeGroup) -> None:
    seed_eks(aws)  # the cluster exists, the group does not

    with pytest.raises(NotFound) as missing:
        adapter.describe(group)

    assert missing.value.operation in ("DescribeNodegroup", "DescribeAutoScalingGroups")


def test_describe_concurrently_from_threads(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    names = [f"gpu-{i}" for i in range(8)]
    for i, name in enumerate(names):
        seed_eks(aws, name, sizes=(0, i % 3, 4))

    with ThreadPoolExecutor(max_workers=8) as pool:
        configs = list(pool.map(lambda n: adapter.describe(eks_group(n)), names))

    assert [c.desired for c in configs] == [i % 3 for i in range(8)]
    assert all(c.autoscaler_tags == EKS_TAGS for c in configs)
    assert aws.log.count("DescribeNodegroup") == 8


# --- apply: EKS ----------------------------------------------------------------------------------------------


def test_eks_set_size_returns_only_when_the_update_succeeded(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws)
    aws.update_timing = UpdateTiming(polls=3)
    aws.log.clear()

    adapter.apply(eks_group(), SetSize(0, 0, 1))

    # Three polls see the update InProgress, the fourth sees it Successful; only then does apply return.
    assert aws.log.operations() == ["UpdateNodegroupConfig"] + ["DescribeUpdate"] * 4
    assert eks_scaling(aws) == ("ACTIVE", {"minSize": 0, "desiredSize": 0, "maxSize": 1})


@pytest.mark.parametrize(
    ("step", "code"),
    [(SetSize(0, 0, 0), "MaxBelowFloor"), (SetSize(2, 1, 3), "SizesOutOfOrder"), (SetSize(0, 5, 4), "SizesOutOfOrder")],
)
def test_eks_set_size_breaking_the_rules_is_refused_before_sending(
    aws: AwsEmulator, adapter: AwsNodeGroups, step: SetSize, code: str
) -> None:
    seed_eks(aws)
    aws.log.clear()

    with pytest.raises(Invalid) as refused:
        adapter.apply(eks_group(), step)

    assert refused.value.code == code
    assert aws.log.count("UpdateNodegroupConfig") == 0
    assert aws.log.all() == []
    assert eks_scaling(aws)[1] == {"minSize": 0, "desiredSize": 2, "maxSize": 4}


def test_eks_set_size_while_updating_is_busy(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws)
    aws.update_timing = UpdateTiming(polls=None, seconds=None)
    aws.client("eks", REGION).update_nodegroup_config(
        clusterName="ml", nodegroupName="gpu-a10g", scalingConfig={"minSize": 1, "desiredSize": 1, "maxSize": 2}
    )

    with pytest.raises(Busy) as busy:
        adapter.apply(eks_group(), SetSize(0, 0, 1))

    assert busy.value.code == "ResourceInUseException"
    assert busy.value.operation == "UpdateNodegroupConfig"
    assert busy.value.retryable


def test_eks_update_that_never_completes_times_out(aws: AwsEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in aws.env(REGION).items():
        monkeypatch.setenv(key, value)
    adapter = AwsNodeGroups(replace(FAST, operation_timeout_s=0.2))
    seed_eks(aws)
    aws.update_timing = UpdateTiming(polls=None, seconds=None)

    with pytest.raises(Unavailable, match=r"still InProgress after 0.2 s") as late:
        adapter.apply(eks_group(), SetSize(0, 0, 1))

    assert late.value.code == "OperationTimeout"


def test_eks_poll_survives_a_throttled_describe_update(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws)
    aws.inject("DescribeUpdate", "throttle")

    adapter.apply(eks_group(), SetSize(1, 1, 2))

    assert eks_scaling(aws) == ("ACTIVE", {"minSize": 1, "desiredSize": 1, "maxSize": 2})


def test_eks_autoscaling_off_and_on_touches_only_discovery_tags(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    asg = seed_eks(aws)
    before = asg_tags(aws, asg)
    adapter.describe(eks_group())

    adapter.apply(eks_group(), SetAutoscaling(False))
    off = asg_tags(aws, asg)
    adapter.apply(eks_group(), SetAutoscaling(True, tags=EKS_TAGS, propagate=frozenset(EKS_TAGS)))

    assert off == {k: v for k, v in before.items() if k not in EKS_TAGS}
    assert "eks:nodegroup-name" in off
    assert asg_tags(aws, asg) == before  # values and PropagateAtLaunch as they were


def test_autoscaling_off_without_tags_sends_nothing(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    aws.add_asg(REGION, "gpu-plain", 0, 1, 2, tags={"team": "research"})
    aws.log.clear()

    adapter.apply(asg_group(), SetAutoscaling(False))

    assert writes(aws) == []


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        ({}, "NoTags"),
        ({**EKS_TAGS, "team": "x"}, "NotDiscoveryTag"),
        ({"k8s.io/cluster-autoscaler/other": "owned"}, "NotDiscoveryTag"),
    ],
)
def test_autoscaling_on_with_bad_tags_is_refused(
    aws: AwsEmulator, adapter: AwsNodeGroups, tags: dict[str, str], code: str
) -> None:
    seed_eks(aws)
    adapter.describe(eks_group())
    aws.log.clear()

    with pytest.raises(Invalid) as refused:
        adapter.apply(eks_group(), SetAutoscaling(True, tags=tags))

    assert refused.value.code == code
    assert writes(aws) == []


@pytest.mark.parametrize("group", [eks_group(), asg_group()], ids=["eks", "asg"])
def test_set_power_is_not_an_aws_concept(aws: AwsEmulator, adapter: AwsNodeGroups, group: NodeGroup) -> None:
    with pytest.raises(Invalid):
        adapter.apply(group, SetPower(True))

    assert aws.log.all() == []


# --- full down and up ----------------------------------------------------------------------------------------


def test_eks_down_then_up_restores_sizes_and_tags_exactly(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    asg = seed_eks(aws, sizes=(1, 2, 4))
    group = eks_group()
    original = adapter.describe(group)
    original_tags = asg_tags(aws, asg)

    down_steps = converge(adapter, group, down_config("eks", original))
    down = adapter.describe(group)
    up_steps = converge(adapter, group, original)

    assert down_steps == ["autoscaler off", "size 0/0/1"]
    assert down == GroupConfig(min=0, desired=0, max=1)
    assert up_steps == ["size 1/2/4", "autoscaler discovery tags restored"]
    assert adapter.describe(group) == original
    assert asg_tags(aws, asg) == original_tags
    assert steps_between("eks", adapter.describe(group), original) == []  # a second run plans nothing
    assert set(aws.iam_actions()) <= PERMISSIONS


def test_eks_down_with_autoscaler_wake_up_keeps_the_tags(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws)
    group = eks_group()
    original = adapter.describe(group)

    steps = converge(adapter, group, down_config("eks", original, wake_up=True))

    assert steps == ["size 0/0/1"]
    assert adapter.describe(group) == replace(original, min=0, desired=0, max=1)


def test_plain_asg_down_to_zero_and_back(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    tags = {CA_ENABLED_TAG: "true", "k8s.io/cluster-autoscaler/batch": "owned", "team": "research"}
    aws.add_asg(REGION, "gpu-plain", 1, 2, 3, tags=tags)
    group = asg_group()
    original = adapter.describe(group)

    down_steps = converge(adapter, group, down_config("asg", original))
    down = adapter.describe(group)
    converge(adapter, group, original)

    assert down_steps == ["autoscaler off", "size 0/0/0"]
    assert down == GroupConfig(min=0, desired=0, max=0)
    assert asg_tags(aws, "gpu-plain") == {k: (v, True) for k, v in tags.items()}
    assert adapter.describe(group) == original


def test_plain_asg_sizes_out_of_order_are_refused_before_sending(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    aws.add_asg(REGION, "gpu-plain", 1, 2, 3)
    aws.log.clear()

    with pytest.raises(Invalid):
        adapter.apply(asg_group(), SetSize(2, 1, 3))

    assert aws.log.all() == []


# --- faults --------------------------------------------------------------------------------------------------

EXPECTED: dict[FaultKind, type[CloudError]] = {
    "throttle": Throttled,
    "server_error": Unavailable,
    "busy": Busy,
    "timeout": Unavailable,  # the front end's 504
    "conflict": Busy,  # AWS has no optimistic concurrency here: both are "another change is running"
}
CASES = {
    "DescribeNodegroup": (eks_group(), None),
    "DescribeTags": (eks_group(), None),
    "UpdateNodegroupConfig": (eks_group(), SetSize(0, 0, 1)),
    "DescribeAutoScalingGroups": (asg_group(), None),
    "UpdateAutoScalingGroup": (asg_group(), SetSize(0, 0, 0)),
    "CreateOrUpdateTags": (asg_group(), SetAutoscaling(True, tags={CA_ENABLED_TAG: "true"})),
}


@pytest.mark.parametrize("operation", sorted(CASES))
@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_fault_becomes_the_right_error(
    aws: AwsEmulator, adapter: AwsNodeGroups, operation: str, kind: FaultKind
) -> None:
    seed_eks(aws)
    aws.add_asg(REGION, "gpu-plain", 1, 1, 2)
    aws.timeout_hold_s = 0.05  # then the 504; the client's read timeout (2 s) is longer
    group, step = CASES[operation]
    aws.inject(operation, kind)

    call = (lambda: adapter.describe(group)) if step is None else (lambda: adapter.apply(group, step))

    with pytest.raises(EXPECTED[kind]) as failed:
        call()

    assert failed.value.operation == operation
    assert failed.value.code
    assert aws.log.count(operation) == 1  # no SDK retry hid the fault


def test_read_timeout_is_unavailable(aws: AwsEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in aws.env(REGION).items():
        monkeypatch.setenv(key, value)
    adapter = AwsNodeGroups(replace(FAST, request_timeout_s=0.2))
    seed_eks(aws)
    aws.timeout_hold_s = 0.6
    aws.inject("DescribeNodegroup", "timeout")

    with pytest.raises(Unavailable) as failed:
        adapter.describe(eks_group())

    assert failed.value.code == "ReadTimeoutError"
    assert aws.log.count("DescribeNodegroup") == 1


# --- discover ------------------------------------------------------------------------------------------------


def test_discover_finds_gpu_groups_listed_or_not(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws, "gpu-a10g", instance_types=["g5.xlarge"])
    seed_eks(aws, "gpu-h100", instance_types=["p5.48xlarge"])  # not in the policy
    seed_eks(aws, "cpu", instance_types=["m5.large"])
    aws.add_eks_nodegroup(REGION, "other", "gpu-elsewhere", 0, 0, 1)  # a cluster the policy does not use
    aws.add_asg(REGION, "gpu-plain", 0, 0, 1)

    found = adapter.discover([eks_group("gpu-a10g"), asg_group()])

    locator = {"region": REGION, "cluster": "ml"}
    assert sorted(found, key=lambda g: g.instance_type) == [
        CloudGroup(cloud="aws", locator={**locator, "nodegroup": "gpu-a10g"}, instance_type="g5.xlarge"),
        CloudGroup(cloud="aws", locator={**locator, "nodegroup": "gpu-h100"}, instance_type="p5.48xlarge"),
    ]
    assert aws.iam_actions() <= PERMISSIONS  # seeding goes straight to moto: these are the adapter's calls


def test_discover_recognises_a_gpu_ami_without_gpu_instance_types(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws, "cpu", instance_types=["m5.large"])  # creates the cluster
    subnets = [s["SubnetId"] for s in aws.client("ec2", REGION).describe_subnets()["Subnets"]][:1]
    aws.client("eks", REGION).create_nodegroup(
        clusterName="ml",
        nodegroupName="gpu-ami",
        nodeRole="arn:aws:iam::123456789012:role/eks-node-role",
        subnets=subnets,
        instanceTypes=["m5.large"],
        amiType="AL2_x86_64_GPU",
        scalingConfig={"minSize": 0, "desiredSize": 0, "maxSize": 1},
    )

    found = adapter.discover([eks_group("cpu")])

    assert [g.locator["nodegroup"] for g in found] == ["gpu-ami"]


# --- discover: node groups from a launch template (EKS reports no instanceTypes for them) ---------------------

LOCATOR = {"region": REGION, "cluster": "ml"}


def found_types(found: list[CloudGroup]) -> dict[str, str]:
    return {g.locator["nodegroup"]: g.instance_type for g in found}


def test_discover_finds_a_launch_template_gpu_group_by_its_template(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws, "cpu", instance_types=["m5.large"])
    seed_eks(aws, "lt-gpu", launch_template={"InstanceType": "p4d.24xlarge", "ImageId": "ami-0123456789abcdef0"})
    aws.log.clear()

    found = adapter.discover([eks_group("cpu")])

    assert found == [CloudGroup(cloud="aws", locator={**LOCATOR, "nodegroup": "lt-gpu"}, instance_type="p4d.24xlarge")]
    assert aws.log.count("DescribeLaunchTemplateVersions") == 1
    assert aws.iam_actions() <= PERMISSIONS


def test_discover_skips_a_launch_template_cpu_group(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws, "gpu-a10g")
    seed_eks(aws, "lt-cpu", launch_template={"InstanceType": "m5.xlarge", "ImageId": "ami-0123456789abcdef0"})

    found = adapter.discover([eks_group("gpu-a10g")])

    assert found_types(found) == {"gpu-a10g": "g5.xlarge"}


def test_discover_reads_each_shared_template_once_with_every_version(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    ec2 = aws.client("ec2", REGION)
    template = aws.add_launch_template(REGION, "gpu", {"InstanceType": "g5.xlarge"})
    ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"InstanceType": "g6.xlarge"})
    ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"InstanceType": "m5.large"})
    seed_eks(aws, "v1", launch_template=template, launch_template_version="1")
    seed_eks(aws, "default", launch_template=template, launch_template_version="$Default")  # version 1
    seed_eks(aws, "v2", launch_template="gpu", launch_template_version="2")  # by name: EKS reports the id too
    seed_eks(aws, "latest", launch_template=template, launch_template_version="$Latest")  # version 3, a CPU
    cpu = aws.add_launch_template(REGION, "cpu", {"InstanceType": "c5.large"})
    seed_eks(aws, "cpu-a", launch_template=cpu)
    seed_eks(aws, "cpu-b", launch_template=cpu)
    aws.log.clear()

    found = adapter.discover([eks_group("v1")])

    assert found_types(found) == {"v1": "g5.xlarge", "default": "g5.xlarge", "v2": "g6.xlarge"}
    # One read per template, each asking for every version its groups use.
    assert aws.log.count("DescribeLaunchTemplateVersions") == 2
    assert aws.log.count("DescribeNodegroup") == 6
    assert aws.log.count("DescribeAutoScalingGroups") == 0


def test_discover_falls_back_to_the_asg_when_the_template_names_no_type(
    aws: AwsEmulator, adapter: AwsNodeGroups
) -> None:
    # No InstanceType in the template (instance requirements, say) and none in the request: EKS launches its
    # default t3.medium and reports instanceTypes null.
    requirements = {"InstanceRequirements": {"VCpuCount": {"Min": 2}, "MemoryMiB": {"Min": 4096}}}
    seed_eks(aws, "running", sizes=(0, 1, 2), launch_template=requirements)
    seed_eks(aws, "asleep", sizes=(0, 0, 2), launch_template="ml-running")
    aws.log.clear()

    found = adapter.discover([eks_group("running")])

    # Running instances say what it is (a CPU: not reported); with none the type is unknown, and reported.
    assert found_types(found) == {"asleep": "unknown"}
    assert aws.log.count("DescribeLaunchTemplateVersions") == 1
    assert aws.log.count("DescribeAutoScalingGroups") == 1  # both ASGs in one read


def test_discover_with_a_deleted_template_falls_back_to_the_asg(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    template = aws.add_launch_template(REGION, "gone", {"InstanceType": "g5.xlarge"})
    seed_eks(aws, "orphan", sizes=(0, 1, 2), launch_template=template)
    aws.client("ec2", REGION).delete_launch_template(LaunchTemplateId=template)

    found = adapter.discover([eks_group("orphan")])

    assert found_types(found) == {"orphan": "g5.xlarge"}  # from its running instance


def test_throttled_launch_template_read_is_retryable_then_succeeds(aws: AwsEmulator, adapter: AwsNodeGroups) -> None:
    seed_eks(aws, "lt-gpu", launch_template={"InstanceType": "g6e.xlarge"})
    aws.inject("DescribeLaunchTemplateVersions", "throttle")
    aws.log.clear()

    with pytest.raises(Throttled) as throttled:
        adapter.discover([eks_group("lt-gpu")])
    retried = Backoff(deadline_s=5.0, base_s=0.01).call(lambda: adapter.discover([eks_group("lt-gpu")]))

    assert throttled.value.operation == "DescribeLaunchTemplateVersions"
    assert throttled.value.code == "RequestLimitExceeded"
    assert throttled.value.retryable
    assert found_types(retried) == {"lt-gpu": "g6e.xlarge"}
    assert aws.log.count("DescribeLaunchTemplateVersions") == 2  # no SDK retry hid the fault


@pytest.mark.parametrize("kind", ["server_error", "timeout"])
def test_launch_template_read_faults_are_unavailable(aws: AwsEmulator, adapter: AwsNodeGroups, kind: FaultKind) -> None:
    seed_eks(aws, "lt-gpu", launch_template={"InstanceType": "g6e.xlarge"})
    aws.timeout_hold_s = 0.05
    aws.inject("DescribeLaunchTemplateVersions", kind)

    with pytest.raises(Unavailable) as failed:
        adapter.discover([eks_group("lt-gpu")])

    assert failed.value.operation == "DescribeLaunchTemplateVersions"
    assert aws.log.count("DescribeLaunchTemplateVersions") == 1
