"""The AWS emulator: moto's server app behind a middleware that logs, injects faults and adds what moto lacks.

One WSGI app on 127.0.0.1 answers every service (EKS, Auto Scaling, EC2, Service Quotas, and whatever else moto
knows) at a single URL, as ``AWS_ENDPOINT_URL`` expects. Per request the middleware:

1. identifies service, region and operation (:mod:`tests.emulators.aws.wire`);
2. records it through :meth:`Emulator.begin` (request log, latency, armed fault) and notes the IAM action;
3. renders an armed fault the way that service does on the wire;
4. hands the request to an extension handler (:mod:`.eks`, :mod:`.autoscaling`, :mod:`.service_quotas`) when
   there is one, else to moto unchanged.
"""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from moto.ec2.models.instance_types import INSTANCE_TYPES
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

from tests.emulators.aws import autoscaling, ec2_filters, moto_state
from tests.emulators.aws.capacity import Capacity
from tests.emulators.aws.eks import DEFAULT_UPDATE_SECONDS, EksExtension, Handler, UpdateTiming
from tests.emulators.aws.service_quotas import QuotaRequest, ServiceQuotasFake
from tests.emulators.aws.wire import Reply, fault_reply, identify
from tests.emulators.base import Emulator, FaultKind, RunningServer, start

DEFAULT_REGION = "us-east-1"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class SeededNodegroup:
    arn: str
    asg_name: str
    launch_template_id: str | None = None  # the EC2 launch template the node group was built from, if any


ec2_filters.install()  # EC2's wildcards in DescribeInstances filter values


