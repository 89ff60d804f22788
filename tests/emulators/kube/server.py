"""The WSGI front of the emulated kube-apiserver: routing, authentication, RBAC, faults, and wire rendering."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from werkzeug.wrappers import Request, Response

from tests.emulators.base import Emulator, FaultKind

from . import discovery, protobuf, rbac
from .cluster import Cluster
from .errors import (
    ApiError,
    bad_request,
    gateway_timeout,
    internal_error,
    method_not_allowed,
    not_acceptable,
    stale,
    too_many_requests,
    unsupported_media_type,
)
from .resources import ResourceType, find
from .tables import table
from .verbs import Api, ListOptions, WriteOptions

Json = dict[str, Any]
#: How often a watch looks at the store, and the longest it stays open.
WATCH_POLL_S = 0.05
WATCH_MAX_S = 600.0


@dataclass(frozen=True)
class Route:
    rt: ResourceType
    namespace: str | None  # None: cluster-scoped resource, or a list across all namespaces
    name: str
    subresource: str

    def operation(self, verb: str) -> str:
        return f"{verb} {self.rt.plural}" + (f"/{self.subresource}" if self.subresource else "")


def route(path: str) -> Route | None:
    """``/api/v1/namespaces/ns/pods/p/eviction`` and friends; None for anything that is not a resource path."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        candidate = find(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    rt = find(group, version, rest[0])
    if rt is None:
        return None
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if subresource and subresource not in rt.subresources:
        return None
    if rt.namespaced and name and namespace is None:
        return None  # a namespaced object needs its namespace in the path
    return Route(rt, namespace, name, subresource)


