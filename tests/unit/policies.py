"""Small policies for unit tests, built from YAML text like the real file."""

from __future__ import annotations

import textwrap

from jobs.core.policy import NodeGroup, Policy
from jobs.policy_file import parse_policy

HEADER = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"


def policy_from(body: str) -> Policy:
    return parse_policy(HEADER + textwrap.dedent(body), "test.yaml")


def one_group(schedule: str, *, timezone: str = "Europe/Berlin", extra: str = "") -> tuple[Policy, NodeGroup]:
    """A policy with one AWS group ``g`` whose schedule fields are given as indented YAML lines."""
    body = f"""
    defaults:
      timezone: {timezone}
    nodeGroups:
      - name: g
        cloud: aws
        aws: {{region: eu-west-1, cluster: c, nodegroup: n}}
{textwrap.indent(textwrap.dedent(schedule), " " * 8)}
    """
    policy = policy_from(textwrap.dedent(body) + textwrap.dedent(extra))
    return policy, policy.node_groups[0]
