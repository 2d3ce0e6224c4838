"""What keeps OTLP series apart once a backend drops resource attributes: `process.pid` on the
points of a process's resource, and `service.*` on every resource (Prometheus' OTLP endpoint
makes `job` and `instance` of them and, by default, keeps no other resource attribute)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otelgpu import __version__
from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.config import OtlpExporterConfig
from otelgpu.exporters.otlp.encode import AttributeCache, encode, encode_bytes
from otelgpu.exporters.otlp.exporter import OtlpExporter
from otelgpu.exporters.otlp.resource import INSTANCE_ID_NAMESPACE, service_attributes
from otelgpu.pdata import semconv
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.otlp.batches import T0, Recording, failed, gpu_metrics, gpu_resource, sent
from tests.unit.exporters.otlp.reference_encode import reference_request

NODE = "gpu-node-7"
# The semantic conventions' namespace for a service.instance.id derived from a stable name.
SEMCONV_NAMESPACE = uuid.UUID("4d63009a-8d0f-11ee-aad7-4c796ed8e320")


def _attrs(kvs: Any) -> dict[str, object]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in kvs}


def _process(pid: int, gpu: int = 0) -> ResourceMetrics:
    """A process's resource as the nvml receiver builds it: the GPU's attributes plus
    `process.pid`, its points carrying only what a device's points carry."""
    point = {semconv.HW_ID: gpu_resource(gpu)[semconv.HW_ID], semconv.HW_TYPE: "gpu"}
    metrics = (
        Metric(
            name="nvidia.gpu.process.memory.usage",
            unit="By",
            description="",
            kind=MetricKind.GAUGE,
            points=(NumberDataPoint(attributes=point, time_unix_nano=T0, value=2**30),),
        ),
        Metric(  # a point without attributes gets the pid all the same
            name="nvidia.gpu.process.count",
            unit="1",
            description="",
            kind=MetricKind.GAUGE,
            points=(NumberDataPoint(attributes={}, time_unix_nano=T0, value=1),),
        ),
    )
    return ResourceMetrics(
        resource=gpu_resource(gpu, **{semconv.PROCESS_PID: pid}),
        metrics=metrics,
        identity=(gpu_resource(gpu)[semconv.HW_ID], pid),
    )


def _point_identities(request: ExportMetricsServiceRequest) -> list[tuple[object, ...]]:
    """Each point as Prometheus' OTLP endpoint names its series when it promotes no resource
    attribute: the metric and the point's attributes (job/instance are the same for all)."""
    return [
        (metric.name, tuple(sorted(_attrs(point.attributes).items())))
        for rm in request.resource_metrics
        for scope in rm.scope_metrics
        for metric in scope.metrics
        for point in metric.gauge.data_points
    ]


def test_every_point_of_a_process_resource_carries_its_pid() -> None:
    request = encode((_process(101), _process(202)))
    for rm, pid in zip(request.resource_metrics, (101, 202), strict=True):
        assert _attrs(rm.resource.attributes)[semconv.PROCESS_PID] == pid  # still there
        points = [p for m in rm.scope_metrics[0].metrics for p in m.gauge.data_points]
        assert [_attrs(p.attributes)[semconv.PROCESS_PID] for p in points] == [pid, pid]
    identities = _point_identities(request)
    assert len(set(identities)) == len(identities) == 4  # two processes on one GPU stay apart


def test_the_pid_is_added_once_and_a_point_keeps_its_own() -> None:
    point = NumberDataPoint(attributes={semconv.PROCESS_PID: 7}, time_unix_nano=T0, value=1)
    metric = Metric(name="m", unit="", description="", kind=MetricKind.GAUGE, points=(point,))
    rm = ResourceMetrics(resource={semconv.PROCESS_PID: 9}, metrics=(metric,))
    (dp,) = encode((rm,)).resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points
    assert [(kv.key, kv.value.int_value) for kv in dp.attributes] == [(semconv.PROCESS_PID, 7)]


def test_process_points_are_the_message_bytes_with_the_pid_appended() -> None:
    # The encoder writes what opentelemetry-proto would for the same points with the pid added.
    batch = (_process(101), _process(202), ResourceMetrics(resource=gpu_resource(1), metrics=()))
    expected: Batch = tuple(
        ResourceMetrics(
            resource=rm.resource,
            metrics=tuple(
                Metric(
                    name=m.name,
                    unit=m.unit,
                    description=m.description,
                    kind=m.kind,
                    points=tuple(
                        NumberDataPoint(
                            attributes={**p.attributes, semconv.PROCESS_PID: pid},
                            time_unix_nano=p.time_unix_nano,
                            value=p.value,
                        )
                        for p in m.points
                    ),
                )
                for m in rm.metrics
            ),
        )
        if (pid := rm.resource.get(semconv.PROCESS_PID)) is not None
        else rm
        for rm in batch
    )
    cache = AttributeCache()
    for _ in range(2):  # cold and warm cache
        assert encode_bytes(batch, cache) == reference_request(expected).SerializeToString()


