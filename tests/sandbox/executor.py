"""The sandbox's job executor (test infrastructure, not product): what the Job controller and a kubelet do for
the emulated clusters, with the container run as a local process.

A thread looks at every cluster's Jobs (in-process, as the node reconciler does: it never shows in the request
logs) and runs each new one:

- a Pod owned by the Job, labelled as the Job controller labels it, Running while the process runs;
- the container's ``command``/``args`` as a process of this venv: the image's entrypoint ``gpu-jobs`` is
  ``python -m jobs`` from this checkout (the image itself is not pulled);
- its ``env``: values, ``$(VAR)`` references, ``valueFrom`` fieldRef (the pod's namespace, name, labels,
  annotations, service account) and configMapKeyRef, read from the cluster;
- its volumes: a ConfigMap written to a temporary directory in place of its ``mountPath`` (``/etc/gpu-jobs`` is
  a directory of the run; env values and args under a mount path are rewritten to it), an emptyDir as an empty one;
- the ServiceAccount's credentials: a token the emulator issued for that ServiceAccount, in a kubeconfig of one
  context, so every request is authorised by the RBAC the install applied (a missing verb is a 403, as in a pod);
- the sandbox's cloud endpoints (and nothing else of this machine's environment but PATH and PYTHONPATH).

At the end the Pod is Succeeded or Failed with the container's exit code, its output (stdout and stderr, as
``kubectl logs`` shows both) is the Pod's log, and the Job gets the status the Job controller writes: ``succeeded``
or ``failed``, ``startTime``/``completionTime``, and the conditions ``SuccessCriteriaMet`` + ``Complete`` or
``FailureTarget`` + ``Failed`` (BackoffLimitExceeded, DeadlineExceeded after ``activeDeadlineSeconds``). A failed
pod is retried up to ``backoffLimit`` times. Not modelled: parallelism and completions above 1, suspend,
Secrets (a Job mounting one fails to start), image pulls, resources.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests import forkserver
from tests.emulators.kube import admission
from tests.emulators.kube.batch import CONTROLLER_UID_LABEL
from tests.emulators.kube.fixtures import KubeHandle

Json = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
#: The image's ENTRYPOINT (Dockerfile) and what stands for it here.
ENTRYPOINT = "gpu-jobs"
GPU_JOBS = (sys.executable, "-m", "jobs")
#: How often the executor looks for new Jobs: a Job waits half of it on average before it starts (a one-off run
#: `kubectl wait`s for it); a pass is a few in-memory lists.
POLL_INTERVAL_S = 0.1
log = logging.getLogger(__name__)


class CannotStart(Exception):
    """What a kubelet reports as CreateContainerConfigError (a missing ConfigMap, an unsupported volume)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _suffix() -> str:
    return "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))


@dataclass(frozen=True)
class Attempt:
    pod: str
    exit_code: int
    output: str
    reason: str  # "Completed", "Error", "DeadlineExceeded", "CreateContainerConfigError"


