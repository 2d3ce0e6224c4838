"""`naming: dcgm` gets its metric names from the receivers of the config: the nvml receiver's
factory carries its naming table, the service graph hands the tables of the receivers a config
uses to the components it builds, and the exporter imports no receiver."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.registry import Factory
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.pdata.naming import DcgmField, DcgmNames, NamingTable
from otelgpu.service.builtins import builtin_registry
from otelgpu.service.graph import build
from tests.unit.exporters.prometheus.batches import batch, gpu

PIPELINE = """
receivers:
  nvml: {backend: simulated, simulated: {gpus: 1}}
exporters:
  prometheus: {endpoint: "127.0.0.1:0", naming: dcgm}
service:
  pipelines:
    metrics/gpu: {receivers: [nvml], exporters: [prometheus]}
"""
EXPORTER = Path(__file__).resolve().parents[4] / "otelgpu" / "exporters" / "prometheus"


def test_the_graph_hands_the_receivers_names_to_the_exporter() -> None:
    config = validate(load([("p.yaml", PIPELINE)]), builtin_registry())
    graph = build(config, builtin_registry(), SelfTelemetry())
    exporter = graph.exporters[ComponentID("prometheus")]
    assert isinstance(exporter, PrometheusExporter)

    async def served() -> bytes:
        await exporter.consume(batch(gpu(0)))
        await exporter.refresh()
        return exporter.body.plain

    body = asyncio.run(served())
    assert b"\nDCGM_FI_DEV_POWER_USAGE{" in body and b"hw_power_watts" not in body


def test_tables_merge_and_the_first_names_win() -> None:
    power = DcgmNames("W", DcgmField("DCGM_FI_DEV_POWER_USAGE"))
    other = DcgmNames("W", DcgmField("OTHER"))
    merged = NamingTable.merge(
        [NamingTable({"hw.power": power}), None, NamingTable({"hw.power": other}, {"x": "y"})]
    )
    assert merged.dcgm == {"hw.power": power} and merged.dcgm_labels == {"x": "y"}


def test_only_the_nvml_receiver_names_dcgm_fields() -> None:
    registry = builtin_registry()
    tables = {f.type: f.naming for f in registry if f.kind is Kind.RECEIVER}
    assert isinstance(registry.get(Kind.RECEIVER, "nvml"), Factory)
    assert tables["nvml"] is not None and "hw.power" in tables["nvml"].dcgm
    assert tables["kubelet_stats"] is None


def test_the_exporter_imports_no_receiver() -> None:
    for path in EXPORTER.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("otelgpu.receivers"), (path.name, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("otelgpu.receivers"), (path.name, alias.name)