def test_service_instance_id_is_a_uuid5_of_the_node_name() -> None:
    from_env = service_attributes({"K8S_NODE_NAME": NODE}, hostname=lambda: "pod-abc")
    assert from_env == {
        semconv.SERVICE_NAME: "otelgpu",
        semconv.SERVICE_INSTANCE_ID: str(uuid.uuid5(SEMCONV_NAMESPACE, NODE)),
        semconv.SERVICE_VERSION: __version__,
    }
    assert INSTANCE_ID_NAMESPACE == SEMCONV_NAMESPACE
    # Stable: the same node gives the same ID (across restarts), another node another one.
    assert service_attributes({"K8S_NODE_NAME": NODE}) == from_env
    other = service_attributes({"K8S_NODE_NAME": "gpu-node-8"})
    assert other[semconv.SERVICE_INSTANCE_ID] != from_env[semconv.SERVICE_INSTANCE_ID]
    # dcgm-exporter's variable, then the host name, as host.name is chosen.
    assert service_attributes({"NODE_NAME": NODE}) == from_env
    assert service_attributes({"K8S_NODE_NAME": " "}, hostname=lambda: NODE) == from_env


def test_a_cache_with_resource_defaults_adds_them_without_overriding() -> None:
    defaults = {semconv.SERVICE_NAME: "otelgpu", semconv.SERVICE_INSTANCE_ID: "i-1"}
    cache = AttributeCache(resource_defaults=defaults)
    own = ResourceMetrics(resource={semconv.SERVICE_NAME: "mine", "k": 1}, metrics=gpu_metrics())
    bare = ResourceMetrics(resource={}, metrics=gpu_metrics())
    for _ in range(2):  # the second batch comes from the cache
        request = ExportMetricsServiceRequest.FromString(encode_bytes((own, bare), cache))
        got = [_attrs(rm.resource.attributes) for rm in request.resource_metrics]
        assert got == [
            {semconv.SERVICE_NAME: "mine", "k": 1, semconv.SERVICE_INSTANCE_ID: "i-1"},
            defaults,
        ]
    # The same resource through a cache without defaults is sent as it is.
    plain = ExportMetricsServiceRequest.FromString(encode_bytes((own,), AttributeCache()))
    assert _attrs(plain.resource_metrics[0].resource.attributes) == own.resource


@pytest.fixture
async def started(telemetry: SelfTelemetry, clock: FakeClock) -> Any:
    """Starts an exporter over a `Recording` transport (shut down at the end of the test)."""
    exporters: list[OtlpExporter] = []

    async def start(**options: Any) -> tuple[OtlpExporter, Recording]:
        transport = Recording()
        config = OtlpExporterConfig.model_validate({})
        settings = make_settings("otlp", Kind.EXPORTER, telemetry)
        exporter = OtlpExporter(
            settings, config, transport, sleep=clock.sleep, monotonic=clock.monotonic, **options
        )
        await exporter.start(FakeHost(telemetry))
        exporters.append(exporter)
        return exporter, transport

    yield start
    for exporter in exporters:
        await exporter.shutdown()


async def test_every_resource_the_exporter_sends_carries_service_attributes(
    started: Any, clock: FakeClock
) -> None:
    otlp, transport = await started(environ={"K8S_NODE_NAME": NODE})
    agent = ResourceMetrics(  # the self-telemetry's resource names the service already
        resource={semconv.SERVICE_NAME: "otelgpu-self", semconv.SERVICE_VERSION: "9"},
        metrics=gpu_metrics(),
    )
    await otlp.consume((ResourceMetrics(resource=gpu_resource(0), metrics=gpu_metrics()),))
    await otlp.consume((_process(101), _process(202)))
    await otlp.consume((agent,))
    await clock.advance(0)
    instance = str(uuid.uuid5(SEMCONV_NAMESPACE, NODE))
    resources = [
        _attrs(rm.resource.attributes) for r in transport.requests for rm in r.resource_metrics
    ]
    assert len(resources) == 4
    for resource in resources[:3]:
        assert (
            resource[semconv.SERVICE_NAME],
            resource[semconv.SERVICE_INSTANCE_ID],
            resource[semconv.SERVICE_VERSION],
        ) == ("otelgpu", instance, __version__)
    assert resources[0][semconv.HW_ID] == gpu_resource(0)[semconv.HW_ID]
    assert [r[semconv.PROCESS_PID] for r in resources[1:3]] == [101, 202]
    assert {k: v for k, v in resources[3].items() if k.startswith("service.")} == {
        semconv.SERVICE_NAME: "otelgpu-self",
        semconv.SERVICE_VERSION: "9",
        semconv.SERVICE_INSTANCE_ID: instance,
    }
    identities = _point_identities(transport.requests[1])
    assert len(set(identities)) == len(identities) == 4


async def test_a_resource_without_metrics_is_not_sent(
    started: Any, telemetry: SelfTelemetry, clock: FakeClock
) -> None:
    otlp, transport = await started()
    gone = ResourceMetrics(resource=gpu_resource(3), metrics=(), identity="GPU-3")
    # Only markers: nothing queued, nothing sent, nothing counted.
    await otlp.consume((gone, ResourceMetrics(resource={}, metrics=(), identity=("GPU-4", 1))))
    await clock.advance(0)
    assert transport.requests == []
    assert (sent(telemetry, "otlp"), failed(telemetry, "otlp")) == (0, 0)
    # Beside resources that have metrics: they are sent, the marker is not.
    live = ResourceMetrics(resource=gpu_resource(1), metrics=gpu_metrics(), identity="GPU-1")
    await otlp.consume((gone, live, gone))
    await clock.advance(0)
    (request,) = transport.requests
    (rm,) = request.resource_metrics
    assert _attrs(rm.resource.attributes)[semconv.HW_ID] == gpu_resource(1)[semconv.HW_ID]
    assert (sent(telemetry, "otlp"), failed(telemetry, "otlp")) == (4, 0)