class AwsEmulator(Emulator):
    """Serve with :func:`start_aws` (or the ``aws`` pytest fixture); seed with the ``add_*``/``set_*`` methods."""

    def __init__(self, region: str = DEFAULT_REGION) -> None:
        super().__init__()
        self.region = region
        self.url = ""
        self.quotas = ServiceQuotasFake(clock=self.clock, wake_at=self.wake_at)
        self.capacity = Capacity(self.quotas)
        self.eks = EksExtension(capacity=self.capacity, clock=self.clock, wake_at=self.wake_at)
        self._server: RunningServer | None = None
        self._moto: Callable[[dict[str, Any], StartResponse], Iterable[bytes]] = DomainDispatcherApplication(
            create_backend_app
        )
        self._actions: set[str] = set()
        self._actions_lock = threading.Lock()
        self._handlers: dict[tuple[str, str], Handler] = {
            **{("eks", op): handler for op, handler in self.eks.handlers().items()},
            **{("autoscaling", op): handler for op, handler in autoscaling.handlers(self.capacity).items()},
            **{("servicequotas", op): handler for op, handler in self.quotas.handlers().items()},
        }

    # --- WSGI ------------------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        call = identify(environ, body)
        operation = call.operation or f"{call.method} {call.path}"
        if call.operation and call.service:
            with self._actions_lock:
                self._actions.add(call.iam_action)
        fault = self.begin(call.method, call.path, operation, call.query, body)
        if fault and fault != "lost":
            reply = fault_reply(call, fault)
        else:
            handler = self._handlers.get((call.service, call.operation))
            passthrough = functools.partial(self._to_moto, environ, body)  # only some handlers call moto
            reply = handler(call, passthrough) if handler else passthrough()
            if fault == "lost":  # carried out; the answer never reaches the client
                reply = fault_reply(call, "timeout")
        start_response(f"{reply.status} {_reason(reply.status)}", reply.headers)
        return [reply.body]

    def _to_moto(self, environ: dict[str, Any], body: bytes) -> Reply:
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            captured["status"], captured["headers"] = status, headers
            return lambda _chunk: None

        environ = {**environ, "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
        chunks = self._moto(environ, capture)
        try:
            data = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close:
                close()
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        return Reply(int(captured["status"].split(" ", 1)[0]), headers, data)

    def tick(self) -> None:
        """Finish the EKS updates and apply the quota decisions whose time is up."""
        self.eks.tick()
        self.quotas.tick()

    # --- lifecycle -------------------------------------------------------------------------------------------

    def serve(self, port: int = 0) -> AwsEmulator:
        self._server = start(self, port)
        self.url = self._server.url
        return self

    def stop(self) -> None:
        if self._server:
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Forget all state, log, faults and latency: every test starts from an empty AWS account."""
        moto_state.reset_all()
        self.eks.reset()
        self.quotas.reset()
        self.capacity.reset()
        self.log.clear()
        self.faults.clear()
        self.latency_s = 0.0
        self.timeout_hold_s = type(self).timeout_hold_s
        with self._actions_lock:
            self._actions.clear()

    def warm_up(self) -> None:
        """Serve one request per service once: moto builds its per-service apps lazily (~2 s for EC2), and the
        first test should not pay for that. Leaves the emulator reset."""
        self.client("ec2").describe_instances()
        self.client("autoscaling").describe_auto_scaling_groups()
        self.client("eks").list_clusters()
        self.client("service-quotas").list_service_quotas(ServiceCode="ec2")
        self.reset()

    # --- what tests and subprocesses need --------------------------------------------------------------------

    def iam_actions(self) -> set[str]:
        """IAM actions (``eks:UpdateNodegroupConfig``...) called since the last reset; log.clear() keeps them."""
        with self._actions_lock:
            return set(self._actions)

    def env(self, region: str | None = None) -> dict[str, str]:
        """Environment for a separate process whose boto3 should talk to this emulator."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            **DUMMY_CREDENTIALS,
            "AWS_DEFAULT_REGION": region or self.region,
            "AWS_REGION": region or self.region,
            # Keep the host's own AWS config and the instance metadata service out of the picture.
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self, service: str, region: str | None = None, *, attempts: int = 1, **config: Any) -> Any:
        """A boto3 client for this emulator making ``attempts`` attempts in all (default 1: retries never hide a
        fault). Note botocore's ``retries={"max_attempts": 1}`` means one *retry*, i.e. two attempts."""
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name=region or self.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            aws_session_token="testing",
            config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}, **config),
        )

    def inject(self, operation: str, kind: FaultKind, times: int = 1) -> None:
        self.faults.inject(operation, kind, times)

    # --- seeding ---------------------------------------------------------------------------------------------

    @property
    def update_timing(self) -> UpdateTiming:
        return self.eks.timing

    @update_timing.setter
    def update_timing(self, timing: UpdateTiming) -> None:
        self.eks.timing = timing

    def add_eks_nodegroup(
        self,
        region: str,
        cluster: str,
        nodegroup: str,
        min_size: int,
        desired_size: int,
        max_size: int,
        instance_types: Iterable[str] | None = None,
        capacity_type: str = "ON_DEMAND",
        labels: dict[str, str] | None = None,
        tags: dict[str, str] | None = None,
        launch_template: Mapping[str, Any] | str | None = None,
        launch_template_version: str | None = None,
    ) -> SeededNodegroup:
        """An ACTIVE managed node group (and its cluster, if missing) backed by a tagged ASG with its instances.

        ``launch_template`` builds it from an EC2 launch template: template data (``{"InstanceType": ...,
        "ImageId": ...}``) creates a new one, a string names an existing one (id ``lt-...`` or name), at
        ``launch_template_version`` (``"$Latest"``, ``"$Default"``, a number; default: the template's default).
        ``instance_types`` defaults to g5.xlarge without a launch template and to none with one.
        """
        if instance_types is None:
            instance_types = () if launch_template is not None else ("g5.xlarge",)
        types = list(instance_types)
        spec: dict[str, str] | None = None
        if isinstance(launch_template, str):
            key = "id" if launch_template.startswith("lt-") else "name"
            spec = {key: launch_template}
        elif launch_template is not None:
            spec = {"id": self.add_launch_template(region, f"{cluster}-{nodegroup}", launch_template)}
        if spec is not None and launch_template_version is not None:
            spec["version"] = launch_template_version
        _check_instance_types(types, allow_none=spec is not None)
        group = self.eks.add_nodegroup(
            region,
            cluster,
            nodegroup,
            min_size=min_size,
            desired_size=desired_size,
            max_size=max_size,
            instance_types=types,
            capacity_type=capacity_type,
            labels=labels or {},
            tags=tags or {},
            launch_template=spec,
        )
        resources: dict[str, Any] = group.resources
        template: dict[str, str] | None = group.launch_template
        return SeededNodegroup(
            group.arn, resources["autoScalingGroups"][0]["name"], template["id"] if template else None
        )

    def add_launch_template(self, region: str, name: str, data: Mapping[str, Any]) -> str:
        """An EC2 launch template with ``data`` as its version 1 (``LaunchTemplateData`` fields); returns its id."""
        if "InstanceType" in data:
            _check_instance_types([str(data["InstanceType"])])
        template = moto_state.ec2(region).create_launch_template(
            name=name, description=f"launch template {name}", template_data=dict(data), tag_spec={}
        )
        return str(template.id)

    def add_asg(
        self,
        region: str,
        name: str,
        min_size: int,
        desired_size: int,
        max_size: int,
        instance_type: str = "g5.xlarge",
        tags: dict[str, str] | None = None,
    ) -> str:
        """A plain (self-managed) ASG with a launch template; its instances carry the tags too."""
        _check_instance_types([instance_type])
        ec2 = moto_state.ec2(region)
        template = ec2.create_launch_template(
            name=f"lt-{name}",
            description=f"launch template of {name}",
            template_data={"ImageId": moto_state.IMAGE_ID, "InstanceType": instance_type},
            tag_spec={},
        )
        moto_state.create_asg(
            region,
            name,
            (min_size, desired_size, max_size),
            dict(tags or {}),
            launch_template={"LaunchTemplateId": template.id, "Version": "$Latest"},
        )
        return name

    def add_instance(self, region: str, instance_type: str, tags: dict[str, str] | None = None) -> str:
        """A running EC2 instance; returns its id."""
        _check_instance_types([instance_type])
        ec2 = moto_state.ec2(region)
        reservation = ec2.run_instances(
            moto_state.IMAGE_ID,
            1,
            None,
            [],
            instance_type=instance_type,
            tags={"instance": dict(tags or {})},
            is_instance_type_default=False,
        )
        return str(reservation.instances[0].id)

    def set_quota(self, region: str, code: str, value: float) -> None:
        self.quotas.set_quota(region, code, value)

    def stock_out(self, instance_type: str, zones: Iterable[str]) -> None:
        """EC2 has no ``instance_type`` capacity in ``zones`` (e.g. ``["eu-west-1a", "eu-west-1b"]``) until
        :meth:`restock`; Auto Scaling launches there fail with InsufficientInstanceCapacity."""
        self.capacity.stock_out(instance_type, list(zones))

    def restock(self, instance_type: str | None = None) -> None:
        self.capacity.restock(instance_type)

    def decide_quota_request(
        self, request_id: str, status: str, value: float | None = None, after_s: float = 0.0
    ) -> QuotaRequest:
        """Support decides a Service Quotas request now (or ``after_s`` later); returns it as it stands now."""
        self.quotas.decide(request_id, status, value, after_s)
        return next(r for r in self.quotas.requests() if r.id == request_id)


def start_aws(
    port: int = 0, region: str = DEFAULT_REGION, *, update_seconds: float | None = DEFAULT_UPDATE_SECONDS
) -> AwsEmulator:
    """Run a standalone emulator (e.g. for the demo sandbox); call ``.stop()`` when done. ``update_seconds``: how
    long an EKS update runs before it lands, polled or not."""
    emulator = AwsEmulator(region).serve(port)
    emulator.warm_up()
    emulator.update_timing = UpdateTiming(seconds=update_seconds)
    return emulator


def _check_instance_types(types: list[str], *, allow_none: bool = False) -> None:
    unknown = [t for t in types if t not in INSTANCE_TYPES]
    if (not types and not allow_none) or unknown:
        raise ValueError(f"unknown EC2 instance type(s) {unknown or types}")


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
