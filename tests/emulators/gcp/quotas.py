"""Cloud Quotas v1 over REST: QuotaInfo (the current limits) and QuotaPreference (the requests).

Provider rules enforced here:
- An increase (preferred value above the current limit) needs ``contactEmail``, else 400 INVALID_ARGUMENT.
  ``contactEmail`` is input only: it is never echoed back, so each increasing write must carry it again.
- There is one preference per (quota, dimensions): a second one is 409 ALREADY_EXISTS, as is a reused id.
- An increase stays ``reconciling: true`` with ``grantedValue`` at the current limit until the test grants or
  denies it (:meth:`Quotas.grant` / :meth:`Quotas.deny`); a grant raises the QuotaInfo value. A decrease
  takes effect at once.
- update honours ``updateMask`` (service, quotaId and dimensions are immutable), ``allowMissing`` (upsert),
  ``validateOnly`` and a stale ``etag`` (409 ABORTED).
- list supports ``filter`` terms ``service=``, ``quotaId=`` and ``reconciling=`` joined by ``AND``, and paging.
"""

from __future__ import annotations

import re
import secrets
import threading
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


@dataclass
class QuotaEntry:
    """One quota of one project: its dimension keys and the limit per dimension combination."""

    project: str
    service: str
    quota_id: str
    dimension_keys: tuple[str, ...]
    values: dict[Dims, int] = field(default_factory=dict)

    def value_for(self, dims: dict[str, str]) -> int:
        return self.values.get(frozenset(dims.items()), self.values.get(frozenset(), 0))

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
            quota_increase_eligibility=cloudquotas_v1.QuotaIncreaseEligibility(is_eligible=True),
            dimensions_infos=infos,
        )


class Quotas:
    """State and REST handlers of the Cloud Quotas part."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.entries: dict[tuple[str, str, str], QuotaEntry] = {}
        self.preferences: dict[str, QuotaPreference] = {}

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
            key = (project, service, quota_id)
            entry = self.entries.setdefault(key, QuotaEntry(project, service, quota_id, tuple(sorted(dims))))
            entry.values[frozenset(dims.items())] = value

    def quota_value(self, project: str, quota_id: str, dims: dict[str, str], service: str) -> int:
        with self._lock:
            entry = self.entries.get((project, service, quota_id))
            return entry.value_for(dims) if entry else 0

    def grant(self, name: str, value: int | None = None) -> None:
        with self._lock:
            pref = self._existing(name)
            granted = pref.quota_config.preferred_value if value is None else value
            pref.quota_config.granted_value = granted
            pref.quota_config.state_detail = ""
            self._set_limit(pref, granted)
            self._touch(pref, reconciling=False)

    def deny(self, name: str) -> None:
        with self._lock:
            pref = self._existing(name)
            pref.quota_config.state_detail = "The quota increase request was denied."
            self._touch(pref, reconciling=False)

    # ----- rules -----

    def _existing(self, name: str) -> QuotaPreference:
        pref = self.preferences.get(name)
        if pref is None:
            raise GoogleError(404, "NOT_FOUND", f"QuotaPreference {name} not found.")
        return pref

    def _entry(self, project: str, pref: QuotaPreference) -> QuotaEntry:
        if not pref.service or not pref.quota_id:
            raise GoogleError(400, "INVALID_ARGUMENT", "Both service and quota_id must be set.")
        entry = self.entries.get((project, pref.service, pref.quota_id))
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

    def _validate(self, project: str, pref: QuotaPreference, contact_email: str) -> int:
        """Check a preference about to be stored; return the current limit it is measured against."""
        entry = self._entry(project, pref)
        if "quota_config" not in pref:
            raise GoogleError(400, "INVALID_ARGUMENT", "quota_config is required.")
        preferred = pref.quota_config.preferred_value
        if preferred < -1:
            raise GoogleError(400, "INVALID_ARGUMENT", "preferred_value must be greater than or equal to -1.")
        current = entry.value_for(dict(pref.dimensions))
        if (preferred == -1 or preferred > current) and not contact_email:
            raise GoogleError(400, "INVALID_ARGUMENT", "contact_email is required for quota increase requests.")
        return current

    def _set_limit(self, pref: QuotaPreference, value: int) -> None:
        project = pref.name.split("/")[1]
        entry = self.entries[(project, pref.service, pref.quota_id)]
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
        if preferred == -1 or preferred > current:
            stored.quota_config.granted_value = current
            stored.quota_config.trace_id = secrets.token_hex(8)
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

    def _create(self, project: str, pref_id: str, pref: QuotaPreference, validate_only: bool) -> QuotaPreference:
        name = f"projects/{project}/locations/global/quotaPreferences/{pref_id}"
        if name in self.preferences:
            raise GoogleError(409, "ALREADY_EXISTS", f"QuotaPreference {name} already exists.")
        current = self._validate(project, pref, pref.contact_email)
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
        return stored

    # ----- handlers -----

    def _list_infos(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            infos = [
                e.to_proto()
                for (project, service, _), e in sorted(self.entries.items())
                if project == m["project"] and service == m["service"]
            ]
        chunk, token = page(infos, call)
        return proto_reply(cloudquotas_v1.ListQuotaInfosResponse(quota_infos=chunk, next_page_token=token), call)

    def _get_info(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            entry = self.entries.get((m["project"], m["service"], m["quota"]))
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
            return proto_reply(self._create(m["project"], pref_id, pref, validate_only=False), call)

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
                return proto_reply(self._create(m["project"], m["pref"], body, validate_only), call)
            if body.etag and body.etag != existing.etag:
                raise GoogleError(409, "ABORTED", f"The etag of QuotaPreference {name} does not match.")
            merged = _merge(existing, body, _mask(call.arg("updateMask")))
            current = self._validate(m["project"], merged, body.contact_email)
            stored = self._store(name, merged, current, existing.create_time)
            if not validate_only:
                self.preferences[name] = stored
                if not stored.reconciling:
                    self._set_limit(stored, stored.quota_config.granted_value)
            return proto_reply(stored, call)


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
