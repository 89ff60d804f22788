"""Request bodies in ``application/vnd.kubernetes.protobuf``, decoded to the JSON form the verbs take.

kubectl's generated clients send built-in types in protobuf (``kubectl create namespace|configmap|quota|pdb``) and
never fall back to JSON, even on a 415. The envelope is ``k8s\\x00`` plus a ``runtime.Unknown``
(1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType) whose ``raw`` is the object. Only the
kinds in :data:`SCHEMAS` are decoded, by hand-copied field numbers from the Kubernetes ``generated.proto`` files;
anything else raises :class:`Undecodable` and the server answers 415 as for a type without protobuf (a CRD).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Json = dict[str, Any]
MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"


class Undecodable(Exception):
    """A well-formed body the emulator cannot decode (kind or field not in its schemas)."""


class Malformed(Exception):
    """Not a protobuf message at all (the real server answers 400)."""


@dataclass(frozen=True)
class Repeated:
    item: Kind


@dataclass(frozen=True)
class MapOf:
    value: Kind  # every Kubernetes map has string keys


@dataclass(frozen=True)
class Inline:
    """An embedded Go struct (``LocalObjectReference`` in a key selector, ``VolumeSource`` in a Volume): its own
    protobuf message, but its fields sit in the parent's JSON object."""

    message: Message


#: Scalars by wire meaning; ``quantity``, ``intorstring`` and ``time`` are the apimachinery wrapper messages;
#: ``skip`` is a field the server resets anyway (status on create and update). A ``?`` suffix (``int?``) is a Go
#: pointer: written only when set, so a zero is a value (``backoffLimit: 0``), not an omitted field.
Scalar = str
Message = Mapping[int, tuple[str, "Kind"]]
Kind = Scalar | Repeated | MapOf | Inline | Message

_OMIT_WHEN_ZERO = frozenset({"string", "bytes", "bool", "int"})  # omitempty: gogo-protobuf writes zero values too

