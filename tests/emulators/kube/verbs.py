"""The API verbs with the real server's semantics: create, get, list, replace (PUT), patch (four content types),
delete, and pod eviction. Every write validates, admits, tracks field managers and bumps the resourceVersion."""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import json
import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import yaml

from . import admission, apps, batch, managed_fields, patches
from .cluster import Cluster, timestamp
from .errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    internal_error,
    invalid,
    namespace_terminating,
    not_found,
    stale,
    unsupported_media_type,
)
from .resources import ResourceType, find
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from .validation import canonicalise, decode, validate_semantics

Json = dict[str, Any]

#: In the order the real server lists them in its 415.
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
)
#: Resources a PUT may create (their strategies allow create-on-update).
_CREATE_ON_UPDATE = frozenset({"leases", "events"})
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass
class WriteOptions:
    #: The ``fieldManager`` query parameter; apply requires it, other writes fall back to ``default_manager``.
    manager: str = ""
    default_manager: str = "unknown"
    field_validation: str = "Warn"
    dry_run: bool = False
    force: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def updater(self) -> str:
        return self.manager or self.default_manager


@dataclass(frozen=True)
class ListOptions:
    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""


class Api:
    """The verbs over one :class:`Cluster`."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    # Reads -----------------------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Json:
        with self.cluster.lock:
            return copy.deepcopy(self.cluster.require(rt, namespace, name))

    def list(self, rt: ResourceType, namespace: str | None, options: ListOptions) -> Json:
        labels = parse_label_selector(options.label_selector)
        fields = parse_field_selector(options.field_selector, rt)
        start, list_rv = _decode_continue(options.continue_token)
        with self.cluster.lock:
            self.cluster.settle()  # a watch looks through list: it must see what is due (pods whose time is up)
            rv = list_rv or str(self.cluster.resource_version)
            candidates = self.cluster.ordered(rt, namespace)
            if start:
                keys, in_string_order = self.cluster.list_keys(rt, namespace)
                if in_string_order:  # the page starts right after the token's key: no rescan of what came before
                    candidates = candidates[bisect.bisect_right(keys, start) :]
                else:
                    candidates = [o for o, key in zip(candidates, keys, strict=True) if key > start]
            page: list[Json] = []
            more = 0  # matches after the page (counted only when remainingItemCount needs it)
            for index, o in enumerate(candidates):
                if not (labels_match(labels, o["metadata"].get("labels")) and fields_match(fields, o)):
                    continue
                if options.limit > 0 and len(page) == options.limit:
                    more = len(candidates) - index if not labels and not fields else 1
                    break
                page.append(o)
            items = [{k: _copied(v) for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page]
        metadata: Json = {"resourceVersion": rv}
        if more:
            metadata["continue"] = _encode_continue(_sort_key(page[-1]), rv)
            if not labels and not fields:
                metadata["remainingItemCount"] = more
        return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": metadata, "items": items}

    # Create ----------------------------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: Any, options: WriteOptions) -> Json:
        obj = self._decoded(rt, namespace, body, options)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_ALPHABET, k=5))
        if meta.get("resourceVersion"):
            raise internal_error("resourceVersion should not be set on objects to be created")
        with self.cluster.lock:
            return self._create(rt, obj, options, track=True)

    def _create(self, rt: ResourceType, obj: Json, options: WriteOptions, track: bool) -> Json:
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        if rt.namespaced:
            home = self.cluster.stored(_rt("namespaces"), "", namespace)
            if home is None:
                raise not_found("namespaces", "", namespace)
            if home["metadata"].get("deletionTimestamp"):
                raise namespace_terminating(rt.plural, rt.group, name, namespace)
        for server_field in (
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            meta.pop(server_field, None)
        _reset_status_on_create(rt, obj)
        validate_semantics(rt, obj)
        if self.cluster.stored(rt, namespace, name) is not None:
            raise already_exists(rt.plural, rt.group, name)
        if rt.kind == "Pod":
            admission.admit_pod(
                obj, self.cluster.scan(_rt("resourcequotas"), namespace), self.cluster.scan(_rt("pods"), namespace)
            )
        self.cluster.new_metadata(obj)
        if rt.kind == "Job":
            batch.default_job(obj)  # the generated selector needs the uid
        if track:
            managed_fields.record_update(None, obj, options.updater, "", rt.api_version, self._now())
        if options.dry_run:
            obj["metadata"]["resourceVersion"] = ""
            return obj
        return copy.deepcopy(self.cluster.commit(rt, obj))

    # Update ----------------------------------------------------------------------------------------------------

    def replace(
        self, rt: ResourceType, namespace: str, name: str, body: Any, options: WriteOptions, subresource: str = ""
    ) -> tuple[Json, bool]:
        obj = self._decoded(rt, namespace, body, options)
        if obj["metadata"].get("name") != name:
            raise bad_request(
                f"the name of the object ({obj['metadata'].get('name')}) does not match the name on the URL ({name})"
            )
        with self.cluster.lock:
            old = self.cluster.stored(rt, namespace, name)
            if old is None:
                if rt.plural in _CREATE_ON_UPDATE and not subresource:
                    obj["metadata"].pop("resourceVersion", None)
                    return self._create(rt, obj, options, track=True), True
                raise not_found(rt.plural, rt.group, name)
            expected = obj["metadata"].get("resourceVersion")
            if expected and expected != old["metadata"]["resourceVersion"]:
                raise stale(rt.plural, rt.group, name)
            uid = obj["metadata"].get("uid")
            if uid and uid != old["metadata"]["uid"]:
                # An update's uid is a storage precondition (defaultUpdatedObjectInfo.Preconditions).
                why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old['metadata']['uid']}"
                raise conflict(rt.plural, rt.group, name, why)
            return self._update(rt, old, obj, options, subresource), False

    def _update(
        self, rt: ResourceType, old: Json, new: Json, options: WriteOptions, subresource: str, track: bool = True
    ) -> Json:
        new = _merge_subresource(rt, old, new, subresource)
        meta = new["metadata"]
        # Apply computed managedFields itself; other writes cannot set them (record_update starts from the old ones).
        kept_fields = (
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            *(("managedFields",) if track else ()),
        )
        for kept in kept_fields:
            if kept in old["metadata"]:
                meta[kept] = copy.deepcopy(old["metadata"][kept])
            else:
                meta.pop(kept, None)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        validate_semantics(rt, new, old if not subresource else None)
        if track:
            managed_fields.record_update(old, new, options.updater, subresource, rt.api_version, self._now())
        if _without_times(new) == _without_times(old):
            return copy.deepcopy(old)  # a no-op write does not bump the resourceVersion, as on the real server
        if meta.get("deletionTimestamp") and rt.kind not in ("Pod", "Namespace"):
            added = [f for f in meta.get("finalizers") or [] if f not in (old["metadata"].get("finalizers") or [])]
            if added:
                shown = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
                why = (
                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {shown}"
                )
                raise invalid(rt.kind, rt.group, meta["name"], [("FieldValueForbidden", "metadata.finalizers", why)])
            if not meta.get("finalizers") and not options.dry_run:
                # The last finalizer is gone: the deletion that waited for it completes now.
                self.cluster.remove(rt, meta.get("namespace", ""), meta["name"])
                return new
        if "generation" in meta and _spec(new) != _spec(old):
            meta["generation"] += 1
        if options.dry_run:
            return new
        return copy.deepcopy(self.cluster.commit(rt, new))

    # Patch -----------------------------------------------------------------------------------------------------

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        raw: bytes,
        options: WriteOptions,
        subresource: str = "",
    ) -> tuple[Json, bool]:
        """Returns the patched object and whether it was created (only apply creates)."""
        if content_type not in PATCH_TYPES:
            raise unsupported_media_type(PATCH_TYPES)
        if rt.custom and content_type == "application/strategic-merge-patch+json":
            # A custom resource has no Go struct to take patch strategies from: the real server refuses it.
            raise unsupported_media_type(PATCH_TYPES[:3])
        if content_type == "application/apply-patch+yaml":
            return self._apply(rt, namespace, name, raw, options, subresource)
        try:
            document = json.loads(raw or b"null")
        except ValueError as error:
            raise bad_request(f"error decoding patch: {error}") from error
        if content_type != "application/json-patch+json" and not isinstance(document, dict):
            raise bad_request("error decoding patch: the patch must be a JSON object")
        with self.cluster.lock:
            old = self.cluster.require(rt, namespace, name)
            if content_type == "application/json-patch+json":
                patched = patches.json_patch(old, document)
            elif content_type == "application/merge-patch+json":
                patched = patches.json_merge_patch(old, document)
            else:
                patched = patches.strategic_merge_patch(old, document)
            if not isinstance(patched, dict):
                raise bad_request("the patch did not produce an object")
            expected = (patched.get("metadata") or {}).get("resourceVersion")
            if expected and expected != old["metadata"]["resourceVersion"]:
                raise stale(rt.plural, rt.group, name)
            if (patched.get("metadata") or {}).get("name") != name:
                raise bad_request("metadata.name: the name of a patched object cannot change")
            _check_uid_unchanged(rt, old, patched)
            obj = self._decoded(rt, namespace, patched, options)
            return self._update(rt, old, obj, options, subresource), False

    def _apply(
        self, rt: ResourceType, namespace: str, name: str, raw: bytes, options: WriteOptions, subresource: str
    ) -> tuple[Json, bool]:
        if not options.manager:
            raise invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                [("FieldValueRequired", "fieldManager", "Required value: is required for apply requests")],
            )
        try:
            config = yaml.safe_load(raw or b"")
        except yaml.YAMLError as error:
            raise bad_request(f"error decoding YAML: {error}") from error
        if not isinstance(config, dict) or not config.get("kind") or not config.get("apiVersion"):
            raise bad_request(
                "error decoding YAML: Object 'Kind' or 'apiVersion' is missing in the applied configuration"
            )
        if (config.get("metadata") or {}).get("name") != name:
            raise bad_request(
                f"the name of the object ({(config.get('metadata') or {}).get('name')}) does not match "
                f"the name on the URL ({name})"
            )
        config = self._decoded(rt, namespace, config, options)
        config["metadata"].pop("resourceVersion", None)
        if rt.has_status and subresource != "status":
            config.pop("status", None)  # the main resource does not own status fields (and vice versa)
        if subresource == "status":
            config = {k: v for k, v in config.items() if k in ("apiVersion", "kind", "metadata", "status")}
        with self.cluster.lock:
            old = self.cluster.stored(rt, namespace, name)
            merged = managed_fields.apply(old, config, options.manager, options.force, rt.api_version, self._now())
            if old is None:
                if subresource:
                    raise not_found(rt.plural, rt.group, name)
                return self._create(rt, merged, options, track=False), True
            merged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            _check_uid_unchanged(rt, old, {"metadata": {"uid": config["metadata"].get("uid")}})
            return self._update(rt, old, merged, options, subresource, track=False), False

    # The scale subresource (autoscaling/v1 Scale of a Deployment, ReplicaSet or StatefulSet) ---------------------

    def get_scale(self, rt: ResourceType, namespace: str, name: str) -> Json:
        with self.cluster.lock:
            return apps.scale_of(copy.deepcopy(self.cluster.require(rt, namespace, name)))

    def replace_scale(self, rt: ResourceType, namespace: str, name: str, body: Any, options: WriteOptions) -> Json:
        scale = self._decoded_scale(body, options)
        with self.cluster.lock:
            old = self.cluster.require(rt, namespace, name)
            return apps.scale_of(self._update(rt, old, apps.scaled(rt, old, scale), options, "scale"))

    def patch_scale(
        self, rt: ResourceType, namespace: str, name: str, content_type: str, raw: bytes, options: WriteOptions
    ) -> Json:
        """A patch of the Scale (what ``kubectl scale`` sends: a merge patch of ``spec.replicas``), applied to the
        owner's current Scale, then written as a replace of it."""
        if content_type not in PATCH_TYPES[:2] + PATCH_TYPES[3:]:
            raise unsupported_media_type([t for t in PATCH_TYPES if t != "application/apply-patch+yaml"])
        try:
            document = json.loads(raw or b"null")
        except ValueError as error:
            raise bad_request(f"error decoding patch: {error}") from error
        with self.cluster.lock:
            old = self.cluster.require(rt, namespace, name)
            current = apps.scale_of(copy.deepcopy(old))
            if content_type == "application/json-patch+json":
                patched = patches.json_patch(current, document)
            elif content_type == "application/merge-patch+json":
                patched = patches.json_merge_patch(current, document)
            else:
                patched = patches.strategic_merge_patch(current, document)
            scale = self._decoded_scale(patched, options)
            return apps.scale_of(self._update(rt, old, apps.scaled(rt, old, scale), options, "scale"))

    def _decoded_scale(self, body: Any, options: WriteOptions) -> Json:
        if not isinstance(body, dict):
            raise bad_request(
                'Scale in version "v1" cannot be handled as a Scale: the request body is not a JSON object'
            )
        scale = copy.deepcopy(body)
        scale.setdefault("apiVersion", "autoscaling/v1")
        scale.setdefault("kind", "Scale")
        options.warnings += decode(apps.SCALE, scale, options.field_validation)
        return scale

    # Delete and eviction --------------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str, name: str, body: Any, options: WriteOptions) -> Json:
        """DELETE with DeleteOptions (``body``): preconditions first (409), then a pod is deleted gracefully, a
        namespace goes Terminating, anything else is removed at once."""
        delete_options = body if isinstance(body, dict) else {}
        preconditions = delete_options.get("preconditions") or {}
        with self.cluster.lock:
            obj = self.cluster.require(rt, namespace, name)
            for key, shown in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                expected = preconditions.get(key)
                if expected and expected != obj["metadata"].get(key):
                    # rest.BeforeDelete's wording (it checks before storage does), on the kind, not the resource.
                    why = (
                        f"the {shown} in the precondition ({expected}) does not match the {shown} in record "
                        f"({obj['metadata'].get(key)}). The object might have been "
                        + ("deleted and then recreated" if key == "uid" else "modified")
                    )
                    raise ApiError(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {rt.kind} "{name}": {why}',
                        {"name": name, "kind": rt.kind},
                    )
            if rt.kind == "Namespace":
                # Terminating until the namespace controller has deleted its content (Cluster.finalize_namespaces).
                deleted = copy.deepcopy(obj)
                deleted["metadata"].setdefault("deletionTimestamp", timestamp(self.cluster.now()))
                deleted["status"] = {"phase": "Terminating"}
                if not options.dry_run and not obj["metadata"].get("deletionTimestamp"):
                    deleted = copy.deepcopy(self.cluster.terminate_namespace(copy.deepcopy(deleted)))
                    self.cluster.finalize_namespaces()
            elif rt.kind == "Pod" and (grace := admission.pod_grace(obj, delete_options)) is not None:
                deleted = self._delete_gracefully(obj, grace, options)
            elif obj["metadata"].get("finalizers") and rt.kind != "Pod":
                # rest.BeforeDelete with finalizers: deletionTimestamp set (once), the object stays until the
                # finalizers' owners remove them (the Karpenter model for karpenter.sh/termination).
                deleted = copy.deepcopy(obj)
                if not obj["metadata"].get("deletionTimestamp"):
                    deleted["metadata"]["deletionTimestamp"] = timestamp(self.cluster.now())
                    deleted["metadata"]["deletionGracePeriodSeconds"] = 0
                    if "generation" in deleted["metadata"]:
                        deleted["metadata"]["generation"] += 1
                    if not options.dry_run:
                        deleted = copy.deepcopy(self.cluster.commit(rt, deleted))
                return deleted  # Store.Delete answers a deletion left pending with the object, for every kind
            else:
                deleted = copy.deepcopy(obj)
                if not options.dry_run:
                    self.cluster.remove(rt, namespace, name)
        if rt.delete_returns_object:
            return deleted
        details: Json = {"name": name, "kind": rt.plural, "uid": deleted["metadata"]["uid"]}
        if rt.group:
            details["group"] = rt.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _delete_gracefully(self, pod: Json, grace: int, options: WriteOptions) -> Json:
        """rest.BeforeDelete for a pod: a first delete sets the deadline; a later one may only shorten it (a
        longer or equal grace period, or none, leaves it as it is); a grace period of 0 removes the pod now."""
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        current, terminating = meta.get("deletionGracePeriodSeconds"), bool(meta.get("deletionTimestamp"))
        if terminating and current and grace >= current:
            return copy.deepcopy(pod)  # graceful deletion pending: the deadline stands
        if grace == 0 or (terminating and not current):
            deleted = copy.deepcopy(pod)
            if not options.dry_run:
                self.cluster.remove(_rt("pods"), namespace, name)
            return deleted
        deadline = self.cluster.now() + timedelta(seconds=grace)
        first = self.cluster.pod_deadline(namespace, name) if terminating else None
        if first is not None and current:  # shortened: counted from the first request, as the server recomputes it
            deadline = first - timedelta(seconds=current) + timedelta(seconds=grace)
        updated = copy.deepcopy(pod)
        if options.dry_run:
            updated["metadata"].update(deletionTimestamp=timestamp(deadline), deletionGracePeriodSeconds=grace)
            return updated
        return copy.deepcopy(self.cluster.terminate_pod(updated, grace, deadline))

    def evict(self, namespace: str, name: str, body: Any, options: WriteOptions) -> Json:
        if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
            raise bad_request("the body of the request must be an Eviction")
        body_name = (body.get("metadata") or {}).get("name")
        if body_name != name:
            raise bad_request("name in URL does not match name in Eviction object")
        pods = _rt("pods")
        with self.cluster.lock:
            pod = self.cluster.require(pods, namespace, name)
            admission.check_eviction(
                pod, self.cluster.scan(_rt("poddisruptionbudgets"), namespace), self.cluster.scan(pods, namespace)
            )
            self.delete(pods, namespace, name, body.get("deleteOptions"), options)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # Helpers ---------------------------------------------------------------------------------------------------

    def _now(self) -> str:
        return timestamp(self.cluster.now())

    def _decoded(self, rt: ResourceType, namespace: str, body: Any, options: WriteOptions) -> Json:
        """Identity checks and schema decoding shared by every write; returns a private copy of the object."""
        if not isinstance(body, dict):
            raise bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                "the request body is not a JSON object"
            )
        obj = copy.deepcopy(body)
        obj.setdefault("apiVersion", rt.api_version)
        obj.setdefault("kind", rt.kind)
        if (obj["apiVersion"], obj["kind"]) != (rt.api_version, rt.kind):
            raise bad_request(
                f"the API version in the data ({obj['apiVersion']}) or kind ({obj['kind']}) does not "
                f"match the expected API version ({rt.api_version}) and kind ({rt.kind})"
            )
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: metadata')
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        options.warnings += decode(rt, obj, options.field_validation)
        canonicalise(rt, obj)
        return obj


