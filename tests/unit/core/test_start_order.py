"""The service starts a pipeline from its end: exporters, then its processors from the last to
the first, then receivers. A processor is running before anything that feeds it; and
container_env's first runtime listing is taken before k8s_attributes asks the kubelet, so a
container already running is confirmed by that first answer (`notes.HOLDERS_CONFIRMED`) and
the first batches carry its labels, instead of waiting a refresh interval as
`holder_unconfirmed`."""

from __future__ import annotations

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.service.builtins import builtin_registry
from otelgpu.service.graph import build

PIPELINE = """
receivers:
  nvml: {backend: simulated, simulated: {gpus: 1}}
processors:
  k8s_attributes: {}
  container_env: {}
  filter: {}
exporters:
  debug: {}
service:
  pipelines:
    metrics/gpu:
      receivers: [nvml]
      processors: [k8s_attributes, container_env, filter]
      exporters: [debug]
"""


def test_a_pipeline_starts_from_its_end() -> None:
    config = validate(load([("p.yaml", PIPELINE)]), builtin_registry())
    graph = build(config, builtin_registry(), SelfTelemetry())
    order = [(kind, label.split(" in ")[0]) for label, kind, _ in graph.start_order()]
    assert order == [
        ("exporter", "debug"),
        ("processor", "filter"),
        ("processor", "container_env"),
        ("processor", "k8s_attributes"),
        ("receiver", "nvml"),
    ]
