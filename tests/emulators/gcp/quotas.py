"""Cloud Quotas v1 over REST: QuotaInfo (the current limits) and QuotaPreference (the requests).

Provider rules enforced here:
- Every quota of the service has a QuotaInfo, seeded or not: :data:`CATALOG` gives the Compute quotas' dimensions
  and defaults (a fresh project's values), ``dimensionsInfos`` carries the default (empty ``dimensions``) and the
  per-dimension values; only an id the service does not have is 404. ``isFixed`` and ``quotaIncreaseEligibility``
  are set per quota (:meth:`Quotas.set_traits`): an increase of a fixed quota is 400 INVALID_ARGUMENT, of an
  ineligible one 400 FAILED_PRECONDITION (the emulator's wording).
- An increase (preferred value above the current limit) needs ``contactEmail``, else 400 INVALID_ARGUMENT.
  ``contactEmail`` is input only: it is never echoed back, so each increasing write must carry it again.
  Every stored preference carries a ``traceId``.
- There is one preference per (quota, dimensions): a second one is 409 ALREADY_EXISTS, as is a reused id.
- An increase stays ``reconciling: true`` with ``grantedValue`` at the current limit until the test or the sandbox
  decides (:meth:`Quotas.grant` / :meth:`Quotas.deny`, now or ``after_s`` later on the emulator's clock, or
  :meth:`Quotas.decide_next` for preferences not written yet), never because someone polled it. A grant raises the
  QuotaInfo value; a partial grant leaves ``grantedValue < preferredValue`` and says so in ``stateDetail``.
- A decrease takes effect at once, unless a safety check refuses it (400 FAILED_PRECONDITION, ErrorInfo reason
  the check's name): below the current usage (``QUOTA_DECREASE_BELOW_USAGE``) or by more than 10 percent
  (``QUOTA_DECREASE_PERCENTAGE_TOO_HIGH``), each waived by ``ignoreSafetyChecks``.
- update honours ``updateMask`` (service, quotaId and dimensions are immutable), ``allowMissing`` (upsert),
  ``validateOnly`` and a stale ``etag`` (409 ABORTED).
- list supports ``filter`` terms ``service=``, ``quotaId=`` and ``reconciling=`` joined by ``AND``, and paging.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from google.cloud import cloudquotas_v1

from tests.emulators.base import FaultKind
from tests.emulators.gcp.wire import (
    SEG,
    ApiError,
    Call,
    GoogleError,
    Reply,
    Route,
    google_fault,
    new_etag,
    page,
    proto_reply,
    route,
)

COMPUTE_SERVICE = "compute.googleapis.com"
QuotaPreference = cloudquotas_v1.QuotaPreference
Dims = frozenset[tuple[str, str]]

_PARENT = f"/v1/projects/(?P<project>{SEG})/locations/global"
_MUTABLE = {"quotaConfig", "quotaConfig.preferredValue", "justification", "contactEmail"}
_IMMUTABLE = {"service", "quotaId", "dimensions"}
_FILTER_TERM = re.compile(r'^\s*(service|quotaId|reconciling)\s*=\s*"?([^"\s]+)"?\s*$')
BELOW_USAGE = "QUOTA_DECREASE_BELOW_USAGE"
#: A per-family GPU quota id and its Compute metric's stem: PREEMPTIBLE-NVIDIA-L4-GPUS-per-project-region.
_PER_FAMILY = re.compile(r"((?:PREEMPTIBLE-)?NVIDIA-[A-Z0-9-]+?-GPUS)-per-project-region")
PERCENTAGE_TOO_HIGH = "QUOTA_DECREASE_PERCENTAGE_TOO_HIGH"
#: ``QuotaSafetyCheck`` as the REST transport sends it: by number (``enum-encoding=int``) or by name.
_SAFETY_CHECKS = {
    "1": BELOW_USAGE,
    "2": PERCENTAGE_TOO_HIGH,
    BELOW_USAGE: BELOW_USAGE,
    PERCENTAGE_TOO_HIGH: PERCENTAGE_TOO_HIGH,
}
#: A decrease by more than this share of the current limit needs ``QUOTA_DECREASE_PERCENTAGE_TOO_HIGH`` waived.
MAX_SAFE_DECREASE = 0.10


@dataclass(frozen=True)
class CatalogQuota:
    """What the service knows about a quota before anyone sets it: its dimensions and a fresh project's value."""

    dimension_keys: tuple[str, ...]
    default: int


