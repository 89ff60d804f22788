"""Legacy (unaggregated) discovery documents: ``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/<g>[/<v>]``.

kubectl asks for aggregated discovery first and falls back to these when the answer is a plain document.
"""

from __future__ import annotations

from typing import Any

from .resources import RESOURCE_TYPES, VERBS, groups

Json = dict[str, Any]

VERSION: Json = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-gpu-jobs-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> Json:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> Json:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list() -> Json:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g, v) for g, v in groups().items()]}


def api_group(name: str) -> Json | None:
    versions = groups().get(name)
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)} if versions else None


def resource_list(group: str, version: str) -> Json | None:
    served = [rt for rt in RESOURCE_TYPES if (rt.group, rt.version) == (group, version)]
    if not served:
        return None
    resources: list[Json] = []
    for rt in served:
        entry: Json = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(VERBS),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        for sub in rt.subresources:
            if sub == "eviction":
                resources.append(
                    {
                        "name": f"{rt.plural}/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
            elif sub == "scale":
                resources.append(
                    {
                        "name": f"{rt.plural}/scale",
                        "singularName": "",
                        "namespaced": True,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
            elif sub == "log":
                resources.append(
                    {
                        "name": f"{rt.plural}/log",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Pod",
                        "verbs": ["get"],
                    }
                )
            else:
                resources.append(
                    {
                        "name": f"{rt.plural}/{sub}",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": rt.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_root() -> Json:
    """Just enough OpenAPI v3 for kubectl: it reads the PATCH operations to learn that the server validates fields
    (``fieldValidation``), and otherwise refuses ``kubectl apply`` ("failed to download openapi")."""
    versions = {(rt.group, rt.version) for rt in RESOURCE_TYPES}
    return {
        "paths": {
            _gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash=emulator"}
            for g, v in sorted(versions)
        }
    }


def openapi_v3(group: str, version: str) -> Json | None:
    served = [rt for rt in RESOURCE_TYPES if (rt.group, rt.version) == (group, version)]
    if not served:
        return None
    paths: Json = {}
    for rt in served:
        scope = f"/{_gv_path(group, version)}" + ("/namespaces/{namespace}" if rt.namespaced else "")
        operation = {
            "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
            "parameters": [
                {"name": name, "in": "query", "schema": {"type": "string"}}
                for name in ("dryRun", "fieldManager", "fieldValidation", "force")
            ],
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{scope}/{rt.plural}/{{name}}"] = {"patch": operation}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }
