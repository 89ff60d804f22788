"""A scope's history (``jobs.history``) in the job's namespace: one ConfigMap per scope per ISO week, named
``gpu-jobs-history-<scope>-<year>-w<week>``, entries one JSON object per line under ``entries``.

The write discipline of the records (``state.py``), for an object several runs append to:

- every update carries the resourceVersion it read: a run that wrote in between makes it a 409, and the append
  reads again and merges (entries are identified, so nobody's entry is lost or doubled);
- an answer that never came (a timeout, a 5xx after the write may have happened) is never blindly resent: the
  object is read again, and the write is done only if the entries are not there yet;
- a create that finds the week's object already made (409 AlreadyExists) reads it and updates it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, json_pages, request
from jobs.adapters.kube.rbac import Grant
from jobs.history import Entry, decode, encode, expired_weeks, in_order, iso_week, merged
from jobs.labels import HISTORY_SCOPE_LABEL, HISTORY_WEEK_LABEL, MANAGED_BY, MANAGED_BY_LABEL, RECORD_KIND_LABEL

# get: read one week again after a conflict or a lost answer; delete: weeks past the retention.
RBAC = (Grant("", "configmaps", ("get", "list", "create", "update", "delete"), "namespace"),)

KIND = "history"
DATA_KEY = "entries"
#: Attempts at one week's append (each after reading it again): concurrent runs of one scope are few.
ATTEMPTS = 5
#: Entries one week's object keeps at most (about 200 bytes each, far below a ConfigMap's 1 MiB).
MAX_ENTRIES = 4000


def object_name(scope: str, week: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", scope.lower()).strip("-")[:180] or "scope"
    return f"gpu-jobs-history-{slug}-{week.lower()}"


def _label(scope: str) -> str:
    """A label value for the scope (63 characters of letters, digits, ``-_.``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", scope).strip("-_.")[:63]


class ConfigMapHistory:
    """The ``HistoryStore`` of one scope."""

    def __init__(self, api: ApiClient, namespace: str, scope: str, log: Any = None) -> None:
        self.api = api
        self.namespace = namespace
        self.scope = scope
        self.log = log
        self._configmaps = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps"
        self._listed: list[dict[str, Any]] | None = None  # the weeks ``read`` found: ``prune`` needs no list of its own

    def _listing(self) -> list[dict[str, Any]]:
        selector = (
            f"{MANAGED_BY_LABEL}={MANAGED_BY},{RECORD_KIND_LABEL}={KIND},{HISTORY_SCOPE_LABEL}={_label(self.scope)}"
        )
        return list(json_pages(self.api, "list configmaps", self._configmaps, labelSelector=selector))

    def read(self) -> list[Entry]:
        found: list[Entry] = []
        self._listed = self._listing()
        for cm in self._listed:
            entries, problems = decode((cm.get("data") or {}).get(DATA_KEY, ""))
            for problem in problems:  # a line nobody can read is left where it is and said, never fatal
                if self.log is not None:
                    self.log.warning("history.unreadable", configmap=cm["metadata"]["name"], problem=problem)
            found += [e for e in entries if e.scope == self.scope]
        return sorted(found, key=in_order)

    def append(self, entries: Sequence[Entry]) -> None:
        by_week: dict[str, list[Entry]] = {}
        for e in entries:
            by_week.setdefault(iso_week(e.at), []).append(e)
        for week, new in sorted(by_week.items()):
            self._append_week(week, new)

    def _path(self, name: str) -> str:
        return f"{self._configmaps}/{quote(name, safe='')}"

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = request(self.api, "get configmaps", "GET", self._path(name))
        except errors.NotFound:
            return None
        return found

    def _append_week(self, week: str, new: Sequence[Entry]) -> None:
        name = object_name(self.scope, week)
        ids = {e.id for e in new}
        last: errors.CloudError | None = None
        for _ in range(ATTEMPTS):
            current = self._get(name)
            existing, _problems = decode(((current or {}).get("data") or {}).get(DATA_KEY, ""))
            if ids <= {e.id for e in existing}:
                return  # already there: written by an answer that was lost, or by another run
            entries = merged(existing, new)[-MAX_ENTRIES:]
            body = self._body(name, week, entries, current)
            try:
                if current is None:
                    request(self.api, "create configmaps", "POST", self._configmaps, body=body)
                else:
                    request(self.api, "update configmaps", "PUT", self._path(name), body=body)
                return
            except errors.Conflict as exc:  # another writer came first (or made the week's object): read again
                last = exc
            except (errors.Unavailable, errors.Throttled) as exc:  # maybe written: read again, never resend blindly
                last = exc
        assert last is not None
        raise last

    def _body(self, name: str, week: str, entries: Sequence[Entry], current: dict[str, Any] | None) -> dict[str, Any]:
        labels = {
            MANAGED_BY_LABEL: MANAGED_BY,
            RECORD_KIND_LABEL: KIND,
            HISTORY_SCOPE_LABEL: _label(self.scope),
            HISTORY_WEEK_LABEL: week,
        }
        metadata: dict[str, Any] = {"name": name, "namespace": self.namespace, "labels": labels}
        if current is not None:
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]  # a writer between: a 409
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {DATA_KEY: encode(entries)}}

    def prune(self, now: datetime, retention: timedelta) -> list[str]:
        # A week made after ``read`` is this run's: never past the retention.
        weeks = self._listed if self._listed is not None else self._listing()
        listing = {str((cm["metadata"].get("labels") or {}).get(HISTORY_WEEK_LABEL, "")): cm for cm in weeks}
        expired = expired_weeks((w for w in listing if w), now, retention)
        for week in expired:
            meta = listing[week]["metadata"]
            # The object read, not one made again under its name meanwhile.
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": meta.get("uid")}}
            with contextlib.suppress(errors.NotFound):  # another run pruned it
                request(self.api, "delete configmaps", "DELETE", self._path(str(meta["name"])), body=body)
        return expired