_GPU_FAMILIES = ("A100", "A100-80GB", "H100", "H100-MEGA", "L4", "T4", "V100")
#: The Compute quotas a fresh project has (GPU quotas at 0, as for a new project), by quota id.
CATALOG: dict[str, CatalogQuota] = {
    **{f"NVIDIA-{f}-GPUS-per-project-region": CatalogQuota(("region",), 0) for f in _GPU_FAMILIES},
    **{f"PREEMPTIBLE-NVIDIA-{f}-GPUS-per-project-region": CatalogQuota(("region",), 0) for f in _GPU_FAMILIES},
    "GPUS-PER-GPU-FAMILY-per-project-region": CatalogQuota(("gpu_family", "region"), 0),
    "GPUS-ALL-REGIONS-per-project": CatalogQuota((), 0),
    "CPUS-per-project-region": CatalogQuota(("region",), 24),
    "CPUS-ALL-REGIONS-per-project": CatalogQuota((), 32),
}


@dataclass(frozen=True)
class Traits:
    """``isFixed`` and ``quotaIncreaseEligibility`` of a quota (``reason``: an ``IneligibilityReason`` name)."""

    is_fixed: bool = False
    eligible: bool = True
    reason: str = ""


@dataclass(frozen=True)
class Decision:
    """What the reviewers decide about an open increase: a grant (``value`` None: all of it) or a denial."""

    grant: bool
    value: int | None = None


@dataclass
class QuotaEntry:
    """One quota of one project: its dimension keys and the limit per dimension combination."""

    project: str
    service: str
    quota_id: str
    dimension_keys: tuple[str, ...]
    values: dict[Dims, int] = field(default_factory=dict)
    usage: dict[Dims, int] = field(default_factory=dict)
    traits: Traits = field(default_factory=Traits)

    def value_for(self, dims: dict[str, str]) -> int:
        return self.values.get(frozenset(dims.items()), self.values.get(frozenset(), 0))

    def usage_for(self, dims: dict[str, str]) -> int:
        return self.usage.get(frozenset(dims.items()), 0)

    def to_proto(self) -> cloudquotas_v1.QuotaInfo:
        # The metric follows the quota id: NVIDIA-A100-GPUS-per-project-region -> compute.googleapis.com/nvidia_a100_gpus
        base = re.sub(r"-per-project(-region|-zone)?$", "", self.quota_id)
        metric = f"{self.service}/{base.lower().replace('-', '_')}"
        infos = [
            cloudquotas_v1.DimensionsInfo(
                dimensions=dict(dims),
                details=cloudquotas_v1.QuotaDetails(value=value),
                applicable_locations=[dict(dims)["region"]] if "region" in dict(dims) else [],
            )
            for dims, value in sorted(self.values.items(), key=lambda item: sorted(item[0]))
        ]
        unit_scope = "".join(f"/{{{key}}}" for key in self.dimension_keys)
        return cloudquotas_v1.QuotaInfo(
            name=f"projects/{self.project}/locations/global/services/{self.service}/quotaInfos/{self.quota_id}",
            quota_id=self.quota_id,
            metric=metric,
            service=self.service,
            is_precise=True,
            container_type=cloudquotas_v1.QuotaInfo.ContainerType.PROJECT,
            dimensions=list(self.dimension_keys),
            metric_display_name=base.replace("-", " ").title(),
            quota_display_name=base.replace("-", " ").title(),
            metric_unit=f"1/{{project}}{unit_scope}",
            is_fixed=self.traits.is_fixed,
            quota_increase_eligibility=_eligibility(self.traits),
            dimensions_infos=infos,
        )


