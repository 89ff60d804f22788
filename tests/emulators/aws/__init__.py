"""AWS emulator: moto's server plus what moto lacks (EKS node group semantics, Service Quotas for EC2)."""

from tests.emulators.aws.eks import UpdateTiming
from tests.emulators.aws.emulator import AwsEmulator, SeededNodegroup, start_aws

__all__ = ["AwsEmulator", "SeededNodegroup", "UpdateTiming", "start_aws"]
