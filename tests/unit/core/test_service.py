"""The service: graph wiring, start/stop order, failed starts, shared components, readiness."""

from __future__ import annotations

import pytest

from otelgpu.component.component import ComponentID, Host, Kind, Settings, Stability
from otelgpu.component.errors import StartError
from otelgpu.component.registry import Factory, Registry
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.config.types import StrictModel
from otelgpu.pdata.model import Batch
from otelgpu.service.service import Service
from tests.components import core_registry

EVENTS: list[str] = []


class RecordingConfig(StrictModel):
    fail_start: bool = False


class RecordingExporter:
    """Records lifecycle calls and batches; can refuse to start."""

    def __init__(self, settings: Settings, config: RecordingConfig) -> None:
        self.id, self.config, self.batches = str(settings.id), config, []  # type: list[Batch]

    async def start(self, host: Host) -> None:
        EVENTS.append(f"start {self.id}")
        if self.config.fail_start:
            raise OSError("address already in use")

    async def shutdown(self) -> None:
        EVENTS.append(f"shutdown {self.id}")

    async def consume(self, batch: Batch) -> None:
        self.batches.append(batch)


recording = Factory(
    type="recording",
    kind=Kind.EXPORTER,
    stability=Stability.DEVELOPMENT,
    config_type=RecordingConfig,
    create=RecordingExporter,
)


def _registry() -> Registry:
    return Registry([*core_registry(), recording])


PIPELINES = """\
receivers:
  sample:
  sample/two:
processors:
  filter:
    metrics: {include: [sample.value]}
exporters:
  recording/a:
  recording/b: {fail_start: %s}
service:
  pipelines:
    metrics/all:
      receivers: [sample, sample/two]
      exporters: [recording/a]
    metrics/filtered:
      receivers: [sample]
      processors: [filter]
      exporters: [recording/a, recording/b]
"""


def _service(fail: bool = False) -> Service:
    config = validate(load([("p.yaml", PIPELINES % str(fail).lower())], environ={}), _registry())
    return Service(config, _registry(), SelfTelemetry())


async def test_shared_receivers_and_exporters_are_one_instance_processors_per_pipeline() -> None:
    service = _service()
    EVENTS.clear()
    await service.start()
    graph = service.graph
    assert graph is not None
    assert sorted(map(str, graph.receivers)) == ["sample", "sample/two"]
    assert sorted(map(str, graph.exporters)) == ["recording/a", "recording/b"]
    assert list(graph.processors) == [(ComponentID("metrics", "filtered"), ComponentID("filter"))]
    # exporters start before receivers; shutdown runs the other way round
    assert EVENTS == ["start recording/a", "start recording/b"]
    sample = graph.receivers[ComponentID("sample")]
    await sample.controller.scrape_once()  # type: ignore[attr-defined]
    a = graph.exporters[ComponentID("recording", "a")]
    b = graph.exporters[ComponentID("recording", "b")]
    # `sample` feeds both pipelines: recording/a sees it twice (once filtered), b once, filtered
    assert len(a.batches) == 2 and len(b.batches) == 1  # type: ignore[attr-defined]
    assert {m.name for rm in b.batches[0] for m in rm.metrics} == {"sample.value"}  # type: ignore[attr-defined]
    assert service.readiness() == (True, [])
    await service.shutdown()
    await service.shutdown()
    assert EVENTS[-2:] == ["shutdown recording/b", "shutdown recording/a"]
    assert service.readiness()[0] is False


async def test_a_failed_start_names_the_component_and_stops_what_started() -> None:
    service = _service(fail=True)
    EVENTS.clear()
    with pytest.raises(
        StartError, match=r'failed to start "recording/b" exporter: address already in use'
    ):
        await service.start()
    assert EVENTS == [
        "start recording/a",
        "start recording/b",
        "shutdown recording/b",
        "shutdown recording/a",
    ]


async def test_readiness_waits_for_every_source() -> None:
    service = _service()
    await service.start()
    service.telemetry.register_source("pod_resources")
    ready, reasons = service.readiness()
    assert not ready and reasons == ["source pod_resources: no answer yet"]
    service.telemetry.source_failed("pod_resources", "socket missing")
    assert service.readiness()[1] == ["source pod_resources: socket missing"]
    service.telemetry.source_ok("pod_resources")
    assert service.readiness() == (True, [])
    await service.shutdown()


class _Broken:
    def process(self, batch: Batch) -> Batch:
        raise ZeroDivisionError("bug")


async def test_a_raising_processor_costs_only_its_batch_and_is_counted() -> None:
    from otelgpu.component.consumer import PipelineHead
    from tests.fakes import Sink

    telemetry, sink = SelfTelemetry(), Sink()
    head = PipelineHead("metrics", [("broken", _Broken())], sink, telemetry)  # type: ignore[list-item]
    from tests.components import SampleReceiver, SampleReceiverConfig
    from tests.conftest import make_settings

    receiver = SampleReceiver(
        make_settings("sample", Kind.RECEIVER, telemetry), SampleReceiverConfig(), head
    )
    await receiver.controller.scrape_once()
    await receiver.controller.scrape_once()
    assert sink.batches == []
    failed = [
        m for m in telemetry.collect().metrics if m.name == "otelgpu_processor_failed_points_total"
    ]
    assert failed[0].points[0].value == 8 and failed[0].points[0].attributes == {
        "processor": "broken"
    }