class Quotas:
    """State and REST handlers of the Cloud Quotas part."""

    def __init__(self, lock: threading.RLock, wake_at: Callable[[float], None] = lambda deadline: None) -> None:
        self._lock = lock
        self._wake_at = wake_at
        #: Quotas a test set (or a decision changed); the others answer from :data:`CATALOG`.
        self.entries: dict[tuple[str, str, str], QuotaEntry] = {}
        self.preferences: dict[str, QuotaPreference] = {}
        self._traits: dict[tuple[str, str], Traits] = {}  # (service, quota id) -> traits
        self._scheduled: list[tuple[float, str, Decision]] = []  # (due on the clock, preference name, decision)
        self._next: list[tuple[str | None, float, Decision]] = []  # (quota id or any, after_s, decision)

    def routes(self) -> list[Route]:
        infos = f"{_PARENT}/services/(?P<service>{SEG})/quotaInfos"
        return [
            route("GET", infos, "quotaInfos.list", self._list_infos),
            route("GET", f"{infos}/(?P<quota>{SEG})", "quotaInfos.get", self._get_info),
            route("GET", f"{_PARENT}/quotaPreferences", "quotaPreferences.list", self._list_prefs),
            route("POST", f"{_PARENT}/quotaPreferences", "quotaPreferences.create", self._create_pref),
            route("GET", f"{_PARENT}/quotaPreferences/(?P<pref>{SEG})", "quotaPreferences.get", self._get_pref),
            route("PATCH", f"{_PARENT}/quotaPreferences/(?P<pref>{SEG})", "quotaPreferences.patch", self._patch_pref),
        ]

    def fault(self, kind: FaultKind, operation: str, match: re.Match[str]) -> ApiError:
        # Cloud Quotas has no "busy" error of its own; a concurrent change surfaces as ABORTED.
        return google_fault(
            kind, operation, lambda: GoogleError(409, "ABORTED", "Concurrent modification, please retry.")
        )

    # ----- seeding and test hooks -----

    def set_quota(self, project: str, quota_id: str, dims: dict[str, str], value: int, service: str) -> None:
        with self._lock:
            self._materialize(project, service, quota_id, tuple(sorted(dims))).values[frozenset(dims.items())] = value

    def set_usage(self, project: str, quota_id: str, dims: dict[str, str], usage: int, service: str) -> None:
        """What the project uses of the quota (the safety checks of a decrease compare with it)."""
        with self._lock:
            self._materialize(project, service, quota_id, tuple(sorted(dims))).usage[frozenset(dims.items())] = usage

    def set_traits(self, quota_id: str, traits: Traits, service: str = COMPUTE_SERVICE) -> None:
        """Make a quota fixed or not eligible for increases (every project's)."""
        with self._lock:
            self._traits[(service, quota_id)] = traits
            for entry in self.entries.values():
                if (entry.service, entry.quota_id) == (service, quota_id):
                    entry.traits = traits

    def quota_value(self, project: str, quota_id: str, dims: dict[str, str], service: str) -> int:
        with self._lock:
            entry = self._lookup(project, service, quota_id)
            return entry.value_for(dims) if entry else 0

    def region_quotas(self, project: str, region: str) -> dict[str, tuple[int, int]]:
        """Compute's view of the region's quotas (``regions.get`` ``quotas[]``): metric -> (limit, usage). The
        per-family GPU quota ids and ``GPUS-PER-GPU-FAMILY`` (where set for a family) are the same Compute metric."""
        dims = {"region": region}
        found: dict[str, tuple[int, int]] = {}
        with self._lock:
            for quota_id in CATALOG:
                entry = self._lookup(project, COMPUTE_SERVICE, quota_id)
                family = _PER_FAMILY.fullmatch(quota_id)
                if entry is not None and family is not None:
                    found[family[1].replace("-", "_")] = (entry.value_for(dims), entry.usage_for(dims))
            by_family = self.entries.get((project, COMPUTE_SERVICE, "GPUS-PER-GPU-FAMILY-per-project-region"))
            if by_family is not None:
                for keys in (*by_family.values, *by_family.usage):
                    values = dict(keys)
                    if values.get("region") == region and "gpu_family" in values:
                        limit, usage = by_family.value_for(values), by_family.usage_for(values)
                        found[f"{values['gpu_family']}_GPUS"] = (limit, usage)
            cpus = self._lookup(project, COMPUTE_SERVICE, "CPUS-per-project-region")
            if cpus is not None:
                found["CPUS"] = (cpus.value_for(dims), cpus.usage_for(dims))
        return found

    def grant(self, name: str, value: int | None = None, after_s: float = 0.0) -> None:
        """Approve an open increase (all of it, or ``value``: a partial grant), now or ``after_s`` from now."""
        self._decide(name, Decision(True, value), after_s)

    def deny(self, name: str, after_s: float = 0.0) -> None:
        self._decide(name, Decision(False), after_s)

    def decide_next(
        self, grant: bool, value: int | None = None, after_s: float = 0.0, quota_id: str | None = None
    ) -> None:
        """The next increase written (for ``quota_id``, or any) is decided ``after_s`` seconds after it was written."""
        with self._lock:
            self._next.append((quota_id, after_s, Decision(grant, value)))

    def tick(self) -> None:
        """Apply the decisions whose time has come (the emulator runs this on every request and at each deadline)."""
        with self._lock:
            now = time.monotonic()
            due = sorted((entry for entry in self._scheduled if entry[0] <= now), key=lambda entry: entry[0])
            self._scheduled = [entry for entry in self._scheduled if entry[0] > now]
            for _, name, decision in due:
                pref = self.preferences.get(name)
                if pref is not None and pref.reconciling:
                    self._apply(pref, decision)

    def _decide(self, name: str, decision: Decision, after_s: float) -> None:
        with self._lock:
            pref = self._existing(name)
            if after_s <= 0:
                self._apply(pref, decision)
                return
            due = time.monotonic() + after_s
            self._scheduled.append((due, name, decision))
        self._wake_at(due)

    def _apply(self, pref: QuotaPreference, decision: Decision) -> None:
        config = pref.quota_config
        if decision.grant:
            granted = config.preferred_value if decision.value is None else decision.value
            config.granted_value = granted
            config.state_detail = (
                ""
                if granted == config.preferred_value
                else f"The request was partially approved: {granted} of the {config.preferred_value} requested."
            )
            self._set_limit(pref, granted)
        else:
            config.state_detail = "The quota increase request was denied."
        self._touch(pref, reconciling=False)

    def _scripted(self, pref: QuotaPreference) -> None:
        """An increase just written: the decision scripted for it (:meth:`decide_next`), if any, is scheduled."""
        for index, (quota_id, after_s, decision) in enumerate(self._next):
            if quota_id in (None, pref.quota_id):
                del self._next[index]
                if after_s <= 0:
                    self._apply(pref, decision)
                else:
                    due = time.monotonic() + after_s
                    self._scheduled.append((due, pref.name, decision))
                    self._wake_at(due)
                return

    def _lookup(self, project: str, service: str, quota_id: str) -> QuotaEntry | None:
        """The project's quota: as set, else the catalog's default (not stored), else None (no such quota)."""
        entry = self.entries.get((project, service, quota_id))
        if entry is not None or service != COMPUTE_SERVICE or quota_id not in CATALOG:
            return entry
        known = CATALOG[quota_id]
        return QuotaEntry(
            project,
            service,
            quota_id,
            known.dimension_keys,
            {frozenset(): known.default},
            traits=self._traits.get((service, quota_id), Traits()),
        )

    def _materialize(self, project: str, service: str, quota_id: str, keys: tuple[str, ...]) -> QuotaEntry:
        key = (project, service, quota_id)
        entry = self.entries.get(key) or self._lookup(project, service, quota_id)
        if entry is None:
            entry = QuotaEntry(project, service, quota_id, keys, traits=self._traits.get((service, quota_id), Traits()))
        self.entries[key] = entry
        return entry

    # ----- rules -----

    def _existing(self, name: str) -> QuotaPreference:
        pref = self.preferences.get(name)
        if pref is None:
            raise GoogleError(404, "NOT_FOUND", f"QuotaPreference {name} not found.")
        return pref

    def _entry(self, project: str, pref: QuotaPreference) -> QuotaEntry:
        if not pref.service or not pref.quota_id:
            raise GoogleError(400, "INVALID_ARGUMENT", "Both service and quota_id must be set.")
        entry = self._lookup(project, pref.service, pref.quota_id)
        if entry is None:
            raise GoogleError(
                400, "INVALID_ARGUMENT", f"Quota {pref.quota_id} of service {pref.service} does not exist."
            )
        unknown = set(pref.dimensions) - set(entry.dimension_keys)
        if unknown:
            raise GoogleError(
                400, "INVALID_ARGUMENT", f"Dimensions {sorted(unknown)} do not apply to quota {pref.quota_id}."
            )
        return entry

    def _validate(self, project: str, pref: QuotaPreference, contact_email: str, ignored: set[str]) -> int:
        """Check a preference about to be stored; return the current limit it is measured against."""
        entry = self._entry(project, pref)
        if "quota_config" not in pref:
            raise GoogleError(400, "INVALID_ARGUMENT", "quota_config is required.")
        preferred = pref.quota_config.preferred_value
        if preferred < -1:
            raise GoogleError(400, "INVALID_ARGUMENT", "preferred_value must be greater than or equal to -1.")
        dims = dict(pref.dimensions)
        current = entry.value_for(dims)
        if preferred == -1 or preferred > current:
            if not contact_email:
                raise GoogleError(400, "INVALID_ARGUMENT", "contact_email is required for quota increase requests.")
            if entry.traits.is_fixed:
                raise GoogleError(400, "INVALID_ARGUMENT", f"Quota {pref.quota_id} is fixed and cannot be increased.")
            if not entry.traits.eligible:
                reason = entry.traits.reason or "OTHER"
                raise GoogleError(
                    400,
                    "FAILED_PRECONDITION",
                    f"Quota {pref.quota_id} is not eligible for an increase ({reason}).",
                    reason=reason,
                    domain="cloudquotas.googleapis.com",
                )
        elif preferred < current:
            usage = entry.usage_for(dims)
            if preferred < usage and BELOW_USAGE not in ignored:
                raise _unsafe(BELOW_USAGE, f"The preferred value {preferred} is below the current usage {usage}.")
            if (current - preferred) > MAX_SAFE_DECREASE * current and PERCENTAGE_TOO_HIGH not in ignored:
                raise _unsafe(
                    PERCENTAGE_TOO_HIGH,
                    f"The preferred value {preferred} decreases the limit {current} by more than"
                    f" {MAX_SAFE_DECREASE:.0%}.",
                )
        return current

    def _set_limit(self, pref: QuotaPreference, value: int) -> None:
        project = pref.name.split("/")[1]
        keys = tuple(sorted(pref.dimensions))
        entry = self._materialize(project, pref.service, pref.quota_id, keys)
        entry.values[frozenset(pref.dimensions.items())] = value

    def _touch(self, pref: QuotaPreference, *, reconciling: bool) -> None:
        pref.reconciling = reconciling
        pref.etag = new_etag()
        pref.update_time = datetime.now(UTC)

    def _store(self, name: str, pref: QuotaPreference, current: int, created: datetime | None) -> QuotaPreference:
        stored = QuotaPreference(pref)
        stored.name = name
        stored.contact_email = ""  # input only: never echoed back
        stored.create_time = created or datetime.now(UTC)
        preferred = stored.quota_config.preferred_value
        stored.quota_config.state_detail = ""
        stored.quota_config.trace_id = secrets.token_hex(8)
        if preferred == -1 or preferred > current:
            stored.quota_config.granted_value = current
            self._touch(stored, reconciling=True)
        else:
            # Decreases need no review: the limit drops at once.
            stored.quota_config.granted_value = preferred
            self._touch(stored, reconciling=False)
        return stored

    def _same_target(self, pref: QuotaPreference) -> QuotaPreference | None:
        for other in self.preferences.values():
            if (other.service, other.quota_id, dict(other.dimensions)) == (
                pref.service,
                pref.quota_id,
                dict(pref.dimensions),
            ):
                return other
        return None

    def _create(
        self, project: str, pref_id: str, pref: QuotaPreference, validate_only: bool, ignored: set[str]
    ) -> QuotaPreference:
        name = f"projects/{project}/locations/global/quotaPreferences/{pref_id}"
        if name in self.preferences:
            raise GoogleError(409, "ALREADY_EXISTS", f"QuotaPreference {name} already exists.")
        current = self._validate(project, pref, pref.contact_email, ignored)
        clash = self._same_target(pref)
        if clash is not None:
            raise GoogleError(
                409, "ALREADY_EXISTS", f"QuotaPreference {clash.name} already exists for these dimensions."
            )
        stored = self._store(name, pref, current, None)
        if not validate_only:
            self.preferences[name] = stored
            if not stored.reconciling:
                self._set_limit(stored, stored.quota_config.granted_value)
            else:
                self._scripted(stored)
        return stored

    # ----- handlers -----

    def _list_infos(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            ids = {
                quota_id
                for (project, service, quota_id) in self.entries
                if (project, service) == (m["project"], m["service"])
            }
            if m["service"] == COMPUTE_SERVICE:
                ids |= set(CATALOG)
            found = (self._lookup(m["project"], m["service"], quota_id) for quota_id in sorted(ids))
            infos = [entry.to_proto() for entry in found if entry is not None]
        chunk, token = page(infos, call)
        return proto_reply(cloudquotas_v1.ListQuotaInfosResponse(quota_infos=chunk, next_page_token=token), call)

    def _get_info(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            entry = self._lookup(m["project"], m["service"], m["quota"])
            if entry is None:
                raise GoogleError(404, "NOT_FOUND", f"QuotaInfo {m['quota']} of service {m['service']} not found.")
            return proto_reply(entry.to_proto(), call)

    def _list_prefs(self, call: Call, m: re.Match[str]) -> Reply:
        wanted = _parse_filter(call.arg("filter"))
        with self._lock:
            prefs = [
                p
                for name, p in sorted(self.preferences.items())
                if name.startswith(f"projects/{m['project']}/") and _matches(p, wanted)
            ]
        chunk, token = page(prefs, call)
        return proto_reply(
            cloudquotas_v1.ListQuotaPreferencesResponse(quota_preferences=chunk, next_page_token=token), call
        )

    def _create_pref(self, call: Call, m: re.Match[str]) -> Reply:
        pref = call.parse(QuotaPreference)
        pref_id = call.arg("quotaPreferenceId") or secrets.token_hex(8)
        with self._lock:
            return proto_reply(self._create(m["project"], pref_id, pref, False, _ignored(call)), call)

    def _get_pref(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            return proto_reply(self._existing(_pref_name(m)), call)

    def _patch_pref(self, call: Call, m: re.Match[str]) -> Reply:
        body = call.parse(QuotaPreference)
        name = _pref_name(m)
        validate_only = call.flag("validateOnly")
        with self._lock:
            existing = self.preferences.get(name)
            if existing is None:
                if not call.flag("allowMissing"):
                    raise GoogleError(404, "NOT_FOUND", f"QuotaPreference {name} not found.")
                return proto_reply(self._create(m["project"], m["pref"], body, validate_only, _ignored(call)), call)
            if body.etag and body.etag != existing.etag:
                raise GoogleError(409, "ABORTED", f"The etag of QuotaPreference {name} does not match.")
            merged = _merge(existing, body, _mask(call.arg("updateMask")))
            current = self._validate(m["project"], merged, body.contact_email, _ignored(call))
            stored = self._store(name, merged, current, existing.create_time)
            if not validate_only:
                self.preferences[name] = stored
                if not stored.reconciling:
                    self._set_limit(stored, stored.quota_config.granted_value)
                else:
                    self._scripted(stored)
            return proto_reply(stored, call)


def _eligibility(traits: Traits) -> cloudquotas_v1.QuotaIncreaseEligibility:
    reasons = cloudquotas_v1.QuotaIncreaseEligibility.IneligibilityReason
    if traits.eligible:
        return cloudquotas_v1.QuotaIncreaseEligibility(is_eligible=True)
    return cloudquotas_v1.QuotaIncreaseEligibility(
        is_eligible=False, ineligibility_reason=reasons.__members__[traits.reason or "OTHER"]
    )


def _unsafe(check: str, message: str) -> GoogleError:
    return GoogleError(400, "FAILED_PRECONDITION", message, reason=check, domain="cloudquotas.googleapis.com")


def _ignored(call: Call) -> set[str]:
    """The request's ``ignoreSafetyChecks`` (repeated query parameter), by name."""
    return {_SAFETY_CHECKS.get(value, value) for value in call.query.get("ignoreSafetyChecks", [])}


def _pref_name(m: re.Match[str]) -> str:
    return f"projects/{m['project']}/locations/global/quotaPreferences/{m['pref']}"


def _camel(path: str) -> str:
    return re.sub(r"_([a-z])", lambda g: g.group(1).upper(), path)


def _mask(text: str) -> set[str]:
    return {_camel(p.strip()) for p in text.split(",") if p.strip()}


def _merge(existing: QuotaPreference, body: QuotaPreference, mask: set[str]) -> QuotaPreference:
    paths = mask or {"quotaConfig.preferredValue", "justification", "contactEmail"}
    unknown = paths - _MUTABLE - _IMMUTABLE
    if unknown:
        raise GoogleError(400, "INVALID_ARGUMENT", f"Invalid update mask paths: {sorted(unknown)}.")
    for path in paths & _IMMUTABLE:
        attr = {"quotaId": "quota_id"}.get(path, path)
        if getattr(body, attr) != getattr(existing, attr):
            raise GoogleError(400, "INVALID_ARGUMENT", f"Field {path} is immutable.")
    merged = QuotaPreference(existing)
    if paths & {"quotaConfig", "quotaConfig.preferredValue"}:
        merged.quota_config.preferred_value = body.quota_config.preferred_value
    if "justification" in paths:
        merged.justification = body.justification
    return merged


def _parse_filter(text: str) -> dict[str, str]:
    wanted: dict[str, str] = {}
    for term in (t for t in re.split(r"\s+AND\s+", text.strip()) if t):
        matched = _FILTER_TERM.match(term)
        if not matched:
            raise GoogleError(400, "INVALID_ARGUMENT", f"Unsupported filter term {term!r}.")
        wanted[matched.group(1)] = matched.group(2)
    return wanted


def _matches(pref: QuotaPreference, wanted: dict[str, str]) -> bool:
    actual = {"service": pref.service, "quotaId": pref.quota_id, "reconciling": str(pref.reconciling).lower()}
    return all(actual[key] == value for key, value in wanted.items())
