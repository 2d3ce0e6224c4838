"""The example Collector gateway config: every pipeline names defined components, and it
listens where the DaemonSet pipeline pushes by default."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.deploy.sync import PIPELINE
from tests.deploy.tools import ROOT

GATEWAY = ROOT / "deploy" / "gateway" / "otelcol-gateway.yaml"


def config() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(GATEWAY.read_text())
    return data


def test_pipelines_reference_defined_components() -> None:
    cfg = config()
    assert cfg["service"]["pipelines"]
    for pipeline in cfg["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for name in pipeline.get(kind, []):
                assert name in cfg[kind], f"{kind}: {name}"
    for name in cfg["service"].get("extensions", []):
        assert name in cfg["extensions"]


def test_listens_on_the_agents_default_otlp_port() -> None:
    default = re.search(r"OTLP_ENDPOINT:-([^}]+)\}", PIPELINE.read_text())
    assert default is not None
    port = default.group(1).rsplit(":", 1)[1]
    grpc = config()["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert grpc.endswith(":" + port)
    assert "otel-gateway.monitoring" in default.group(1)


def test_memory_limiter_runs_first_and_resource_labels_reach_prometheus() -> None:
    cfg = config()
    for pipeline in cfg["service"]["pipelines"].values():
        assert pipeline["processors"][0] == "memory_limiter"
    remote_write = cfg["exporters"]["prometheusremotewrite"]
    assert remote_write["resource_to_telemetry_conversion"]["enabled"] is True
