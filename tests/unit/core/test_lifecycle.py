"""One lifecycle test over every registered factory.

create (defaults, plus overrides that keep the test off real ports and peers) → start →
one batch through it → shutdown twice; and shutdown on a component that never started.
A new component must be listed in OPTIONS, so nobody adds one without this check.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.registry import Factory
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.service.builtins import builtin_registry
from tests.conftest import make_settings
from tests.fakes import FakeHost, Sink

NO_PEER = "/nonexistent/otelgpu-test.sock"
OPTIONS: dict[str, dict[str, Any]] = {
    "debug": {},
    "filter": {"metrics": {"exclude": ["nothing.*"]}},
    "attributes": {"actions": [{"key": "a", "action": "upsert", "value": "b"}]},
    "resource": {"attributes": [{"key": "k8s.cluster.name", "action": "upsert", "value": "c"}]},
    "health_check": {"endpoint": "127.0.0.1:0"},
    "prometheus": {"endpoint": "127.0.0.1:0"},
    "otlp": {"endpoint": "127.0.0.1:9", "retry_on_failure": {"enabled": False}, "timeout": "200ms"},
    "otlp_http": {
        "endpoint": "http://127.0.0.1:9",
        "retry_on_failure": {"enabled": False},
        "timeout": "200ms",
    },
    "nvml": {"backend": "simulated", "collection_interval": "1h"},
    "kubelet_stats": {"endpoint": "http://127.0.0.1:9", "collection_interval": "1h"},
    "k8s_attributes": {"pod_resources_socket": NO_PEER},
    "container_env": {"runtime": "containerd", "containerd": {"socket": NO_PEER}},
    "hpc_jobs": {"job_mapping_dir": "/nonexistent/otelgpu-test-jobs"},
}


def _batch() -> Batch:
    point = NumberDataPoint(attributes={}, time_unix_nano=1, value=0.5)
    metric = Metric(
        name="hw.gpu.utilization", unit="1", description="", kind=MetricKind.GAUGE, points=(point,)
    )
    return (ResourceMetrics(resource={"hw.id": "GPU-0", "hw.type": "gpu"}, metrics=(metric,)),)


FACTORIES = list(builtin_registry())


def _create(factory: Factory, telemetry: SelfTelemetry) -> Any:
    config = factory.config_type.model_validate(OPTIONS[factory.type])
    settings = make_settings(factory.type, factory.kind, telemetry)
    if factory.kind is Kind.RECEIVER:
        return factory.create(settings, config, Sink())
    return factory.create(settings, config)


def test_every_factory_has_lifecycle_options() -> None:
    assert sorted(f.type for f in FACTORIES if f.type not in OPTIONS) == []


@pytest.mark.parametrize("factory", FACTORIES, ids=[f"{f.kind.value}:{f.type}" for f in FACTORIES])
async def test_lifecycle(factory: Factory, telemetry: SelfTelemetry) -> None:
    tasks_before, threads_before = _tasks(), set(threading.enumerate())
    component = _create(factory, telemetry)
    await component.start(FakeHost(telemetry))
    if factory.kind is Kind.PROCESSOR:
        assert isinstance(component.process(_batch()), tuple)
    if factory.kind is Kind.EXPORTER:
        await component.consume(_batch())
    await component.shutdown()
    # Everything start() created is gone once shutdown returns: no task left pending, and
    # no thread left running (the event loop's own default executor is the loop's, not
    # theirs).
    assert [t.get_name() for t in _tasks() - tasks_before if not t.done()] == []
    assert [t.name for t in _own_threads(threads_before)] == []
    await component.shutdown()


def _tasks() -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


# grpcio's asyncio poller: one thread per process, started by the first aio object and
# stopped by grpcio itself some time after the last one goes, so it is grpcio's, not the
# component's (the component's channel is closed by then).
_GRPCIO_POLLER = "(_poll_wrapper)"


def _own_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if t not in before
        and t.is_alive()
        and not t.name.startswith("asyncio_")
        and not t.name.endswith(_GRPCIO_POLLER)
    ]


@pytest.mark.parametrize("factory", FACTORIES, ids=[f"{f.kind.value}:{f.type}" for f in FACTORIES])
async def test_shutdown_without_start(factory: Factory, telemetry: SelfTelemetry) -> None:
    component = _create(factory, telemetry)
    await component.shutdown()
