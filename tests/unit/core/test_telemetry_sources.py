"""What self-telemetry says of a source before and after it answers, and of points it could not
label: what someone reads at 3 a.m. to see which peer never answered and which GPU is bare."""

from __future__ import annotations

from otelgpu.component.telemetry import SelfTelemetry
from tests.fakes import telemetry_points


def test_a_registered_source_is_served_down_before_it_ever_answers() -> None:
    telemetry = SelfTelemetry()
    telemetry.register_source("pod_resources")
    assert telemetry_points(telemetry, "otelgpu_source_up") == {(("source", "pod_resources"),): 0.0}
    assert telemetry.sources_not_ready() == ["pod_resources: no answer yet"]
    telemetry.source_failed("pod_resources", "connection refused")
    assert telemetry.sources_not_ready() == ["pod_resources: connection refused"]
    telemetry.source_ok("pod_resources")
    assert telemetry.sources_not_ready() == []
    assert telemetry_points(telemetry, "otelgpu_source_up") == {(("source", "pod_resources"),): 1.0}


def test_unmatched_points_name_their_gpu_or_none() -> None:
    telemetry = SelfTelemetry()
    telemetry.unmatched_points("container_env", 3, "no_container", "GPU-1")
    telemetry.unmatched_points("container_env", 2, "no_container", None)
    points = telemetry_points(telemetry, "otelgpu_enrichment_unmatched_points_total")
    assert {dict(k)["hw_id"]: v for k, v in points.items()} == {"GPU-1": 3, "": 2}