OWNER_REFERENCE: Message = {
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
OBJECT_META: Message = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    4: ("selfLink", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    8: ("creationTimestamp", "time"),
    9: ("deletionTimestamp", "time"),
    10: ("deletionGracePeriodSeconds", "int"),
    11: ("labels", MapOf("string")),
    12: ("annotations", MapOf("string")),
    13: ("ownerReferences", Repeated(OWNER_REFERENCE)),
    14: ("finalizers", Repeated("string")),
}
_REQUIREMENT: Message = {1: ("key", "string"), 2: ("operator", "string"), 3: ("values", Repeated("string"))}
LABEL_SELECTOR: Message = {1: ("matchLabels", MapOf("string")), 2: ("matchExpressions", Repeated(_REQUIREMENT))}
_SCOPE_REQUIREMENT: Message = {1: ("scopeName", "string"), 2: ("operator", "string"), 3: ("values", Repeated("string"))}

_LOCAL_REF = Inline({1: ("name", "string")})
_KEY_SELECTOR: Message = {1: ("", _LOCAL_REF), 2: ("key", "string"), 3: ("optional", "bool?")}
_QUANTITIES = MapOf("quantity")
_KEY_TO_PATH: Message = {1: ("key", "string"), 2: ("path", "string"), 3: ("mode", "int?")}
_SECCOMP: Message = {1: ("type", "string"), 2: ("localhostProfile", "string?")}
#: core/v1 Container and PodSpec as far as the project's CronJobs (and everyday Jobs) use them.
CONTAINER: Message = {
    1: ("name", "string"),
    2: ("image", "string"),
    3: ("command", Repeated("string")),
    4: ("args", Repeated("string")),
    5: ("workingDir", "string"),
    7: (
        "env",
        Repeated(
            {
                1: ("name", "string"),
                2: ("value", "string"),
                3: (
                    "valueFrom",
                    {
                        1: ("fieldRef", {1: ("apiVersion", "string"), 2: ("fieldPath", "string")}),
                        3: ("configMapKeyRef", _KEY_SELECTOR),
                        4: ("secretKeyRef", _KEY_SELECTOR),
                    },
                ),
            }
        ),
    ),
    8: ("resources", {1: ("limits", _QUANTITIES), 2: ("requests", _QUANTITIES)}),
    9: (
        "volumeMounts",
        Repeated(
            {1: ("name", "string"), 2: ("readOnly", "bool"), 3: ("mountPath", "string"), 4: ("subPath", "string")}
        ),
    ),
    13: ("terminationMessagePath", "string"),
    14: ("imagePullPolicy", "string"),
    15: (
        "securityContext",
        {
            1: ("capabilities", {1: ("add", Repeated("string")), 2: ("drop", Repeated("string"))}),
            2: ("privileged", "bool?"),
            4: ("runAsUser", "int?"),
            5: ("runAsNonRoot", "bool?"),
            6: ("readOnlyRootFilesystem", "bool?"),
            7: ("allowPrivilegeEscalation", "bool?"),
            8: ("runAsGroup", "int?"),
            11: ("seccompProfile", _SECCOMP),
        },
    ),
    19: (
        "envFrom",
        Repeated(
            {
                1: ("prefix", "string"),
                2: ("configMapRef", {1: ("", _LOCAL_REF), 2: ("optional", "bool?")}),
                3: ("secretRef", {1: ("", _LOCAL_REF), 2: ("optional", "bool?")}),
            }
        ),
    ),
    20: ("terminationMessagePolicy", "string"),
}
POD_SPEC: Message = {
    1: (
        "volumes",
        Repeated(
            {
                1: ("name", "string"),
                2: (
                    "",
                    Inline(
                        {
                            2: ("emptyDir", {1: ("medium", "string"), 2: ("sizeLimit", "quantity")}),
                            6: (
                                "secret",
                                {
                                    1: ("secretName", "string"),
                                    2: ("items", Repeated(_KEY_TO_PATH)),
                                    3: ("defaultMode", "int?"),
                                    4: ("optional", "bool?"),
                                },
                            ),
                            19: (
                                "configMap",
                                {
                                    1: ("", _LOCAL_REF),
                                    2: ("items", Repeated(_KEY_TO_PATH)),
                                    3: ("defaultMode", "int?"),
                                    4: ("optional", "bool?"),
                                },
                            ),
                        }
                    ),
                ),
            }
        ),
    ),
    2: ("containers", Repeated(CONTAINER)),
    3: ("restartPolicy", "string"),
    4: ("terminationGracePeriodSeconds", "int?"),
    5: ("activeDeadlineSeconds", "int?"),
    6: ("dnsPolicy", "string"),
    7: ("nodeSelector", MapOf("string")),
    8: ("serviceAccountName", "string"),
    9: ("serviceAccount", "string"),
    14: (
        "securityContext",
        {
            2: ("runAsUser", "int?"),
            3: ("runAsNonRoot", "bool?"),
            4: ("supplementalGroups", Repeated("int")),
            5: ("fsGroup", "int?"),
            6: ("runAsGroup", "int?"),
            10: ("seccompProfile", _SECCOMP),
        },
    ),
    15: ("imagePullSecrets", Repeated({1: ("name", "string")})),
    19: ("schedulerName", "string"),
    20: ("initContainers", Repeated(CONTAINER)),
    21: ("automountServiceAccountToken", "bool?"),
    22: (
        "tolerations",
        Repeated(
            {
                1: ("key", "string"),
                2: ("operator", "string"),
                3: ("value", "string"),
                4: ("effect", "string"),
                5: ("tolerationSeconds", "int?"),
            }
        ),
    ),
    24: ("priorityClassName", "string"),
    30: ("enableServiceLinks", "bool?"),
}
JOB_SPEC: Message = {
    1: ("parallelism", "int?"),
    2: ("completions", "int?"),
    3: ("activeDeadlineSeconds", "int?"),
    4: ("selector", LABEL_SELECTOR),
    5: ("manualSelector", "bool?"),
    6: ("template", {1: ("metadata", OBJECT_META), 2: ("spec", POD_SPEC)}),
    7: ("backoffLimit", "int?"),
    8: ("ttlSecondsAfterFinished", "int?"),
    9: ("completionMode", "string?"),
    10: ("suspend", "bool?"),
    14: ("podReplacementPolicy", "string?"),
}

SCHEMAS: dict[tuple[str, str], Message] = {
    ("batch/v1", "Job"): {1: ("metadata", OBJECT_META), 2: ("spec", JOB_SPEC), 3: ("status", "skip")},
    ("v1", "Namespace"): {
        1: ("metadata", OBJECT_META),
        2: ("spec", {1: ("finalizers", Repeated("string"))}),
        3: ("status", "skip"),
    },
    ("v1", "ConfigMap"): {
        1: ("metadata", OBJECT_META),
        2: ("data", MapOf("string")),
        3: ("binaryData", MapOf("bytes")),
        4: ("immutable", "bool"),
    },
    # What `kubectl create secret generic` sends (the notifications' webhook URL, docs/people.md).
    ("v1", "Secret"): {
        1: ("metadata", OBJECT_META),
        2: ("data", MapOf("bytes")),
        3: ("type", "string"),
        4: ("stringData", MapOf("string")),
        5: ("immutable", "bool"),
    },
    ("v1", "ResourceQuota"): {
        1: ("metadata", OBJECT_META),
        2: (
            "spec",
            {
                1: ("hard", MapOf("quantity")),
                2: ("scopes", Repeated("string")),
                3: ("scopeSelector", {1: ("matchExpressions", Repeated(_SCOPE_REQUIREMENT))}),
            },
        ),
        3: ("status", "skip"),
    },
    ("policy/v1", "PodDisruptionBudget"): {
        1: ("metadata", OBJECT_META),
        2: (
            "spec",
            {
                1: ("minAvailable", "intorstring"),
                2: ("selector", LABEL_SELECTOR),
                3: ("maxUnavailable", "intorstring"),
                4: ("unhealthyPodEvictionPolicy", "string"),
            },
        ),
        3: ("status", "skip"),
    },
}


def decodable(api_version: str, kind: str) -> bool:
    return (api_version, kind) in SCHEMAS


def decode(body: bytes) -> Json:
    """The object in a protobuf envelope as its JSON form (``apiVersion`` and ``kind`` from the envelope)."""
    if not body.startswith(MAGIC):
        raise Malformed(f"provided data does not appear to be a protobuf message, expected prefix {list(MAGIC)}")
    envelope = _fields(body[len(MAGIC) :])
    type_meta = _fields(_last(envelope, 1, b""))
    api_version, kind = _text(_last(type_meta, 1, b"")), _text(_last(type_meta, 2, b""))
    if _text(_last(envelope, 3, b"")):
        raise Undecodable("a contentEncoding in the protobuf envelope")
    schema = SCHEMAS.get((api_version, kind))
    if schema is None:
        raise Undecodable(f"{kind} {api_version} in protobuf")
    obj: Json = {"apiVersion": api_version, "kind": kind}
    obj.update(_message(_last(envelope, 2, b""), schema))
    return obj


# Wire format ---------------------------------------------------------------------------------------------------


def _fields(data: bytes) -> dict[int, list[int | bytes]]:
    """Field number -> values in order: varints as int, length-delimited as bytes (fixed32/64 are not used)."""
    found: dict[int, list[int | bytes]] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise Malformed("unexpected EOF")
            value, at = data[at : at + size], at + size
        else:
            raise Undecodable(f"protobuf wire type {wire}")
        found.setdefault(number, []).append(value)
    return found


def _varint(data: bytes, at: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise Malformed("unexpected EOF" if at >= len(data) else "integer overflow")
        byte = data[at]
        result |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return result, at


def _last(found: Mapping[int, list[int | bytes]], number: int, default: int | bytes) -> Any:
    return found.get(number, [default])[-1]  # protobuf: the last occurrence of a singular field wins


def _text(value: Any) -> str:
    if not isinstance(value, bytes):
        raise Malformed("a string field holds a varint")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Malformed(f"invalid UTF-8 in a string field: {error}") from error


# Schema-driven decoding ----------------------------------------------------------------------------------------


def _message(data: Any, schema: Message) -> Json:
    if not isinstance(data, bytes):
        raise Malformed("a message field holds a varint")
    out: Json = {}
    for number, values in _fields(data).items():
        if number not in schema:
            if all(v in (0, b"") for v in values):
                continue  # gogo-protobuf writes every non-pointer field, set or not: a zero is JSON's omitted field
            # Dropping it would silently change the object; refusing tells the caller to send JSON instead.
            raise Undecodable(f"protobuf field {number} of a message the emulator only partly knows")
        name, kind = schema[number]
        if kind == "skip":
            continue
        if isinstance(kind, Inline):
            out.update(_message(values[-1], kind.message))
            continue
        if isinstance(kind, Repeated):
            value: Any = [_value(v, kind.item) for v in values]
        elif isinstance(kind, MapOf):
            value = {}
            for entry in values:
                pair = _fields(_bytes(entry))
                value[_text(_last(pair, 1, b""))] = _value(_last(pair, 2, _zero(kind.value)), kind.value)
        else:
            value = _value(values[-1], kind)
        zero_omitted = isinstance(kind, Repeated | MapOf) or (isinstance(kind, str) and kind in _OMIT_WHEN_ZERO)
        if value is None or (zero_omitted and not value):
            continue
        out[name] = value
    return out


def _value(raw: int | bytes, kind: Kind) -> Any:
    if isinstance(kind, str):
        kind = kind.removesuffix("?")
    if isinstance(kind, Mapping):
        return _message(raw, kind)
    if kind == "string":
        return _text(raw)
    if kind == "bytes":
        return base64.b64encode(_bytes(raw)).decode()
    if kind == "bool":
        return bool(_int(raw))
    if kind == "int":
        number = _int(raw)
        return number - (1 << 64) if number >= 1 << 63 else number  # int64 as two's complement
    if kind == "quantity":
        return _text(_last(_fields(_bytes(raw)), 1, b""))
    if kind == "intorstring":
        parts = _fields(_bytes(raw))
        if _last(parts, 1, 0) == 1:
            return _text(_last(parts, 3, b""))
        return _value(_last(parts, 2, 0), "int")
    if kind == "time":
        parts = _fields(_bytes(raw))
        seconds = _value(_last(parts, 1, 0), "int")
        # The zero time is how Go writes an unset metav1.Time; JSON has it as null, which the verbs drop.
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if seconds else None
    raise Undecodable(f"protobuf kind {kind}")


def _zero(kind: Kind) -> int | bytes:
    return 0 if kind in ("bool", "int", "bool?", "int?") else b""


def _int(raw: int | bytes) -> int:
    if not isinstance(raw, int):
        raise Malformed("a varint field holds bytes")
    return raw


def _bytes(raw: int | bytes) -> bytes:
    if not isinstance(raw, bytes):
        raise Malformed("a length-delimited field holds a varint")
    return raw