class KubeEmulator(Emulator):
    """The API server. ``cluster`` holds the objects; ``token`` is what the kubeconfig's user presents."""

    def __init__(
        self, token: str = "gpu-jobs-test-token", user: str = "system:serviceaccount:gpu-jobs:gpu-jobs"
    ) -> None:
        super().__init__()
        self.cluster = Cluster()
        self.api = Api(self.cluster)
        self.token = token
        self.user = user
        self.server_address = "127.0.0.1:0"
        #: RBAC as an allow-list of ``(verb, resource)`` such as ``("patch", "nodes")`` or ``("create",
        #: "pods/eviction")``; None allows everything. Refusals are the real 403 texts.
        self.allowed: set[tuple[str, str]] | None = None
        #: Tokens issued for ServiceAccounts (:meth:`issue_token`): their requests are authorised by the RBAC
        #: objects stored in the cluster, as the real RBAC authorizer does, not by ``allowed``.
        self.service_account_tokens: dict[str, rbac.ServiceAccountCaller] = {}
        #: Set when the server stops: open watches end.
        self.stopping = threading.Event()

    def issue_token(self, namespace: str, service_account: str) -> str:
        """A bearer token for a ServiceAccount (what the kubelet mounts from a TokenRequest): valid while the
        ServiceAccount exists, with exactly the permissions its bindings grant."""
        token = f"sa-{namespace}-{service_account}-{secrets.token_hex(8)}"
        self.service_account_tokens[token] = rbac.ServiceAccountCaller(namespace, service_account)
        return token

    def reset(self) -> None:
        self.cluster.reset()
        self.log.clear()
        self.faults.clear()
        self.open_gates()
        self.latency_s = 0.0
        self.timeout_hold_s = type(self).timeout_hold_s
        self.allowed = None
        self.service_account_tokens.clear()

    # WSGI ------------------------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        try:
            response = self._handle(request)
        except ApiError as error:
            response = _status_response(error)
        return response(environ, start_response)

    def _handle(self, request: Request) -> Response:
        path, method = request.path, request.method
        body = request.get_data()
        query = request.query_string.decode()
        target = route(path)
        verb = _verb(method, target, request.args)
        operation = target.operation(verb) if target else f"{method.lower()} {path}"
        fault = self.begin(method, path, operation, query, body)
        if fault and fault != "lost":
            raise _fault(fault, target)
        response = self._answer(request, method, path, target, verb, body)
        if fault == "lost":  # carried out; the answer never reaches the client
            raise _fault("timeout", target)
        return response

    def _answer(self, request: Request, method: str, path: str, target: Any, verb: str, body: bytes) -> Response:
        # A wrong token is 401. No token is let in as anonymous: kubectl never sends a bearer token over plain http.
        presented = request.headers.get("Authorization")
        caller = self._service_account(presented)
        if presented is not None and presented != f"Bearer {self.token}" and caller is None:
            return _json(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "Unauthorized",
                    "reason": "Unauthorized",
                    "code": 401,
                },
                401,
            )
        if target is None:
            return self._non_resource(path, request)
        self._authorize(verb, target, caller)
        return self._resource(request, method, target, body, caller)

    def _service_account(self, presented: str | None) -> rbac.ServiceAccountCaller | None:
        """The ServiceAccount a token was issued for, while that ServiceAccount exists (else the token is 401)."""
        caller = self.service_account_tokens.get((presented or "").removeprefix("Bearer "))
        if caller is None or self.cluster.get("ServiceAccount", caller.name, caller.namespace) is None:
            return None
        return caller

    def _non_resource(self, path: str, request: Request) -> Response:
        parts = [p for p in path.split("/") if p]
        document: Json | None = None
        if path == "/version":
            document = discovery.VERSION
        elif path in ("/healthz", "/livez", "/readyz"):
            return Response("ok", 200, content_type="text/plain")
        elif path == "/api":
            document = discovery.api_versions(request.host or self.server_address)
        elif path == "/apis":
            document = discovery.api_group_list()
        elif parts[:1] == ["api"] and len(parts) == 2:
            document = discovery.resource_list("", parts[1])
        elif parts[:1] == ["apis"] and len(parts) == 2:
            document = discovery.api_group(parts[1])
        elif parts[:1] == ["apis"] and len(parts) == 3:
            document = discovery.resource_list(parts[1], parts[2])
        elif path == "/openapi/v3":
            document = discovery.openapi_v3_root()
        elif parts[:2] == ["openapi", "v3"] and len(parts) in (4, 5):
            document = discovery.openapi_v3(parts[3] if len(parts) == 5 else "", parts[-1])
        if document is None:
            # Also /openapi/v2 and /openapi/v3: kubectl get/describe do without them.
            return _json(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "the server could not find the requested resource",
                    "reason": "NotFound",
                    "details": {},
                    "code": 404,
                },
                404,
            )
        return _json(document)

    def _authorize(self, verb: str, target: Route, caller: rbac.ServiceAccountCaller | None) -> None:
        resource = target.rt.plural + (f"/{target.subresource}" if target.subresource else "")
        if caller is not None:
            asked = rbac.Request(
                verb, target.rt.group, target.rt.plural, target.subresource, target.namespace or "", target.name
            )
            if rbac.allows(self.cluster, caller, asked):
                return
        elif self.allowed is None or (verb, resource) in self.allowed:
            return
        user = caller.user if caller is not None else self.user
        scope = f'in the namespace "{target.namespace}"' if target.namespace else "at the cluster scope"
        subject = f'{resource} "{target.name}"' if target.name else resource
        why = f'User "{user}" cannot {verb} resource "{resource}" in API group "{target.rt.group}" {scope}'
        details: Json = {"kind": target.rt.plural}
        if target.name:
            details["name"] = target.name
        if target.rt.group:
            details["group"] = target.rt.group
        raise ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)

    def _resource(
        self, request: Request, method: str, target: Route, body: bytes, caller: rbac.ServiceAccountCaller | None
    ) -> Response:
        self.cluster.settle()
        args = request.args
        rt, namespace, name, sub = target.rt, target.namespace or "", target.name, target.subresource
        options = WriteOptions(
            manager=args.get("fieldManager", ""),
            default_manager=_manager_from_user_agent(request.headers.get("User-Agent", "")),
            field_validation=args.get("fieldValidation", "Warn"),
            dry_run=args.get("dryRun") == "All",
            force=args.get("force", "").lower() == "true",
        )
        if not _accepts_json(request.headers.get("Accept")):
            raise not_acceptable(["application/json"])  # the emulator writes nothing else
        if args.get("fieldValidation") not in (None, "Ignore", "Warn", "Strict"):
            raise bad_request(f"fieldValidation must be one of Ignore, Warn, Strict, not {args['fieldValidation']!r}")
        status = 200
        if method == "GET" and args.get("watch") in ("true", "1"):
            if args.get("sendInitialEvents") == "true" or name:
                # client-go falls back to a list and a plain watch (what kubectl wait and get -w use).
                raise method_not_allowed("only plain watches of a collection are served by the gpu-jobs kube emulator")
            return self._watch(target, args)
        if method == "GET" and sub == "log":
            self.api.get(rt, namespace, name)  # 404 for a pod that is not there
            return Response(self.cluster.pod_log(namespace, name), 200, content_type="text/plain")
        if method == "GET" and sub == "scale":
            result = self.api.get_scale(rt, namespace, name)
        elif method == "PUT" and sub == "scale":
            result = self.api.replace_scale(rt, namespace, name, _body(request, rt), options)
        elif method == "PATCH" and sub == "scale":
            content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip()
            result = self.api.patch_scale(rt, namespace, name, content_type, body, options)
        elif method == "GET" and name:
            result = self.api.get(rt, namespace, name)
            if not sub and _wants_table(request):
                return _json(
                    table(
                        rt,
                        [result],
                        {"resourceVersion": result["metadata"]["resourceVersion"]},
                        args.get("includeObject", "Metadata"),
                        self.cluster.now(),
                    )
                )
        elif method == "GET":
            limit = args.get("limit", "0")
            if not limit.isdigit():
                raise bad_request(f"limit: Invalid value: {limit!r}: must be a non-negative integer")
            listing = ListOptions(
                args.get("labelSelector", ""), args.get("fieldSelector", ""), int(limit), args.get("continue", "")
            )
            result = self.api.list(rt, target.namespace, listing)
            if _wants_table(request):
                return _json(
                    table(
                        rt,
                        result["items"],
                        result["metadata"],
                        args.get("includeObject", "Metadata"),
                        self.cluster.now(),
                    )
                )
        elif method == "POST" and sub == "eviction":
            result, status = self.api.evict(namespace, name, _body(request, rt), options), 201
        elif method == "POST" and not name:
            result, status = self.api.create(rt, namespace, _body(request, rt), options), 201
        elif method == "PUT" and name:
            result, created = self.api.replace(rt, namespace, name, _body(request, rt), options, sub)
            status = 201 if created else 200
        elif method == "PATCH" and name:
            content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip()
            if content_type == "application/apply-patch+yaml" and not sub:
                with self.cluster.lock:
                    exists = self.cluster.stored(rt, namespace, name) is not None
                if not exists:  # an apply that creates is authorised as a create too (apiserver patch handler)
                    self._authorize("create", target, caller)
            result, created = self.api.patch(rt, namespace, name, content_type, body, options, sub)
            status = 201 if created else 200
        elif method == "DELETE" and name and not sub:
            result = self.api.delete(rt, namespace, name, _delete_options(request, rt, body), options)
        elif method == "DELETE" and not name:
            result = self._delete_collection(target, args, _delete_options(request, rt, body), options)
        else:
            raise method_not_allowed()
        if method != "GET":
            self.cluster.settle()  # the controllers react to the write now (its answer is already made)
        response = _json(result, status)
        for warning in options.warnings:
            response.headers.add("Warning", f'299 - "{_escape(warning)}"')
        return response

    def _watch(self, target: Route, args: Any) -> Response:
        """A watch as a stream of JSON lines (ADDED, MODIFIED, DELETED), found by looking at the store every
        :data:`WATCH_POLL_S`: changes between two looks arrive as one event (the newest state), as after a
        compaction. Ends after ``timeoutSeconds`` (at most :data:`WATCH_MAX_S`)."""
        listing = ListOptions(args.get("labelSelector", ""), args.get("fieldSelector", ""))
        since = args.get("resourceVersion", "")
        timeout = min(float(args.get("timeoutSeconds") or WATCH_MAX_S), WATCH_MAX_S)
        rt = target.rt

        def snapshot() -> dict[str, Json]:
            found = self.api.list(rt, target.namespace, listing)["items"]
            return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in found}

        def event(kind: str, obj: Json) -> bytes:
            return (
                json.dumps({"type": kind, "object": {"kind": rt.kind, "apiVersion": rt.api_version, **obj}}) + "\n"
            ).encode()

        def stream() -> Iterator[bytes]:
            yield b""  # the headers go out now, as the real server flushes them: the client's watch has begun
            known = snapshot()
            start = int(since) if since.isdigit() and since != "0" else 0
            for obj in known.values():  # what changed after the client's resourceVersion (all of it for none or 0)
                if int(obj["metadata"]["resourceVersion"]) > start:
                    yield event("ADDED" if not start else "MODIFIED", obj)
            ends = time.monotonic() + timeout
            while time.monotonic() < ends and not self.stopping.is_set():
                time.sleep(WATCH_POLL_S)
                current = snapshot()
                for key, obj in current.items():
                    before = known.get(key)
                    if before is None:
                        yield event("ADDED", obj)
                    elif before["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                        yield event("MODIFIED", obj)
                for key in known.keys() - current.keys():
                    yield event("DELETED", known[key])
                known = current

        return Response(stream(), 200, content_type="application/json", direct_passthrough=True)

    def _delete_collection(self, target: Route, args: Any, delete_options: Json | None, options: WriteOptions) -> Json:
        listing = ListOptions(args.get("labelSelector", ""), args.get("fieldSelector", ""))
        found = self.api.list(target.rt, target.namespace, listing)
        for item in found["items"]:
            meta = item["metadata"]
            self.api.delete(target.rt, meta.get("namespace", ""), meta["name"], delete_options, options)
        return found


def _verb(method: str, target: Route | None, args: Any) -> str:
    if method == "GET":
        if args.get("watch") in ("true", "1"):
            return "watch"
        return "get" if target and target.name else "list"
    if method == "DELETE" and target and not target.name:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


def _manager_from_user_agent(user_agent: str) -> str:
    """The real server's default field manager: the User-Agent up to the first ``/``."""
    return user_agent.split("/", maxsplit=1)[0][:128] or "unknown"


def _wants_table(request: Request) -> bool:
    return "as=Table" in (request.headers.get("Accept") or "")


def _media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


def _accepts_json(accept: str | None) -> bool:
    """kubectl's typed clients send ``application/vnd.kubernetes.protobuf,application/json``: JSON is fine then."""
    if not accept:
        return True
    return any(_media_type(item) in ("application/json", "application/*", "*/*") for item in accept.split(","))


def _body(request: Request, rt: ResourceType) -> Any:
    """A write's body by its Content-Type, as the real server negotiates it (none means JSON)."""
    media, body = _media_type(request.headers.get("Content-Type")), request.get_data()
    if media in ("", "application/json"):
        return _json_body(body)
    if media == "application/yaml":
        try:
            return yaml.safe_load(body or b"null")
        except yaml.YAMLError as error:
            raise bad_request(f"the request body is not valid YAML: {error}") from error
    if media == protobuf.MEDIA_TYPE:
        try:
            return protobuf.decode(body)
        except protobuf.Undecodable as error:
            # What the real server says for a type it has no protobuf for (a custom resource); kubectl shows it.
            raise unsupported_media_type(_BODY_TYPES) from error
        except protobuf.Malformed as error:
            raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): {error}") from error
    decodable = protobuf.decodable(rt.api_version, rt.kind)
    raise unsupported_media_type(_BODY_TYPES + ((protobuf.MEDIA_TYPE,) if decodable else ()))