@dataclass
class JobExecutor:
    """Runs the Jobs of ``clusters`` (name -> emulated API) with ``cloud_env`` (the sandbox's endpoints)."""

    clusters: Mapping[str, KubeHandle]
    cloud_env: Mapping[str, str]
    workdir: Path
    poll_interval_s: float = POLL_INTERVAL_S
    _seen: set[tuple[str, str]] = field(default_factory=set)  # (cluster, Job uid)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=8))
    _running: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> JobExecutor:
        self._thread = threading.Thread(target=self._loop, name="sandbox-job-executor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_interval_s):
            try:
                self.start_new_jobs()
            except Exception:  # an emulator mid-reset must not end the executor
                log.debug("job executor pass failed; retrying", exc_info=True)

    def start_new_jobs(self) -> int:
        """Start every Job not started yet (in any cluster); returns how many were started."""
        started = 0
        for cluster, kube in self.clusters.items():
            for job in kube.list("Job"):
                key = (cluster, job["metadata"]["uid"])
                if key in self._seen or (job.get("status") or {}).get("startTime"):
                    continue
                if (job.get("spec") or {}).get("suspend"):
                    continue
                self._seen.add(key)
                with self._lock:
                    self._running += 1
                self._pool.submit(self._run_job, cluster, kube, job)
                started += 1
        return started

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._running > 0

    def wait(self, cluster: str, namespace: str, name: str, timeout_s: float = 120.0) -> Json:
        """The Job once it has finished (Complete or Failed), polling the cluster."""
        kube = self.clusters[cluster]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = kube.get("Job", name, namespace)
            if job is not None and _finished(job):
                return job
            time.sleep(0.05)
        raise TimeoutError(f"Job {namespace}/{name} in {cluster} did not finish within {timeout_s} s")

    # One Job ----------------------------------------------------------------------------------------------------

    def _run_job(self, cluster: str, kube: KubeHandle, job: Json) -> None:
        try:
            self._run(cluster, kube, job)
        except Exception:
            log.exception("the executor could not run Job %s in %s", job["metadata"]["name"], cluster)
        finally:
            with self._lock:
                self._running -= 1

    def _run(self, cluster: str, kube: KubeHandle, job: Json) -> None:
        meta, spec = job["metadata"], job.get("spec") or {}
        namespace, name = meta["namespace"], meta["name"]
        started = _now()
        began = time.monotonic()
        _update_status(kube, namespace, name, lambda s: s.update({"startTime": started, "active": 1, "ready": 1}))
        deadline = spec.get("activeDeadlineSeconds")
        attempts = int(spec.get("backoffLimit", 6)) + 1
        failed = 0
        last: Attempt | None = None
        for _ in range(attempts):
            remaining = None if deadline is None else max(0.0, float(deadline) - (time.monotonic() - began))
            last = self._attempt(cluster, kube, job, remaining)
            if last.exit_code == 0:
                break
            failed += 1
            if last.reason == "DeadlineExceeded":
                break
        assert last is not None
        finished = _now()
        if last.exit_code == 0:
            conditions = [
                _condition("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
                _condition("Complete", "CompletionsReached", "Reached expected number of succeeded pods"),
            ]
            status: Json = {"succeeded": 1, "completionTime": finished}
        else:
            reason, message = (
                ("DeadlineExceeded", "Job was active longer than specified deadline")
                if last.reason == "DeadlineExceeded"
                else ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
            )
            conditions = [_condition("FailureTarget", reason, message), _condition("Failed", reason, message)]
            status = {}
        if failed:
            status["failed"] = failed

        def finish(current: Json) -> None:
            current.pop("active", None)
            current.update({**status, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})
            current["conditions"] = conditions

        _update_status(kube, namespace, name, finish)

    def _attempt(self, cluster: str, kube: KubeHandle, job: Json, timeout_s: float | None) -> Attempt:
        meta = job["metadata"]
        namespace = meta["namespace"]
        template = (job.get("spec") or {}).get("template") or {}
        pod_name = f"{meta['name']}-{_suffix()}"[:63]
        pod = _pod(job, template, pod_name)
        kube.create(pod)
        run_dir = Path(tempfile.mkdtemp(prefix=f"{pod_name}-", dir=self.workdir))
        try:
            try:
                argv, env = self._process(cluster, kube, pod, run_dir)
            except CannotStart as error:
                attempt = Attempt(pod_name, 1, f"{error}\n", "CreateContainerConfigError")
            else:
                attempt = _execute(pod_name, argv, env, timeout_s)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        _terminate_pod(kube, namespace, pod_name, attempt)
        return attempt

    def _process(self, cluster: str, kube: KubeHandle, pod: Json, run_dir: Path) -> tuple[list[str], dict[str, str]]:
        spec = pod["spec"]
        containers = spec.get("containers") or []
        if len(containers) != 1:
            raise CannotStart(f"the executor runs pods of one container, not {len(containers)}")
        container = containers[0]
        namespace = pod["metadata"]["namespace"]
        mounts = self._mount(kube, namespace, spec, container, run_dir)
        env: dict[str, str] = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(REPO),
            "HOME": str(run_dir),
            "HOSTNAME": pod["metadata"]["name"],
            **self.cloud_env,
        }
        if "/tmp" in mounts:
            env["TMPDIR"] = mounts["/tmp"]
        for variable in container.get("env") or []:
            env[variable["name"]] = _relocate(_env_value(kube, pod, variable, env), mounts)
        account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        if self._automount(kube, namespace, account, spec):
            token = kube.emulator.issue_token(namespace, account)
            kubeconfig = _service_account_kubeconfig(run_dir / "kubeconfig", cluster, kube.url, token, namespace)
            env["KUBECONFIG"] = str(kubeconfig)
        else:
            env["KUBECONFIG"] = str(run_dir / "no-kubeconfig")  # what a pod without a token has: nothing
        command = [_expand(part, env) for part in container.get("command") or [ENTRYPOINT]]
        args = [_relocate(_expand(part, env), mounts) for part in container.get("args") or []]
        if command[0] != ENTRYPOINT:
            raise CannotStart(f"the executor runs the gpu-jobs image's entrypoint only, not {command[0]!r}")
        return [*GPU_JOBS, *command[1:], *args], env

    @staticmethod
    def _automount(kube: KubeHandle, namespace: str, account: str, spec: Json) -> bool:
        sa = kube.get("ServiceAccount", account, namespace)
        if sa is None:
            raise CannotStart(f'serviceaccount "{account}" not found')
        if spec.get("automountServiceAccountToken") is not None:
            return bool(spec["automountServiceAccountToken"])
        return sa.get("automountServiceAccountToken") is not False

    @staticmethod
    def _mount(kube: KubeHandle, namespace: str, spec: Json, container: Json, run_dir: Path) -> dict[str, str]:
        """Each volume mount as a directory of this run: mount path -> local path."""
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        mounts: dict[str, str] = {}
        for index, mount in enumerate(container.get("volumeMounts") or []):
            volume = volumes.get(mount["name"])
            if volume is None:
                raise CannotStart(f'volume "{mount["name"]}" is not defined')
            local = run_dir / f"volume-{index}-{mount['name']}"
            local.mkdir()
            if "configMap" in volume:
                source = volume["configMap"]
                config_map = kube.get("ConfigMap", source["name"], namespace)
                if config_map is None:
                    if source.get("optional"):
                        mounts[mount["mountPath"]] = str(local)
                        continue
                    raise CannotStart(f'configmap "{source["name"]}" not found')
                items = source.get("items") or [{"key": k, "path": k} for k in config_map.get("data") or {}]
                for item in items:
                    (local / item["path"]).write_text((config_map.get("data") or {})[item["key"]])
            elif "emptyDir" not in volume:
                kinds = ", ".join(k for k in volume if k != "name")
                raise CannotStart(f"volume {mount['name']!r} ({kinds}): the executor mounts ConfigMaps and emptyDirs")
            mounts[mount["mountPath"].rstrip("/") or "/"] = str(local)
        return mounts


# --- helpers ----------------------------------------------------------------------------------------------------


def _finished(job: Json) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _condition(kind: str, reason: str, message: str) -> Json:
    now = _now()
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _update_status(kube: KubeHandle, namespace: str, name: str, change: Callable[[Json], None]) -> None:
    """The Job controller's status write (in-process, under the cluster's lock: no lost update)."""
    with kube.cluster.lock:
        job = kube.get("Job", name, namespace)
        if job is None:
            return  # deleted meanwhile
        status = job.setdefault("status", {})
        change(status)
        kube.put(job)


def _pod(job: Json, template: Json, name: str) -> Json:
    meta = job["metadata"]
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    labels.setdefault(CONTROLLER_UID_LABEL, meta["uid"])
    spec = {**(template.get("spec") or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": dict(template_meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "startTime": _now(),
            "qosClass": admission.qos_class({"spec": spec}),
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": _now()}},
                }
                for c in spec.get("containers") or []
            ],
        },
    }


