"""GCP GPU quotas through Cloud Quotas (``google-cloud-quotas``, ``cloudquotas_v1``) over REST, and the Compute
machine types that convert instances into GPUs or vCPUs.

Cloud Quotas facts this module is shaped by:
- The limit is in the quota's ``QuotaInfo``, one value per dimension combination (the empty one is the default).
- A request is a ``QuotaPreference``: one per quota + dimensions, upserted (``allow_missing``, the current
  ``etag``), so a resent write changes nothing; ``contact_email`` is input only and sent with every increase.
- ``reconciling`` while the service decides; then ``granted_value`` below ``preferred_value`` is a partial grant,
  or a denial when ``state_detail`` says so.
- A ``QuotaInfo`` has no usage: for headroom the usage is Compute's own, ``regions.get`` ``quotas[]`` (metric
  ``NVIDIA_H100_GPUS``, ``PREEMPTIBLE_NVIDIA_L4_GPUS``, ``CPUS``...), the same quota seen from Compute.
- Every Cloud Quotas method needs one of two permissions: ``cloudquotas.quotas.get`` (quotaInfos.get/list,
  quotaPreferences.get/list) or ``cloudquotas.quotas.update`` (quotaPreferences.create/patch).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud import cloudquotas_v1, container_v1

from jobs.adapters.gcp.errors import translated as _translated
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.cloud_quotas import GCP_FAMILY_QUOTA, Asked, CloudRequest, GroupSize, Outcome, QuotaFacts, Shape
from jobs.core.policy import GcpLocator, NodeGroup
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.errors import NotFound

#: Exactly the IAM permissions behind the calls below.
PERMISSIONS = Permissions(
    "gcp",
    (
        "cloudquotas.quotas.get",  # quotaInfos.get, quotaPreferences.list (dimensions are matched here)
        "cloudquotas.quotas.update",  # quotaPreferences.patch (allowMissing: also creates)
        "compute.machineTypes.list",  # machineTypes.aggregatedList (instances, node pools)
        "compute.regions.get",  # regions.get: the region quotas' usage, for headroom
        "container.clusters.get",  # nodePools.get
    ),
)

SERVICE = "compute.googleapis.com"
COMPUTE_ENDPOINT = "https://compute.googleapis.com"
#: The per-family GPU quota ids of Cloud Quotas (NVIDIA-H100-GPUS-per-project-region and its PREEMPTIBLE- twin).


def unit_of(quota_id: str) -> str:
    """GPU quotas count GPUs, the others (CPUS-per-project-region...) vCPUs."""
    return "GPU" if "GPU" in quota_id.upper() else "vCPU"


def compute_metric(quota_id: str, dimensions: Mapping[str, str]) -> str | None:
    """The Compute region quota metric behind a Cloud Quotas quota id (and its dimensions), or None when Compute
    reports it under no region metric: ``GPUS-PER-GPU-FAMILY-per-project-region`` with ``gpu_family: NVIDIA_H100``
    is ``NVIDIA_H100_GPUS``; ``PREEMPTIBLE-NVIDIA-L4-GPUS-per-project-region`` is ``PREEMPTIBLE_NVIDIA_L4_GPUS``."""
    if quota_id == "GPUS-PER-GPU-FAMILY-per-project-region":
        family = dimensions.get("gpu_family")
        return f"{family}_GPUS" if family else None
    if quota_id == "CPUS-per-project-region":
        return "CPUS"
    found = GCP_FAMILY_QUOTA.fullmatch(quota_id)
    if found is None:
        return None
    prefix = "PREEMPTIBLE_" if found["preemptible"] else ""
    return f"{prefix}{found['family'].replace('-', '_')}_GPUS"


def gpu_family(accelerator: str) -> str:
    """Compute's accelerator type as the GPU family its quotas are counted in (the ``gpu_family`` dimension, the
    ``NVIDIA_<family>_GPUS`` region metric): ``nvidia-tesla-t4`` is ``NVIDIA_T4``, ``nvidia-a100-80gb`` is
    ``NVIDIA_A100_80GB`` (the A100's two sizes are two families), ``nvidia-h100-80gb`` is ``NVIDIA_H100`` and
    ``nvidia-h200-141gb`` ``NVIDIA_H200`` (one size each: the family carries no size), ``nvidia-h100-mega-80gb``
    ``NVIDIA_H100_MEGA``."""
    name = accelerator.lower().removeprefix("nvidia-").removeprefix("tesla-")
    if name.startswith(("h100", "h200")):
        name = re.sub(r"-\d+gb$", "", name)
    return "NVIDIA_" + name.replace("-", "_").upper()


def _shape_name(machine_type: str, accelerators: Sequence[tuple[str, int]]) -> str:
    """A node pool's shape: its machine type, plus the GPUs attached to each node where there are any
    (``n1-standard-8+1xnvidia-tesla-t4``), so the conversion shows and counts them."""
    return "+".join([machine_type, *(f"{count}x{kind}" for kind, count in accelerators if count)])


def _split_shape(name: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    machine_type, *attached = name.split("+")
    pairs = [part.partition("x") for part in attached]
    return machine_type, tuple((kind, int(count)) for count, _, kind in pairs)


def preference_id(entry: CloudQuota) -> str:
    return f"gpu-jobs-{entry.name}"


class GcpQuotas:
    """``QuotaCloud`` for GCP; one client per API, built on first use under a lock; SDK retries off."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._quotas: cloudquotas_v1.CloudQuotasClient | None = None
        self._gke: container_v1.ClusterManagerClient | None = None

    # --- QuotaCloud ---------------------------------------------------------------------------------------------

    def read(self, entry: CloudQuota, remembered: Asked | None) -> QuotaFacts:
        quota_id, unit = str(entry.quota_id), unit_of(str(entry.quota_id))
        name = f"projects/{entry.project}/locations/global/services/{SERVICE}/quotaInfos/{quota_id}"
        try:
            with _translated("quotaInfos.get", name):
                info = self._client().get_quota_info(name=name, **self._options())
        except NotFound as exc:
            return QuotaFacts(unit, None, error=f"{quota_id}: no such quota in project {entry.project} ({exc})")
        wanted = entry.gcp_dimensions
        values = {frozenset(d.dimensions.items()): int(d.details.value) for d in info.dimensions_infos}
        limit = values.get(frozenset(wanted.items()), values.get(frozenset(), 0))
        fixed = None
        if info.is_fixed:
            fixed = f"{quota_id} is fixed (isFixed)"
        elif "quota_increase_eligibility" in info and not info.quota_increase_eligibility.is_eligible:
            why = info.quota_increase_eligibility.ineligibility_reason.name
            fixed = f"{quota_id} cannot be raised (quotaIncreaseEligibility: {why})"
        preference = self._preference(entry)
        request = _request(preference) if preference is not None else None
        return QuotaFacts(
            unit,
            limit,
            usage=self._usage(entry) if entry.headroom is not None else None,
            fixed=fixed,
            open_request=request if request is not None and request.outcome == "open" else None,
            followed=request if remembered is not None else None,
        )

    def shapes(self, entry: CloudQuota, names: Sequence[str]) -> Mapping[str, Shape | str]:
        unit = unit_of(str(entry.quota_id))
        out: dict[str, Shape | str] = {}
        for name in names:
            machine_name, attached = _split_shape(name)
            found = self._machine_type(str(entry.project), entry.region, machine_name)
            if found is None:
                out[name] = f"{machine_name}: not a machine type in {entry.region or 'the project'}"
                continue
            built_in = [
                (str(a.get("guestAcceleratorType")), int(a.get("guestAcceleratorCount", 0)))
                for a in found.get("accelerators") or []
            ]
            # Accelerator-optimized types (A2, A3, G2) carry their GPUs; an N1 pool's GPUs are attached to it. GKE
            # lists an A3 pool's built-in GPUs as its accelerators too: counted once.
            gpus = built_in or list(attached)
            family = next((gpu_family(kind) for kind, _ in gpus), None)
            per = sum(n for _, n in gpus) if unit == "GPU" else int(found.get("guestCpus", 0))
            out[name] = Shape(name, per, unit, family=family)
        return out

    def group(self, group: NodeGroup) -> GroupSize | str:
        loc = group.locator
        if not isinstance(loc, GcpLocator):
            return f"node group {group.name} is not a GKE node pool"
        path = f"projects/{loc.project}/locations/{loc.location}/clusters/{loc.cluster}/nodePools/{loc.node_pool}"
        with _translated("nodePools.get", path):
            pool = self._gke_client().get_node_pool(name=path, **self._options())
        zones = max(1, len(pool.locations))
        per_zone = pool.autoscaling.max_node_count if pool.autoscaling.enabled else pool.initial_node_count
        spot = pool.config.spot or pool.config.preemptible
        shape = _shape_name(
            pool.config.machine_type, [(a.accelerator_type, int(a.accelerator_count)) for a in pool.config.accelerators]
        )
        # GKE counts nodes per zone: the group's working maximum is that times its zones.
        capacity = "spot" if spot else "on-demand"
        return GroupSize(group.name, shape, per_zone * zones, capacity, zones=zones)

    def file(self, entry: CloudQuota, value: int) -> CloudRequest:
        current = self._preference(entry)
        name = (
            current.name
            if current is not None
            else f"projects/{entry.project}/locations/global/quotaPreferences/{preference_id(entry)}"
        )
        preference = cloudquotas_v1.QuotaPreference(
            name=name,
            service=SERVICE,
            quota_id=str(entry.quota_id),
            dimensions=entry.gcp_dimensions,
            quota_config=cloudquotas_v1.QuotaConfig(preferred_value=value),
            contact_email=str(entry.contact_email),  # never echoed back: sent with every increase
            justification=entry.justification or "",
            etag=current.etag if current is not None else "",
        )
        with _translated("quotaPreferences.patch", name):
            stored = self._client().update_quota_preference(
                request=cloudquotas_v1.UpdateQuotaPreferenceRequest(quota_preference=preference, allow_missing=True),
                **self._options(),
            )
        return _request(stored)

    # --- internals ----------------------------------------------------------------------------------------------

    def _preference(self, entry: CloudQuota) -> cloudquotas_v1.QuotaPreference | None:
        """The one preference for this quota and dimensions, whoever made it (ours, or one made in the console)."""
        parent = f"projects/{entry.project}/locations/global"
        wanted = entry.gcp_dimensions
        with _translated("quotaPreferences.list", parent):
            found = [
                p
                for p in self._client().list_quota_preferences(
                    request={"parent": parent, "filter": f'quotaId="{entry.quota_id}"'}, **self._options()
                )
                if p.service == SERVICE and dict(p.dimensions) == wanted
            ]
        ours = [p for p in found if p.name.endswith("/" + preference_id(entry))]
        return next(iter(ours or found), None)

    def _usage(self, entry: CloudQuota) -> int | None:
        """What the region uses of the quota, from Compute's own region quotas (None: Compute does not say)."""
        metric = compute_metric(str(entry.quota_id), entry.gcp_dimensions)
        if metric is None or not entry.region:
            return None
        url = f"{self._compute_base()}/compute/v1/projects/{entry.project}/regions/{entry.region}"
        # Plain JSON over the auth transport, not compute_v1: importing that SDK costs ~150 MiB and seconds for one
        # read (as in the nodegroups adapter); metric stays a plain string either way.
        region = self._compute_get("regions.get", url, {"fields": "quotas"})
        for quota in region.get("quotas") or []:
            if quota.get("metric") == metric:
                return int(float(quota.get("usage", 0)))
        return None

    def _compute_base(self) -> str:
        return (self._settings.gcp_endpoint or COMPUTE_ENDPOINT).rstrip("/")

    def _compute_get(self, operation: str, url: str, params: dict[str, str]) -> dict[str, Any]:
        from google.auth.transport.requests import AuthorizedSession  # noqa: PLC0415

        with _translated(operation, url):
            session = AuthorizedSession(self._credentials())  # type: ignore[no-untyped-call]
            response = session.get(url, params=params, timeout=self._settings.request_timeout())
            if response.status_code >= 400:
                from google.api_core import exceptions  # noqa: PLC0415

                raise exceptions.from_http_response(response)  # type: ignore[no-untyped-call]
            body: dict[str, Any] = response.json()
        return body

    def _machine_type(self, project: str, region: str | None, name: str) -> dict[str, Any] | None:
        """One machine type of the region (the same in all its zones), via Compute's aggregated list."""
        url = f"{self._compute_base()}/compute/v1/projects/{project}/aggregated/machineTypes"
        listing = self._compute_get("machineTypes.aggregatedList", url, {"filter": f"name = {name}"})
        for zone, scoped in sorted((listing.get("items") or {}).items()):
            if region is None or zone.removeprefix("zones/").startswith(region + "-"):
                for machine in scoped.get("machineTypes") or []:
                    if machine.get("name") == name:
                        return dict(machine)
        return None

    def _options(self) -> dict[str, Any]:
        return {"retry": None, "timeout": self._settings.request_timeout()}

    def _credentials(self) -> Credentials:
        if self._settings.emulator_credentials:
            anonymous: Credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
            return anonymous
        import google.auth  # noqa: PLC0415

        found: Credentials = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])[0]
        return found

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self._settings.gcp_endpoint:
            kwargs["client_options"] = {"api_endpoint": self._settings.gcp_endpoint}
        if self._settings.emulator_credentials:
            kwargs["credentials"] = self._credentials()
        return kwargs

    def _client(self) -> cloudquotas_v1.CloudQuotasClient:
        with self._lock:
            if self._quotas is None:
                with _translated("client", "cloudquotas.googleapis.com"):
                    self._quotas = cloudquotas_v1.CloudQuotasClient(transport="rest", **self._kwargs())
            return self._quotas

    def _gke_client(self) -> container_v1.ClusterManagerClient:
        with self._lock:
            if self._gke is None:
                with _translated("client", "container.googleapis.com"):
                    self._gke = container_v1.ClusterManagerClient(transport="rest", **self._kwargs())
            return self._gke


def _request(preference: cloudquotas_v1.QuotaPreference) -> CloudRequest:
    config = preference.quota_config
    preferred, granted = int(config.preferred_value), int(config.granted_value)
    outcome: Outcome
    if preference.reconciling:
        outcome, status = "open", "reconciling"
    elif granted >= preferred:
        outcome, status = "approved", "granted"
    elif "denied" in config.state_detail.lower():
        outcome, status = "denied", "denied"
    else:
        outcome, status = "partial", "partially granted"
    ids = {"traceId": config.trace_id} if config.trace_id else {}
    return CloudRequest(preference.name, status, outcome, preferred, granted, ids)
