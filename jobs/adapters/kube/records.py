"""The nodegroups job's durable state: one record ConfigMap per node group in the job's namespace, holding what
the group looked like before it went down, so a crash mid-run never loses what is needed to restore it."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from jobs.adapters.kube import state
from jobs.adapters.kube.client import ApiClient
from jobs.core.group_identity import GroupIdentity, RecordError
from jobs.core.group_record import Record
from jobs.core.orphan_records import OrphanRecord
from jobs.labels import NODE_GROUP_LABEL, RECORD_KEY

RBAC = state.RBAC


def record_name(identity: GroupIdentity) -> str:
    """The record ConfigMap of a group: named after the cloud's group and a digest of its identity, so a group
    renamed in the policy finds its record and a name pointed at another group does not."""
    native = identity.locator[-1][1] if identity.locator else "group"
    for key in ("nodegroup", "autoScalingGroup", "nodePool", "agentPool"):
        native = dict(identity.locator).get(key, native)
    digest = hashlib.sha256(json.dumps(identity.to_json(), sort_keys=True).encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9-]+", "-", native.lower()).strip("-")[:40] or "group"
    return f"gpu-jobs-nodegroup-{slug}-{digest}"


@dataclass(frozen=True)
class RecordCodec:
    """Pre-shutdown records: one per node group, saved with the identity of the group it describes; a record that
    describes another group is refused for this one."""

    identities: Mapping[str, GroupIdentity]
    kind: str = "nodegroup"

    def keys(self) -> dict[str, str]:
        return {group: record_name(identity) for group, identity in self.identities.items()}

    def encode(self, key: str, value: Record | RecordError) -> tuple[dict[str, str], dict[str, str]]:
        if isinstance(value, RecordError):
            raise TypeError("an unusable record is never saved")
        record = replace(value, describes=self.identities[key])
        return {NODE_GROUP_LABEL: key}, {RECORD_KEY: json.dumps(record.to_json(), indent=2, sort_keys=True)}

    def decode(self, key: str, name: str, data: Mapping[str, str]) -> Record | RecordError:
        where = f"record ConfigMap {name}"
        identity = self.identities[key]
        try:
            record = Record.from_json(json.loads(data[RECORD_KEY]))
        except KeyError:
            return RecordError(f"{where} has no {RECORD_KEY}")
        except json.JSONDecodeError as exc:
            return RecordError(f"{where} is not JSON: {exc}")
        except RecordError as exc:
            return RecordError(f"{where}: {exc}")
        if record.describes is not None and record.describes != identity:
            return RecordError(f"{where} describes {record.describes.describe()}, not {identity.describe()}")
        return record


class ConfigMapRecords(state.ConfigMapState[Record | RecordError]):
    """The nodegroups job's records in its namespace (the ``RecordStore`` port)."""

    def __init__(self, api: ApiClient, namespace: str, identities: Mapping[str, GroupIdentity]) -> None:
        super().__init__(api, namespace, RecordCodec(dict(identities)))

    def orphans(self) -> tuple[OrphanRecord, ...]:
        """Records no group of the policy claims (removed from it, or pointed at another group), read as they are."""
        found: list[OrphanRecord] = []
        for name, data in sorted(self.unclaimed().items()):
            try:
                record = Record.from_json(json.loads(data[RECORD_KEY]))
            except (KeyError, json.JSONDecodeError, RecordError) as exc:
                found.append(OrphanRecord(name, self.namespace, None, error=f"{type(exc).__name__}: {exc}"))
                continue
            found.append(OrphanRecord(name, self.namespace, record))
        return tuple(found)
