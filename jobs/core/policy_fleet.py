"""The fleet sections of the policy: clusters, node groups and their locators, and the fleet resolution that
gives every node group its cluster (declared in ``clusters``, or implied by the locators)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, StrictInt, model_validator

from jobs.core.policy_fields import KubeContext, Model, Name, check_matchers, check_url
from jobs.core.policy_schedule import Schedule
from jobs.core.policy_wake import Wake
from jobs.core.providers import CLOUDS, PROVIDERS, SECTION_KINDS, rules_for


class WorkingSize(Model):
    """The size a group has while up. Without it, the job restores what the group had before shutdown."""

    # Strict: YAML's true is not 1, and "4" is not a number (the JSON Schema agrees).
    min: StrictInt = Field(ge=0)
    desired: StrictInt = Field(ge=0)
    max: StrictInt = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> WorkingSize:
        if not self.min <= self.desired <= self.max:
            raise ValueError(f"needs min <= desired <= max, got {self.min} <= {self.desired} <= {self.max}")
        return self


class AwsLocator(Model):
    """An EKS managed node group (``cluster`` + ``nodegroup``) or a plain ASG (``autoScalingGroup``)."""

    region: str
    cluster: str | None = None
    nodegroup: str | None = None
    auto_scaling_group: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> AwsLocator:
        eks = self.cluster is not None or self.nodegroup is not None
        if eks and self.auto_scaling_group is not None:
            raise ValueError("give cluster+nodegroup (EKS) or autoScalingGroup (plain ASG), not both")
        if eks and (self.cluster is None or self.nodegroup is None):
            raise ValueError("an EKS node group needs both cluster and nodegroup")
        if not eks and self.auto_scaling_group is None:
            raise ValueError("needs cluster+nodegroup (EKS) or autoScalingGroup (plain ASG)")
        return self


class GcpLocator(Model):
    project: str
    location: str
    cluster: str
    node_pool: str


class AzureLocator(Model):
    subscription: str
    resource_group: str
    cluster: str
    agent_pool: str


class KarpenterLocator(Model):
    """A Karpenter NodePool, reached through its cluster's own Kubernetes API: ``cluster`` is the policy's name of a
    cluster declared in ``clusters``, whose cloud is the group's (EKS, or AKS node auto-provisioning)."""

    kind: ClassVar[str] = "karpenter"  # the provider row (jobs.core.providers), not a field
    cluster: Name
    node_pool: str = Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class Prewarm(Model):
    """Karpenter: placeholder pods that bring the pool's nodes ``warmUp`` before its window opens."""

    nodes: StrictInt = Field(ge=1, le=100, description="placeholder pods, one node's GPUs each (gpusPerNode, else 1)")


class AwsCluster(Model):
    """An EKS cluster (its plain ASGs of self-managed nodes join it by ``cluster:``)."""

    region: str
    cluster: str


class GcpCluster(Model):
    project: str
    location: str
    cluster: str


class AzureCluster(Model):
    subscription: str
    resource_group: str
    cluster: str


ClusterLocator = AwsCluster | GcpCluster | AzureCluster


class PrometheusSource(Model):
    """Where the cluster's DCGM metrics are; ``matchers`` select this cluster's series in a shared Prometheus/Thanos."""

    url: Annotated[str, AfterValidator(check_url)]
    matchers: Annotated[dict[str, str], AfterValidator(check_matchers)] = Field(default_factory=dict)


