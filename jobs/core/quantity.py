"""Kubernetes resource quantities (``4``, ``500m``, ``256Gi``, ``1e3``) as exact numbers, and the resource names a
namespace quota may limit. The API server re-emits quantities in canonical form (``4000m`` comes back as ``4``,
``1024Mi`` as ``1Gi``), so quantities are compared by value, never as text."""

from __future__ import annotations

import re
from fractions import Fraction

_QUANTITY = re.compile(r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?P<suffix>[KMGTPE]i|[mkMGTPE]|[eE][+-]?\d{1,3})?")
_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    **{f"{p}i": Fraction(2 ** (10 * (i + 1))) for i, p in enumerate("KMGTPE")},
}

#: Quota keys Kubernetes manages itself: compute and storage resources and object counts.
STANDARD_RESOURCES = frozenset(
    {"cpu", "memory", "ephemeral-storage", "storage", "pods", "services", "configmaps", "secrets"}
    | {"persistentvolumeclaims", "replicationcontrollers", "resourcequotas", "services.loadbalancers"}
    | {"services.nodeports"}
)
#: Extended resources GPU device plugins advertise.
_GPU_RESOURCE = re.compile(r"nvidia\.com/gpu(\.shared)?|nvidia\.com/mig-\d+g\.\d+gb|amd\.com/gpu")
_EXTENDED = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def parse_quantity(value: str | int) -> Fraction:
    """The exact value of a quantity; ValueError when it is not one."""
    text = str(value).strip() if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or len(text) > 64:
        raise ValueError(f"{value!r} is not a quantity (e.g. 4, 500m, 256Gi)")
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a quantity (e.g. 4, 500m, 256Gi)")
    number, suffix = Fraction(match["number"]), match["suffix"] or ""
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIXES[suffix]


def is_gpu_resource(name: str) -> bool:
    return _GPU_RESOURCE.fullmatch(name) is not None


def is_extended_resource(name: str) -> bool:
    """A resource advertised by a device plugin (``vendor.example/thing``), not one of Kubernetes' own."""
    return _EXTENDED.fullmatch(name) is not None and not name.startswith(("kubernetes.io/", "requests.", "limits."))


def quota_key(name: str) -> str:
    """The key a ResourceQuota enforces for a resource: extended resources only as ``requests.<name>``."""
    return f"requests.{name}" if is_extended_resource(name) else name
