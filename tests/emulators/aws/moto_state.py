"""Typed access to the moto backends the emulator's server and seeding share (same process, same objects).

moto keeps all state in module-level ``BackendDict``s keyed by account and region. The server app reads them
for every request, so seeding through these objects is exactly what boto3 will see next.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

import boto3
import moto.eks.models
from moto.autoscaling.models import FakeAutoScalingGroup, autoscaling_backends
from moto.core.base_backend import BackendDict, backend_lock
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.eks.exceptions import InvalidParameterException
from moto.eks.models import Cluster, Nodegroup, eks_backends

#: moto maps the dummy access key ``testing`` to this account.
ACCOUNT_ID: str = DEFAULT_ACCOUNT_ID

#: The image every seeded launch template and instance uses. moto does not insist that it exists, and not
#: loading moto's ~1300 default AMIs makes a fresh EC2 region cost ~3 ms instead of ~0.5 s per test.
IMAGE_ID = "ami-0a1b2c3d4e5f60718"
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")


@lru_cache(maxsize=1)
def _partitions() -> frozenset[str]:
    return frozenset(boto3.Session().get_available_partitions())


_ROLE_ARN = re.compile(r"arn:(?P<partition>.+):iam::(?P<account_id>[0-9]{12}):role/.+")


def _validate_role_arn(arn: str) -> None:
    """moto's own rule, minus building a boto3 Session (~0.3 s) on every CreateCluster/CreateNodegroup."""
    match = _ROLE_ARN.match(arn or "")
    if not match or match["partition"] not in _partitions():
        raise InvalidParameterException(message="Invalid Role Arn: '" + arn + "'")


moto.eks.models.validate_role_arn = _validate_role_arn  # type: ignore[attr-defined]


def eks(region: str) -> Any:
    return eks_backends[ACCOUNT_ID][region]


def autoscaling(region: str) -> Any:
    return autoscaling_backends[ACCOUNT_ID][region]


def ec2(region: str) -> Any:
    return ec2_backends[ACCOUNT_ID][region]


def create_asg(
    region: str,
    name: str,
    sizes: tuple[int, int, int],
    tags: dict[str, str],
    *,
    launch_template: dict[str, Any] | None = None,
    mixed_instances_policy: dict[str, Any] | None = None,
) -> None:
    """An Auto Scaling group in moto's backend over two zones; ``sizes`` is (min, desired, max) and every tag
    propagates to the instances, as EKS and the usual launch setups do."""
    low, desired, high = sizes
    autoscaling(region).create_auto_scaling_group(
        name=name,
        availability_zones=[f"{region}a", f"{region}b"],
        desired_capacity=desired,
        max_size=high,
        min_size=low,
        launch_config_name=None,
        launch_template=launch_template,
        mixed_instances_policy=mixed_instances_policy,
        vpc_zone_identifier=None,
        default_cooldown=None,
        health_check_period=None,
        health_check_type="EC2",
        load_balancers=[],
        target_group_arns=[],
        placement_group=None,
        termination_policies=[],
        tags=[
            {"ResourceId": name, "ResourceType": "auto-scaling-group", "Key": k, "Value": v, "PropagateAtLaunch": True}
            for k, v in tags.items()
        ],
    )


def find_cluster(region: str, name: str) -> Cluster | None:
    cluster: Cluster | None = eks(region).clusters.get(name)
    return cluster


def find_nodegroup(region: str, cluster: str, name: str) -> Nodegroup | None:
    found = find_cluster(region, cluster)
    return found.nodegroups.get(name) if found else None


def find_asg(region: str, name: str) -> FakeAutoScalingGroup | None:
    group: FakeAutoScalingGroup | None = autoscaling(region).autoscaling_groups.get(name)
    return group


def reset_all() -> None:
    """Forget every moto backend: they are rebuilt lazily, per region, on next use.

    ``BackendDict.reset()`` would first re-initialise every region's backend (hundreds of ms for EC2) only to
    drop them right after; dropping them directly keeps a reset well under a millisecond.
    """
    with backend_lock:
        instances: list[Any] = BackendDict._instances  # type: ignore[misc]  # moto's own registry
        for backend in instances:
            backend.clear()
        instances.clear()