_BODY_TYPES = ("application/json", "application/yaml")


def _delete_options(request: Request, rt: ResourceType, body: bytes) -> Json | None:
    """DeleteOptions as the real handler reads them: the body when there is one, else the query parameters
    (``gracePeriodSeconds``, as the Python client and curl send it)."""
    if body:
        decoded = _body(request, rt)
        return decoded if isinstance(decoded, dict) else None
    grace = request.args.get("gracePeriodSeconds")
    if grace is None:
        return None
    try:
        return {"gracePeriodSeconds": int(grace)}
    except ValueError as error:
        raise bad_request(f"gracePeriodSeconds: Invalid value: {grace!r}: must be an integer") from error


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as error:
        raise bad_request(f"the request body is not valid JSON: {error}") from error


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _json(document: Json, status: int = 200) -> Response:
    return Response(json.dumps(document), status, content_type="application/json")


def _status_response(error: ApiError) -> Response:
    response = _json(error.status(), error.code)
    for key, value in error.headers.items():
        response.headers[key] = value
    return response


def _fault(kind: FaultKind, target: Route | None) -> ApiError:
    """Injected faults as the real server (or its priority-and-fairness filter) puts them on the wire."""
    if kind == "throttle":
        return too_many_requests("Too many requests, please try again later.", 1)
    if kind == "busy":
        return too_many_requests("the server has received too many requests and has asked us to try again later", 1)
    if kind == "server_error":
        return internal_error("etcdserver: request timed out")
    if kind == "timeout":
        return gateway_timeout()
    name = target.name if target else ""
    plural, group = (target.rt.plural, target.rt.group) if target else ("", "")
    return stale(plural, group, name)
