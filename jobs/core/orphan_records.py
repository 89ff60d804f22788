"""Records of node groups the policy no longer names: what gpu-jobs left changed, and how a person undoes it.

A group removed from the policy while it was down stays down: nothing reads its record again. Every run reports
such a record (which group, the sizes it would restore, since when) with the cloud CLI commands that restore the
group and the one that drops the record once handled. A record in phase ``stopping`` or ``down`` is a failed item
(the policy says nothing about the group, yet gpu-jobs left it changed); one in phase ``up`` left nothing changed
and is only listed. Pure: the commands are data, rendered from the record and its identity.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from jobs.core.group_config import GroupConfig
from jobs.core.group_identity import GroupIdentity
from jobs.core.group_record import Record
from jobs.core.providers import ProviderKind, rules_of_identity

#: What a left-down group's report says (the failed item's reason).
LEFT_DOWN = "a group left down by gpu-jobs that the policy no longer names: restore it or delete its record"


@dataclass(frozen=True)
class OrphanRecord:
    """A record ConfigMap no group of the policy claims. ``record`` is None when it cannot be read (``error``)."""

    name: str  # the ConfigMap
    namespace: str
    record: Record | None
    error: str | None = None
    context: str | None = None  # the kubeconfig context of its cluster, for the delete command

    @property
    def identity(self) -> GroupIdentity | None:
        return self.record.describes if self.record is not None else None

    @property
    def failed(self) -> bool:
        """Whether gpu-jobs may have left the group changed (or cannot tell): anything but a readable ``up``."""
        return self.record is None or self.record.phase != "up"

    @property
    def reason(self) -> str:
        if self.record is None:
            return f"record ConfigMap {self.name} of no group in the policy cannot be read ({self.error}): delete it"
        if not self.failed:
            return "record of a group the policy no longer names, restored (phase up): nothing left changed"
        return LEFT_DOWN

    @property
    def restore(self) -> tuple[str, ...]:
        """The commands that bring the group back to its recorded configuration, in order (none when unknown)."""
        identity = self.identity
        if self.record is None or identity is None or not self.failed:
            return ()
        return restore_commands(identity, self.record.config)

    @property
    def delete(self) -> str:
        context = f" --context {shlex.quote(self.context)}" if self.context else ""
        return f"kubectl{context} -n {shlex.quote(self.namespace)} delete configmap {shlex.quote(self.name)}"


def _cmd(*words: object) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


def restore_commands(identity: GroupIdentity, config: GroupConfig) -> tuple[str, ...]:
    """The provider's own CLI commands that restore ``config`` on the group ``identity`` names: its provider is the
    table's (``rules_of_identity``, by its cloud and locator keys); none for a provider the table does not know."""
    loc = dict(identity.locator)
    rules = rules_of_identity(identity.cloud, loc)
    return RESTORE_COMMANDS[rules.kind](loc, config) if rules is not None else ()


def _karpenter(loc: dict[str, str], config: GroupConfig) -> tuple[str, ...]:
    """A JSON patch ``add`` replaces ``spec.limits`` whole, so the limits come back exactly (keys added at night
    go); none recorded removes them."""
    ops: list[dict[str, object]] = [
        {"op": "add", "path": "/spec/limits", "value": dict(config.limits)}
        if config.limits
        else {"op": "remove", "path": "/spec/limits"}
    ]
    if config.replicas is not None:
        ops.append({"op": "add", "path": "/spec/replicas", "value": config.replicas})
    patch = json.dumps(ops, separators=(",", ":"), sort_keys=True)
    return (_cmd("kubectl", "patch", "nodepool", loc.get("nodePool", ""), "--type", "json", "-p", patch),)


def _aws(loc: dict[str, str], config: GroupConfig) -> tuple[str, ...]:
    region = loc.get("region", "")
    desired = config.desired if config.desired is not None else config.min
    if "nodegroup" in loc:
        where = ("--region", region, "--cluster-name", loc.get("cluster", ""), "--nodegroup-name", loc["nodegroup"])
        sizes = f"minSize={config.min},maxSize={config.max},desiredSize={desired}"
        commands = [_cmd("aws", "eks", "update-nodegroup-config", *where, "--scaling-config", sizes)]
        if config.autoscaling and config.autoscaler_tags:
            # The tags live on the node group's Auto Scaling group, which the record does not name: look it up.
            query = ("--query", "nodegroup.resources.autoScalingGroups[0].name", "--output", "text")
            commands.append(f"ASG=$({_cmd('aws', 'eks', 'describe-nodegroup', *where, *query)})")
        asg = "$ASG"
    else:
        asg = loc.get("autoScalingGroup", "")
        commands = [
            _cmd(
                "aws",
                "autoscaling",
                "update-auto-scaling-group",
                "--region",
                region,
                "--auto-scaling-group-name",
                asg,
                "--min-size",
                config.min,
                "--desired-capacity",
                desired,
                "--max-size",
                config.max,
            )
        ]
    if config.autoscaling and config.autoscaler_tags:
        # The Cluster Autoscaler's discovery tags were removed from the Auto Scaling group at shutdown.
        # Double quotes: $ASG expands, the rest is literal (tag keys and values hold no quote or dollar sign).
        tags = [
            f"ResourceId={asg},ResourceType=auto-scaling-group,Key={k},Value={v},"
            f"PropagateAtLaunch={'true' if k in config.propagated_tags else 'false'}"
            for k, v in sorted(config.autoscaler_tags.items())
        ]
        quoted = " ".join(f'"{t}"' for t in tags)
        commands.append(f"aws autoscaling create-or-update-tags --region {shlex.quote(region)} --tags {quoted}")
    return tuple(commands)


def _gcp(loc: dict[str, str], config: GroupConfig) -> tuple[str, ...]:
    where = (
        "--cluster",
        loc.get("cluster", ""),
        "--location",
        loc.get("location", ""),
        "--project",
        loc.get("project", ""),
    )
    pool = loc.get("nodePool", "")
    desired = config.desired if config.desired is not None else config.min
    resize = ("gcloud", "container", "clusters", "resize", loc.get("cluster", ""), "--node-pool", pool)
    commands = [_cmd(*resize, "--num-nodes", desired, *where[2:], "--quiet")]  # per zone, as the record counts
    if config.autoscaling:
        autoscale = ["--enable-autoscaling", "--min-nodes", config.min, "--max-nodes", config.max]
        if config.autoscaler_profile:
            autoscale += ["--location-policy", config.autoscaler_profile]
        commands.append(_cmd("gcloud", "container", "node-pools", "update", pool, *where, *autoscale))
    return tuple(commands)


def _azure(loc: dict[str, str], config: GroupConfig) -> tuple[str, ...]:
    where = (
        "--subscription",
        loc.get("subscription", ""),
        "--resource-group",
        loc.get("resourceGroup", ""),
        "--cluster-name",
        loc.get("cluster", ""),
        "--name",
        loc.get("agentPool", ""),
    )
    desired = config.desired if config.desired is not None else config.min
    # With `strategy: stop` the pool was only stopped (its count and autoscaler kept): starting it is the restore.
    commands = [_cmd("az", "aks", "nodepool", "start", *where) + "  # only if the pool is Stopped (strategy: stop)"]
    if config.autoscaling:
        autoscale = ("--enable-cluster-autoscaler", "--min-count", config.min, "--max-count", config.max)
        commands += [
            _cmd("az", "aks", "nodepool", "scale", *where, "--node-count", desired),
            _cmd("az", "aks", "nodepool", "update", *where, *autoscale),
        ]
    else:
        commands.append(_cmd("az", "aks", "nodepool", "scale", *where, "--node-count", desired))
    return tuple(commands)


#: Each provider kind's restore commands (tests/unit/test_orphan_records.py: one for every row of the table).
RESTORE_COMMANDS: dict[ProviderKind, Callable[[dict[str, str], GroupConfig], tuple[str, ...]]] = {
    "eks": _aws,
    "asg": _aws,
    "gke": _gcp,
    "aks": _azure,
    "karpenter": _karpenter,
}
