"""After a reload, the sources of components that no longer exist leave `/readyz` and
`otelgpu_source_up`; those the new configuration still uses keep their state.

The defect: sources were registered for the life of the process, so a source dropped by a
reload stayed down (or "no answer yet") in /readyz and in the alert forever.
"""

from __future__ import annotations

from otelgpu.component.component import Host, Kind, MetricsConsumer, Settings, Stability
from otelgpu.component.registry import Factory, Registry
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.config.types import StrictModel
from otelgpu.service.service import Service
from tests.components import core_registry


class SourcedConfig(StrictModel):
    source: str


class SourcedReceiver:
    """Declares one outside source at start, as the nvml receiver declares `nvml`."""

    def __init__(self, settings: Settings, config: SourcedConfig, next: MetricsConsumer) -> None:
        self._settings, self._source = settings, config.source

    async def start(self, host: Host) -> None:
        self._settings.telemetry.register_source(self._source)

    async def shutdown(self) -> None:
        pass


sourced = Factory(
    type="sourced",
    kind=Kind.RECEIVER,
    stability=Stability.DEVELOPMENT,
    config_type=SourcedConfig,
    create=SourcedReceiver,
)
REGISTRY = Registry([*core_registry(), sourced])
PIPELINE = """\
receivers:
%s
exporters:
  debug:
service:
  pipelines:
    metrics: {receivers: [%s], exporters: [debug]}
"""


def _service(telemetry: SelfTelemetry, sources: list[str]) -> Service:
    receivers = "\n".join(f"  sourced/{s}: {{source: {s}}}" for s in sources)
    names = ", ".join(f"sourced/{s}" for s in sources)
    config = validate(load([("p.yaml", PIPELINE % (receivers, names))], environ={}), REGISTRY)
    return Service(config, REGISTRY, telemetry)


def _up(telemetry: SelfTelemetry) -> dict[str, float]:
    return {
        str(p.attributes["source"]): p.value
        for m in telemetry.collect().metrics
        if m.name == "otelgpu_source_up"
        for p in m.points
    }


async def test_a_reload_retires_the_sources_of_components_that_are_gone() -> None:
    telemetry = SelfTelemetry()
    old = _service(telemetry, ["kubelet", "nvml"])
    await old.start()
    telemetry.source_ok("nvml")
    telemetry.source_failed("kubelet", "connection refused")
    assert _up(telemetry) == {"kubelet": 0.0, "nvml": 1.0}
    await old.shutdown()
    new = _service(telemetry, ["nvml"])  # the reload dropped kubelet_stats
    await new.start()
    assert new.readiness() == (True, [])  # nvml kept its state; kubelet is gone
    assert _up(telemetry) == {"nvml": 1.0}
    await new.shutdown()