def _check_uid_unchanged(rt: ResourceType, old: Json, patched: Json) -> None:
    """A patch that names another uid changes an immutable field: 422 (ValidateObjectMetaUpdate). This is what
    makes ``metadata.uid`` in a patch a precondition: the patch lands only on the object that has that uid."""
    uid = (patched.get("metadata") or {}).get("uid")
    if uid and uid != old["metadata"]["uid"]:
        name = old["metadata"]["name"]
        raise invalid(
            rt.kind,
            rt.group,
            name,
            [("FieldValueInvalid", "metadata.uid", f'Invalid value: "{uid}": field is immutable')],
        )


def _rt(plural: str) -> ResourceType:
    found = find("", "v1", plural) or find("policy", "v1", plural)
    assert found is not None
    return found


def _copied(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists, scalars): several times quicker than ``copy.deepcopy``, which
    dominated the serving of a 500-item list page."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)


def _sort_key(obj: Json) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _encode_continue(start: str, rv: str) -> str:
    raw = json.dumps({"v": "emulator/v1", "rv": rv, "start": start}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, str]:
    if not token:
        return "", ""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return str(data["start"]), str(data["rv"])
    except (ValueError, KeyError, TypeError, binascii.Error) as error:
        raise bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ) from error


def _reset_status_on_create(rt: ResourceType, obj: Json) -> None:
    """The real strategies' PrepareForCreate: status belongs to controllers, not to the creator."""
    if rt.kind == "Pod":
        admission.default_pod(obj)
        obj["status"] = {"phase": "Pending", "qosClass": admission.qos_class(obj)}
    elif rt.kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif rt.kind in ("ResourceQuota", "PodDisruptionBudget"):
        obj.pop("status", None)
    elif rt.kind == "CronJob":
        batch.default_cronjob(obj)
    elif rt.kind in apps.KINDS:
        apps.default(obj)
    elif rt.kind == "PriorityClass":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif rt.custom and rt.has_status:
        obj.pop("status", None)  # a CR with a status subresource: status is the controller's


def _merge_subresource(rt: ResourceType, old: Json, new: Json, subresource: str) -> Json:
    """Writes to the main resource keep the old status; writes to ``/status`` keep everything but status."""
    if subresource == "status":
        merged = copy.deepcopy(old)
        merged["status"] = new.get("status")
        if merged["status"] is None:
            merged.pop("status")
        return merged  # metadata too is the old one: ResetObjectMetaForStatus
    if rt.has_status:
        new = {**new}
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    return new


def _spec(obj: Json) -> Json:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _without_times(obj: Json) -> Json:
    stripped = copy.deepcopy(obj)
    for entry in stripped["metadata"].get("managedFields") or []:
        entry.pop("time", None)
    return stripped
