"""Field ownership (``metadata.managedFields``) and server-side apply.

Ownership is tracked at the level of leaf field paths, in the FieldsV1 trie format the real server writes
(``f:<field>``, ``k:{"name":"c"}`` for items of keyed lists, ``.`` for an item itself). Updates (create, PUT,
non-apply PATCH) silently take ownership of the fields they change; apply conflicts when another manager owns a
field it would set to a different value, unless forced.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .patches import MERGE_KEYS

Json = dict[str, Any]
Path = tuple[str, ...]

# Fields no manager owns: identity and server-populated bookkeeping.
_UNTRACKED: frozenset[Path] = frozenset(
    {("f:apiVersion",), ("f:kind",)}
    | {
        ("f:metadata", f"f:{name}")
        for name in (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        )
    }
)


def _item_key(item: Json, merge_key: str) -> str:
    return "k:" + json.dumps({merge_key: item[merge_key]}, separators=(",", ":"))


def _walk(value: Any, prefix: Path, field_name: str | None, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            path = (*prefix, f"f:{key}")
            if path not in _UNTRACKED:
                _walk(child, path, key, out)
        return
    merge_key = MERGE_KEYS.get(field_name or "")
    if isinstance(value, list) and merge_key and all(isinstance(i, dict) and merge_key in i for i in value):
        for item in value:
            item_path = (*prefix, _item_key(item, merge_key))
            out.add(item_path)
            _walk(item, item_path, None, out)
        if value:
            return
    if prefix:
        out.add(prefix)


def leaf_paths(obj: Json, skip_status: bool = False) -> set[Path]:
    out: set[Path] = set()
    _walk(obj, (), None, out)
    if skip_status:
        out = {p for p in out if p[0] != "f:status"}
    return out


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    current = obj
    for element in path:
        kind, _, name = element.partition(":")
        if kind == "f" and isinstance(current, dict) and name in current:
            current = current[name]
        elif kind == "k" and isinstance(current, list):
            keys = json.loads(name)
            current = next(
                (i for i in current if isinstance(i, dict) and all(i.get(k) == v for k, v in keys.items())), None
            )
            if current is None:
                return False, None
        else:
            return False, None
    return True, current


def _delete_at(obj: Any, path: Path) -> None:
    found, parent = value_at(obj, path[:-1])
    if not found:
        return
    kind, _, name = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(name, None)
    elif kind == "k" and isinstance(parent, list):
        keys = json.loads(name)
        parent[:] = [i for i in parent if not (isinstance(i, dict) and all(i.get(k) == v for k, v in keys.items()))]


def render_path(path: Path) -> str:
    """``.spec.containers[name="app"].image``: how the real server names a field in conflict messages."""
    parts = []
    for element in path:
        kind, _, name = element.partition(":")
        if kind == "f":
            parts.append(f".{name}")
        else:
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(name).items()) + "]")
    return "".join(parts)


# The FieldsV1 trie ----------------------------------------------------------------------------------------------


def to_trie(paths: set[Path]) -> Json:
    trie: Json = {}
    for path in sorted(paths):
        node = trie
        for element in path:
            node = node.setdefault(element, {})
            if element.startswith("k:"):
                node.setdefault(".", {})
    return trie


def from_trie(trie: Json, prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, child in trie.items():
        if key == ".":
            paths.add(prefix)
        elif child:
            paths |= from_trie(child, (*prefix, key))
        else:
            paths.add((*prefix, key))
    return paths


@dataclass
class Entry:
    manager: str
    operation: str  # "Apply" | "Update"
    api_version: str
    subresource: str
    time: str
    fields: set[Path]

    @property
    def identity(self) -> tuple[str, str, str]:
        return self.manager, self.operation, self.subresource

    def render(self) -> Json:
        rendered: Json = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_trie(self.fields),
        }
        if self.subresource:
            rendered["subresource"] = self.subresource
        return rendered


def read_entries(obj: Json) -> list[Entry]:
    entries = []
    for raw in (obj.get("metadata") or {}).get("managedFields") or []:
        if isinstance(raw, dict) and raw.get("manager") is not None:
            entries.append(
                Entry(
                    raw["manager"],
                    raw.get("operation", "Update"),
                    raw.get("apiVersion", ""),
                    raw.get("subresource", ""),
                    raw.get("time", ""),
                    from_trie(raw.get("fieldsV1") or {}),
                )
            )
    return entries


def _write_entries(obj: Json, entries: list[Entry]) -> None:
    kept = [e.render() for e in entries if e.fields]
    if kept:
        obj.setdefault("metadata", {})["managedFields"] = kept
    else:
        obj.setdefault("metadata", {}).pop("managedFields", None)


def _entry(entries: list[Entry], identity: tuple[str, str, str], api_version: str, now: str) -> Entry:
    for entry in entries:
        if entry.identity == identity:
            entry.api_version, entry.time = api_version, now
            return entry
    entry = Entry(identity[0], identity[1], api_version, identity[2], now, set())
    entries.append(entry)
    return entry


def record_update(old: Json | None, new: Json, manager: str, subresource: str, api_version: str, now: str) -> None:
    """An update takes ownership of every field it changed (no conflicts: updates always win) and fields that no
    longer exist are owned by nobody. ``new`` keeps the entries of ``old`` and is modified in place."""
    entries = read_entries(old) if old is not None else []
    status_only = subresource == "status"
    new_paths = leaf_paths(new)
    old_doc = old or {}
    changed = {p for p in new_paths if (p[0] == "f:status") == status_only and value_at(old_doc, p) != value_at(new, p)}
    for entry in entries:
        entry.fields = {p for p in entry.fields if p in new_paths and p not in changed}
    if changed:
        _entry(entries, (manager, "Update", subresource), api_version, now).fields |= changed
    _write_entries(new, entries)


def _ssa_merge(live: Any, applied: Any, field_name: str | None = None) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict):
        merged = dict(live)
        for key, value in applied.items():
            if value is not None:
                merged[key] = _ssa_merge(live.get(key), value, key)
        return merged
    merge_key = MERGE_KEYS.get(field_name or "")
    if isinstance(live, list) and isinstance(applied, list) and merge_key:
        merged_list = [copy.deepcopy(i) for i in live]
        for item in applied:
            index = next((n for n, old in enumerate(merged_list) if old.get(merge_key) == item.get(merge_key)), None)
            if index is None:
                merged_list.append(copy.deepcopy(item))
            else:
                merged_list[index] = _ssa_merge(merged_list[index], item)
        return merged_list
    return copy.deepcopy(applied)


def apply(live: Json | None, config: Json, manager: str, force: bool, api_version: str, now: str) -> Json:
    """Server-side apply of ``config`` by ``manager`` onto ``live`` (None: create). Returns the new object.

    Raises a 409 ``Conflict`` listing every field another manager owns with a different value, unless forced,
    in which case ownership of those fields moves to ``manager``.
    """
    current = copy.deepcopy(live) if live is not None else {}
    entries = read_entries(current)
    applied = leaf_paths(config)
    conflicts: list[tuple[Path, Entry]] = []
    for entry in entries:
        if entry.manager == manager:
            continue
        for path in sorted(entry.fields & applied):
            if value_at(current, path) != value_at(config, path):
                conflicts.append((path, entry))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for path, entry in conflicts:
        entry.fields.discard(path)
    mine = _entry(entries, (manager, "Apply", ""), api_version, now)
    # Fields this manager applied before but no longer applies are removed, unless someone else owns them.
    others = set().union(*(e.fields for e in entries if e is not mine))
    for path in sorted(mine.fields - applied, key=len, reverse=True):
        if path not in others and not any(o[: len(path)] == path for o in others):
            _delete_at(current, path)
    mine.fields = applied
    merged: Json = _ssa_merge(current, config)
    _write_entries(merged, entries)
    return merged


def _conflict_error(conflicts: list[tuple[Path, Entry]]) -> ApiError:
    by_manager: dict[str, list[str]] = {}
    causes = []
    for path, entry in conflicts:
        who = f'"{entry.manager}" using {entry.api_version}'
        by_manager.setdefault(who, []).append(render_path(path))
        causes.append({"reason": "FieldManagerConflict", "message": f"conflict with {who}", "field": render_path(path)})
    count = len(conflicts)
    lines = []
    for who, fields in by_manager.items():
        if len(fields) == 1:
            lines.append(f"conflict with {who}: {fields[0]}")
        else:
            lines.append(f"conflicts with {who}:\n" + "\n".join(f"- {f}" for f in fields))
    message = f"Apply failed with {count} conflict{'s' if count > 1 else ''}: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})