class Cluster(Model):
    """One Kubernetes cluster of the fleet. What its API shows is true of it only."""

    name: Name = Field(description="unique id used by --cluster, logs and records")
    cloud: Literal["aws", "gcp", "azure"]
    aws: AwsCluster | None = None
    gcp: GcpCluster | None = None
    azure: AzureCluster | None = None
    kube_context: KubeContext | None = Field(
        default=None, description="the kubeconfig context that reaches it (a central install acts through it)"
    )
    prometheus: PrometheusSource | None = None

    @model_validator(mode="after")
    def _locator_matches_cloud(self) -> Cluster:
        given = [c for c in CLOUDS if getattr(self, c) is not None]
        if given and given != [self.cloud]:
            raise ValueError(f"cloud {self.cloud} takes only the locator `{self.cloud}:` (found: {given})")
        return self

    @property
    def locator(self) -> ClusterLocator | None:
        """None for a cluster the cloud does not manage (e.g. kOps on EC2): only plain ASGs can join it."""
        return self.aws or self.gcp or self.azure


def _cloud_or_section(schema: dict[str, Any]) -> None:
    """The JSON Schema's view of ``cloud``: required, unless a section kind's locator (``karpenter:``) names the
    cluster whose cloud it is (the policy fills it in, ``cloud_of_sections``)."""
    schema["required"] = [r for r in schema.get("required", []) if r != "cloud"]
    schema["anyOf"] = [{"required": ["cloud"]}, *({"required": [kind]} for kind in SECTION_KINDS)]


class NodeGroup(Schedule):
    model_config = ConfigDict(json_schema_extra=_cloud_or_section)

    name: Name = Field(description="unique id used everywhere else (overrides, logs, records)")
    cloud: Literal["aws", "gcp", "azure"]
    cluster: str | None = Field(
        default=None,
        description="the cluster (in `clusters`) the group's nodes join; implied by EKS, GKE and AKS locators",
    )
    aws: AwsLocator | None = None
    gcp: GcpLocator | None = None
    azure: AzureLocator | None = None
    karpenter: KarpenterLocator | None = Field(
        default=None, description="a Karpenter NodePool in a declared cluster; the group's cloud is the cluster's"
    )
    always_on: StrictBool = False
    gpus_per_node: StrictInt | None = Field(default=None, ge=1, description="for GPU-hour estimates")
    up: WorkingSize | None = None
    strategy: Literal["scale", "stop"] = Field(
        default="scale", description="AKS only: scale the pool to 0, or stop it (power state Stopped)"
    )
    autoscaler_wake_up: StrictBool = Field(
        default=False,
        description="EKS: keep the Cluster Autoscaler discovery tags at night, so pending pods can wake the group",
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="labels of the group's nodes, where the provider sets none (plain ASGs)"
    )
    wake: Wake | None = Field(default=None, description="out of hours, a Pending GPU pod may bring the group up")
    prewarm: Prewarm | None = Field(
        default=None, description="Karpenter: placeholder pods from warmUp before the window, removed when it opens"
    )

    @model_validator(mode="before")
    @classmethod
    def _section_cluster(cls, data: Any) -> Any:
        """A section kind's locator names its cluster: it is the group's ``cluster``. Its cloud comes from that
        cluster (the policy fills it in, ``cloud_of_sections``): still missing, the cluster is not declared."""
        if not isinstance(data, dict):
            return data
        for kind in SECTION_KINDS:
            section = data.get(kind)
            if not isinstance(section, dict) or not isinstance(section.get("cluster"), str):
                continue
            if "cloud" not in data:
                raise ValueError(
                    f'{kind}: cluster "{section["cluster"]}" is not declared in `clusters` (a {PROVIDERS[kind].title}'
                    " takes its cloud from its cluster)"
                )
            data = {"cluster": section["cluster"], **data}
        return data

    @model_validator(mode="after")
    def _locator_matches_cloud(self) -> NodeGroup:
        given = [c for c in CLOUDS if getattr(self, c) is not None]
        sections = [k for k in SECTION_KINDS if getattr(self, k) is not None]
        if sections:
            rules = PROVIDERS[sections[0]]
            if given or len(sections) > 1:
                raise ValueError(f"`{sections[0]}:` is the group's only locator (found also: {given + sections[1:]})")
            if self.cloud not in rules.clouds:
                raise ValueError(f"a {rules.title} is on {' or '.join(rules.clouds)}, its cluster is on {self.cloud}")
            if self.cluster != getattr(self, sections[0]).cluster:
                raise ValueError(f'cluster "{self.cluster}": the `{sections[0]}:` locator names its cluster')
            if self.up is not None:
                raise ValueError(f"`up:` sizes a group; a {rules.title} has none (its limits are recorded)")
            return self
        if self.prewarm is not None:
            raise ValueError("prewarm is for Karpenter NodePools (`karpenter:`): other kinds come back at their size")
        if given != [self.cloud]:
            raise ValueError(f"cloud {self.cloud} needs exactly one locator `{self.cloud}:` (found: {given or 'none'})")
        return self

    @model_validator(mode="after")
    def _provider_options(self) -> NodeGroup:
        if self.strategy == "stop" and not rules_for(self.cloud, self.locator).can_stop:
            stoppable = " and ".join(f"{r.title}s" for r in PROVIDERS.values() if r.can_stop)
            raise ValueError(f"strategy stop is for {stoppable} only")
        if self.strategy == "stop" and self.wake is not None:
            # A stopped pool starts with the node count it stopped with: a wake could not keep to maxNodes.
            raise ValueError("wake: a pool with strategy stop starts at its full count; wake needs strategy scale")
        return self

    @property
    def locator_key(self) -> str:
        """The policy key that holds the group's locator: its cloud's, or its section kind's (``karpenter``)."""
        return next((k for k in SECTION_KINDS if getattr(self, k) is not None), self.cloud)

    @property
    def locator(self) -> AwsLocator | GcpLocator | AzureLocator | KarpenterLocator:
        found = self.aws or self.gcp or self.azure or self.karpenter
        assert found is not None  # guaranteed by _locator_matches_cloud
        return found

    @property
    def cluster_locator(self) -> ClusterLocator | None:
        """The cluster the cloud says the group belongs to; None for a plain ASG and a Karpenter pool (they name
        their cluster)."""
        if self.karpenter is not None:
            return None
        if self.aws is not None:
            if self.aws.cluster is None:
                return None
            return AwsCluster(region=self.aws.region, cluster=self.aws.cluster)
        if self.gcp is not None:
            return GcpCluster(project=self.gcp.project, location=self.gcp.location, cluster=self.gcp.cluster)
        assert self.azure is not None
        return AzureCluster(
            subscription=self.azure.subscription, resource_group=self.azure.resource_group, cluster=self.azure.cluster
        )