def _terminate_pod(kube: KubeHandle, namespace: str, name: str, attempt: Attempt) -> None:
    with kube.cluster.lock:
        pod = kube.get("Pod", name, namespace)
        if pod is None:
            return
        container = (pod["spec"].get("containers") or [{"name": "main"}])[0]
        terminated = {
            "exitCode": attempt.exit_code,
            "reason": attempt.reason,
            "startedAt": pod["status"].get("startTime", _now()),
            "finishedAt": _now(),
        }
        pod["status"] = {
            **pod["status"],
            "phase": "Succeeded" if attempt.exit_code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": terminated},
                }
            ],
        }
        kube.put(pod)
        kube.cluster.set_pod_log(namespace, name, attempt.output)


def _execute(pod: str, argv: list[str], env: dict[str, str], timeout_s: float | None) -> Attempt:
    try:
        done = forkserver.run(  # a gpu-jobs command line forked from the pre-imported server
            argv,
            env=env,
            cwd=env["HOME"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one log, as the container runtime keeps it
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout if isinstance(expired.stdout, str) else (expired.stdout or b"").decode()
        return Attempt(pod, 137, output, "DeadlineExceeded")
    return Attempt(pod, done.returncode, done.stdout, "Completed" if done.returncode == 0 else "Error")


_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion: a defined variable is replaced, anything else is left as written."""
    return _REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def _relocate(value: str, mounts: Mapping[str, str]) -> str:
    """A path under a mount path, moved to where this run mounted it (``/etc/gpu-jobs/policy.yaml``)."""
    for mount_path, local in sorted(mounts.items(), key=lambda item: -len(item[0])):
        if value == mount_path or value.startswith(mount_path + "/"):
            return local + value[len(mount_path) :]
    return value


_FIELD_PATH = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def _env_value(kube: KubeHandle, pod: Json, variable: Json, env: Mapping[str, str]) -> str:
    if "valueFrom" not in variable:
        return _expand(str(variable.get("value", "")), env)
    source = variable["valueFrom"]
    if "fieldRef" in source:
        path = source["fieldRef"]["fieldPath"]
        meta = pod["metadata"]
        simple = {
            "metadata.namespace": meta["namespace"],
            "metadata.name": meta["name"],
            "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
            "spec.nodeName": pod["spec"].get("nodeName", ""),
        }
        if path in simple:
            return str(simple[path])
        if found := _FIELD_PATH.fullmatch(path):
            return str((meta.get(found.group(1)) or {}).get(found.group(2), ""))
        raise CannotStart(f"fieldRef {path!r} is not modelled by the executor")
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        config_map = kube.get("ConfigMap", ref["name"], pod["metadata"]["namespace"])
        value = ((config_map or {}).get("data") or {}).get(ref["key"])
        if value is None:
            if ref.get("optional"):
                return ""
            raise CannotStart(
                f"couldn't find key {ref['key']} in ConfigMap {pod['metadata']['namespace']}/{ref['name']}"
            )
        return str(value)
    raise CannotStart(f"env {variable['name']}: only fieldRef and configMapKeyRef are modelled by the executor")


def _service_account_kubeconfig(path: Path, cluster: str, url: str, token: str, namespace: str) -> Path:
    """What the pod's mounted token amounts to: this cluster's API, this ServiceAccount, nothing else."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": url}}],
        "users": [{"name": "service-account", "user": {"token": token}}],
        "contexts": [
            {"name": cluster, "context": {"cluster": cluster, "user": "service-account", "namespace": namespace}}
        ],
        "current-context": cluster,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with contextlib.suppress(OSError):
        path.chmod(0o600)
    return path
