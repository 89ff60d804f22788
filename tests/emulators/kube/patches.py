"""The three PATCH flavours besides server-side apply: JSON merge (RFC 7386), JSON patch (RFC 6902) and
strategic merge (maps merge; lists replace, except the lists the Go types declare with a patchMergeKey)."""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, bad_request

Json = dict[str, Any]

#: Lists merged item by item on a key in strategic merge patch and server-side apply (from the Go struct tags
#: ``patchStrategy:"merge" patchMergeKey:...``), keyed by field name: enough for the kinds this emulator serves.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "addresses": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
}
#: Lists of scalars merged as sets by strategic merge patch.
MERGED_SCALAR_LISTS = frozenset({"finalizers"})


def json_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        # Ordering and retain-keys directives only steer element order / pruning; the emulator keeps live order.
        if key.startswith(("$setElementOrder/", "$retainKeys", "$deleteFromPrimitiveList/")) or key == "$patch":
            if key.startswith("$deleteFromPrimitiveList/"):
                field = key.split("/", 1)[1]
                result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_keyed_list(result.get(key) or [], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGED_SCALAR_LISTS:
            merged = list(result.get(key) or [])
            result[key] = merged + [v for v in value if v not in merged]
        elif isinstance(value, dict):
            merged_value = strategic_merge_patch(result.get(key), value)
            if merged_value is None:
                result.pop(key, None)
            else:
                result[key] = merged_value
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_keyed_list(live: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    merged = [copy.deepcopy(item) for item in live]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {merge_key}")
        index = next((i for i, old in enumerate(merged) if old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


# JSON patch (RFC 6902) ------------------------------------------------------------------------------------------


class JsonPatchError(ValueError):
    pass


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise JsonPatchError(f"invalid JSON pointer {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _container(doc: Any, tokens: list[str], pointer: str) -> Any:
    current = doc
    for token in tokens:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list) and token.isdigit() and int(token) < len(current):
            current = current[int(token)]
        else:
            raise JsonPatchError(f"doc is missing path: {pointer!r}")
    return current


def _get(doc: Any, pointer: str) -> Any:
    return _container(doc, _tokens(pointer), pointer)


def _remove(doc: Any, pointer: str) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent = _container(doc, tokens[:-1], pointer)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise JsonPatchError(f"remove operation does not apply: doc is missing path: {pointer!r}")


def _add(doc: Any, pointer: str, value: Any, replace: bool = False) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent = _container(doc, tokens[:-1], pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise JsonPatchError(f"replace operation does not apply: doc is missing key: {pointer}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise JsonPatchError(f"index out of range in {pointer!r}")
    else:
        raise JsonPatchError(f"doc is missing path: {pointer!r}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 patch. A malformed patch is 400; an operation that does not apply (including a
    failed ``test``) is 422, as the real server answers."""
    if not isinstance(operations, list) or not all(isinstance(o, dict) and "op" in o for o in operations):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    try:
        for operation in operations:
            op, path = operation["op"], operation.get("path")
            if not isinstance(path, str):
                raise JsonPatchError(f"operation {op!r} is missing the path")
            if op in ("add", "replace", "test") and "value" not in operation:
                raise JsonPatchError(f"operation {op!r} at {path!r} is missing the value")
            if op == "add":
                doc = _add(doc, path, copy.deepcopy(operation["value"]))
            elif op == "replace":
                doc = _add(doc, path, copy.deepcopy(operation["value"]), replace=True)
            elif op == "remove":
                _remove(doc, path)
            elif op == "test":
                if _get(doc, path) != operation["value"]:
                    raise JsonPatchError(f"testing value {path} failed: test failed")
            elif op in ("move", "copy"):
                source = operation.get("from")
                if not isinstance(source, str):
                    raise JsonPatchError(f"operation {op!r} is missing from")
                value = _remove(doc, source) if op == "move" else copy.deepcopy(_get(doc, source))
                doc = _add(doc, path, value)
            else:
                raise bad_request(f"Unexpected kind: {op}")
    except JsonPatchError as error:
        raise ApiError(422, "Invalid", str(error)) from error
    return doc