def cloud_of_sections(data: Any) -> Any:
    """The raw policy with each section kind's group (``karpenter:``) given its cluster's cloud, where the group does
    not say it and ``clusters`` declares that cluster: a NodePool's cloud is its cluster's."""
    if not isinstance(data, dict) or not isinstance(data.get("nodeGroups"), list | tuple):
        return data
    clouds = {c.get("name"): c.get("cloud") for c in data.get("clusters") or () if isinstance(c, dict)}
    groups = []
    for raw in data["nodeGroups"]:
        group = raw
        if isinstance(raw, dict) and "cloud" not in raw:
            section = next((raw[k] for k in SECTION_KINDS if isinstance(raw.get(k), dict)), None)
            cloud = clouds.get(section.get("cluster")) if section is not None else None
            if isinstance(cloud, str):
                group = {**raw, "cloud": cloud}
        groups.append(group)
    return {**data, "nodeGroups": groups}


#: The cluster a policy without ``clusters`` gives to plain ASGs when no other group implies one.
DEFAULT_CLUSTER = "default"


Problem = tuple[tuple[str | int, ...], str]


class Fleet:
    """The resolved fleet: clusters, each group's cluster, and what did not resolve (as (path, message))."""

    def __init__(self) -> None:
        self.clusters: tuple[Cluster, ...] = ()
        self.membership: dict[str, str] = {}
        self.problems: list[Problem] = []


def _describe_locator(locator: ClusterLocator) -> str:
    fields = locator.model_dump(by_alias=True)
    return ", ".join(f"{k} {v}" for k, v in fields.items() if k != "cluster")


def _implied_clusters(node_groups: Sequence[NodeGroup], fleet: Fleet) -> Iterator[Cluster]:
    seen: dict[ClusterLocator, int] = {}
    names: dict[str, int] = {}
    for i, group in enumerate(node_groups):
        locator = group.cluster_locator
        if locator is None or locator in seen:
            continue
        seen[locator] = i
        if locator.cluster in names:
            other = node_groups[names[locator.cluster]]
            fleet.problems.append(
                (
                    ("nodeGroups", i, group.cloud),
                    f'cluster "{locator.cluster}" ({_describe_locator(locator)}) has the same name as the cluster of'
                    f" nodeGroups[{names[locator.cluster]}] ({other.name}): declare `clusters:` with distinct names",
                )
            )
            continue
        names[locator.cluster] = i
        yield Cluster.model_validate({"name": locator.cluster, "cloud": group.cloud, group.cloud: locator})


def resolve_fleet(declared: Sequence[Cluster], node_groups: Sequence[NodeGroup]) -> Fleet:
    """Every node group's cluster: the declared clusters, or those the locators imply when none are declared."""
    fleet = Fleet()
    clusters = list(declared) if declared else list(_implied_clusters(node_groups, fleet))
    by_locator = {c.locator: c for c in clusters if c.locator is not None}
    by_name = {c.name: c for c in clusters}
    for i, group in enumerate(node_groups):
        locator = group.cluster_locator
        if locator is not None:
            found = by_locator.get(locator)
            if found is None:
                # Only reachable with declared clusters: implied ones cover every locator.
                fleet.problems.append(
                    (
                        ("nodeGroups", i, group.cloud),
                        f'cluster "{locator.cluster}" ({_describe_locator(locator)}) is not declared in `clusters`',
                    )
                )
                continue
            if group.cluster is not None and group.cluster != found.name:
                fleet.problems.append(
                    (("nodeGroups", i, "cluster"), f'"{group.cluster}": the locator says cluster "{found.name}"')
                )
                continue
            fleet.membership[group.name] = found.name
        elif group.cluster is not None:
            if group.cluster not in by_name:
                fleet.problems.append((("nodeGroups", i, "cluster"), f'unknown cluster "{group.cluster}"'))
                continue
            fleet.membership[group.name] = group.cluster
        elif len(clusters) == 1:
            fleet.membership[group.name] = clusters[0].name
        elif not clusters:
            # A single-cluster user with plain ASGs only: one anonymous cluster, reached through the current context.
            clusters.append(Cluster(name=DEFAULT_CLUSTER, cloud="aws"))
            by_name[DEFAULT_CLUSTER] = clusters[-1]
            fleet.membership[group.name] = DEFAULT_CLUSTER
        else:
            fleet.problems.append(
                (
                    ("nodeGroups", i, "cluster"),
                    "required: a plain Auto Scaling group names the cluster its nodes join"
                    f" (one of {', '.join(sorted(by_name))})",
                )
            )
    fleet.clusters = tuple(clusters)
    return fleet


def declared_cluster_problems(declared: Sequence[Cluster]) -> list[Problem]:
    """Declared clusters with the same name or the same locator."""
    problems: list[Problem] = []
    names: dict[str, int] = {}
    locators: dict[ClusterLocator, int] = {}
    for i, cluster in enumerate(declared):
        if cluster.name in names:
            problems.append(
                (("clusters", i, "name"), f'"{cluster.name}" is already used by clusters[{names[cluster.name]}]')
            )
        names.setdefault(cluster.name, i)
        if cluster.locator is not None:
            if cluster.locator in locators:
                problems.append(
                    ((("clusters", i, cluster.cloud)), f"same cluster as clusters[{locators[cluster.locator]}]")
                )
            locators.setdefault(cluster.locator, i)
    return problems
