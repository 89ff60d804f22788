"""batch/v1 CronJobs and Jobs as the real server prepares and validates them on create (``SetDefaults_*``,
``PrepareForCreate``, ``ValidateCronJob``/``ValidateJob``, as far as the project's manifests and everyday Jobs reach).

No controllers here: no CronJob schedules Jobs by itself (a one-off is ``kubectl create job --from=cronjob/...``),
and a Job's pods are run by whoever watches the cluster (the sandbox's executor, :mod:`tests.sandbox.executor`).
"""

from __future__ import annotations

import zoneinfo
from typing import Any

from croniter import croniter

Json = dict[str, Any]
Cause = tuple[str, str, str]

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
#: The labels before 1.27, still set next to the new ones.
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
#: A CronJob's name becomes part of its Jobs' names (a suffix of 11 characters) and those of their pods.
CRONJOB_NAME_MAX = 52


def default_cronjob(obj: Json) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    obj["status"] = {}


def default_job(obj: Json) -> None:
    """A new Job: defaults, the generated selector and the template labels that tie its pods to it (the uid must be
    set already), and an empty status."""
    meta, spec = obj["metadata"], obj.setdefault("spec", {})
    template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
    for key, value in (
        ("parallelism", 1),
        ("completions", 1),
        ("backoffLimit", 6),
        ("completionMode", "NonIndexed"),
        ("suspend", False),
        ("podReplacementPolicy", "TerminatingOrFailed"),
    ):
        spec.setdefault(key, value)
    if not spec.get("manualSelector"):
        uid = meta["uid"]
        spec["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: uid}}
        labels = template_meta.setdefault("labels", {})
        labels.update(
            {
                CONTROLLER_UID_LABEL: uid,
                JOB_NAME_LABEL: meta["name"],
                LEGACY_CONTROLLER_UID_LABEL: uid,
                LEGACY_JOB_NAME_LABEL: meta["name"],
            }
        )
    if not meta.get("labels"):
        meta["labels"] = dict(template_meta.get("labels") or {})
    obj["status"] = {}


def _template_causes(template: Json, field: str) -> list[Cause]:
    spec = template.get("spec") or {}
    causes: list[Cause] = []
    policy = spec.get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        causes.append(
            (
                "FieldValueNotSupported",
                f"{field}.spec.restartPolicy",
                f'Unsupported value: "{policy or ""}": supported values: "OnFailure", "Never"',
            )
        )
    if not spec.get("containers"):
        causes.append(("FieldValueRequired", f"{field}.spec.containers", "Required value"))
    for index, container in enumerate(spec.get("containers") or []):
        if not container.get("image"):
            causes.append(("FieldValueRequired", f"{field}.spec.containers[{index}].image", "Required value"))
    return causes


def cronjob_causes(obj: Json) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    name = (obj.get("metadata") or {}).get("name") or ""
    if len(name) > CRONJOB_NAME_MAX:
        causes.append(
            ("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": must be no more than 52 characters')
        )
    schedule = spec.get("schedule")
    if not schedule:
        causes.append(("FieldValueRequired", "spec.schedule", "Required value"))
    elif not croniter.is_valid(schedule):
        causes.append(("FieldValueInvalid", "spec.schedule", f'Invalid value: "{schedule}": unparseable schedule'))
    zone = spec.get("timeZone")
    if zone is not None:
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            causes.append(("FieldValueInvalid", "spec.timeZone", f'Invalid value: "{zone}": unknown time zone {zone}'))
    if spec.get("concurrencyPolicy") not in (None, "Allow", "Forbid", "Replace"):
        causes.append(
            (
                "FieldValueNotSupported",
                "spec.concurrencyPolicy",
                f'Unsupported value: "{spec["concurrencyPolicy"]}": supported values: "Allow", "Forbid", "Replace"',
            )
        )
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    causes += _template_causes(job_spec.get("template") or {}, "spec.jobTemplate.spec.template")
    return causes


def job_causes(obj: Json, old: Json | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes = _template_causes(spec.get("template") or {}, "spec.template")
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if selector and not selector.items() <= labels.items():
        causes.append(
            (
                "FieldValueInvalid",
                "spec.template.metadata.labels",
                "Invalid value: `selector` does not match template `labels`",
            )
        )
    if old is not None:
        old_spec = old.get("spec") or {}
        if spec.get("template") != old_spec.get("template") and not old_spec.get("suspend"):
            causes.append(("FieldValueInvalid", "spec.template", "Invalid value: field is immutable"))
        if spec.get("selector") != old_spec.get("selector"):
            causes.append(("FieldValueInvalid", "spec.selector", "Invalid value: field is immutable"))
    return causes
