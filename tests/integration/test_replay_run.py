"""`otelgpu run` with `backend: replay`: both shipped boards, on the default metric set and on
`metric_set: all`, served on /metrics with every reading the board has, and nothing for the
metrics the board itself lacks."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.naming import metric_name
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.metrics import BY_NAME, CATALOG
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.replay import board_path, shipped_boards
from tests.conftest import make_settings
from tests.fakes import Sink
from tests.integration.agent_process import AgentProcess, scrape_until
from tests.peers.ports import free_port

pytestmark = pytest.mark.integration

# Metrics the recorded boards have no series for, as on the real ones (the record says why:
# tests/unit/receivers/nvml/test_hardware_profiles.py checks each reason against it).
NOT_ON_THESE_BOARDS = {
    "nvidia.gpu.nvlink.io",  # PCIe boards: the NVLink fields answered NOT_SUPPORTED
    "nvidia.gpu.vgpu.license.status",  # bare metal: no vGPU licensing
    "nvidia.gpu.xid.errors",  # no XID while recording: a series per code from the first one
}
# ... and of the rest of the catalog
NOT_ON_THESE_BOARDS_ALL = NOT_ON_THESE_BOARDS | {
    "nvidia.gpu.memory.retired_pages",  # row remapping, not page retirement: NOT_SUPPORTED
    "nvidia.gpu.memory.retired_pages.pending",
    "nvidia.gpu.nvlink.errors",  # no NVLink
    "nvidia.gpu.nvlink.io.by_direction",
    "nvidia.gpu.nvlink.link.errors",
    "nvidia.gpu.nvlink.state",
    # recorded before the receiver read them: the record has no answer (a warning names the
    # calls once); scripts/nvml_record records them on the next board
    "hw.temperature.limit",
    "nvidia.gpu.temperature.margin",
}
SETS = ("default", "all")


def family(spec_name: str) -> str:
    spec = BY_NAME[spec_name]
    return metric_name(spec.name, spec.unit, spec.kind, spec.monotonic)


def samples(body: str) -> dict[str, list[str]]:
    """Sample lines by family (the agent's own and the info series left out)."""
    found: dict[str, list[str]] = {}
    for line in body.splitlines():
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if match and not re.match(r"otelgpu_|hw_gpu_info", match[1]):
            found.setdefault(match[1], []).append(line)
    return found


def pipeline(tmp_path: Path, ports: dict[tuple[str, str], int]) -> Path:
    receivers: dict[str, object] = {}
    exporters: dict[str, object] = {}
    pipelines: dict[str, object] = {}
    empty_proc = tmp_path / "proc"  # the replayed pid is no process of this node
    empty_proc.mkdir()
    for (board, metric_set), port in ports.items():
        name = f"{board}-{metric_set}"
        receivers[f"nvml/{name}"] = {
            "backend": "replay",
            "collection_interval": "200ms",
            "metric_set": metric_set,
            "processes": True,
            "host_proc": str(empty_proc),
            "replay": {"board": board},
        }
        exporters[f"prometheus/{name}"] = {"endpoint": f"127.0.0.1:{port}"}
        pipelines[f"metrics/{name}"] = {
            "receivers": [f"nvml/{name}"],
            "exporters": [f"prometheus/{name}"],
        }
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {"receivers": receivers, "exporters": exporters, "service": {"pipelines": pipelines}}
        )
    )
    return config


def test_both_boards_serve_every_reading_of_both_metric_sets(
    tmp_path: Path, agents: list[AgentProcess]
) -> None:
    boards = shipped_boards()
    assert boards == ("nvidia-h100", "nvidia-h200")
    ports = {(board, metric_set): free_port() for board in boards for metric_set in SETS}
    agent = AgentProcess("run", "-c", str(pipeline(tmp_path, ports)))
    agents.append(agent)
    for board in boards:
        agent.wait_for(rf"REPLAYED GPUs: 1 GPUs of .* answered from the record .*{board}\.json")

    for (board, metric_set), port in ports.items():
        # GPM's figures come from the first collection on (two samples 0.2 s apart)
        body = scrape_until(port, family("nvidia.gpu.tensor.active"))
        served = samples(body)
        config = NvmlReceiverConfig.model_validate({"metric_set": metric_set})
        absent = NOT_ON_THESE_BOARDS if metric_set == "default" else NOT_ON_THESE_BOARDS_ALL
        expected = {family(name) for name in config.enabled_metrics() - absent}
        assert set(served) == expected, (board, metric_set, body)
        if metric_set == "default":
            assert len(config.enabled_metrics()) == 22
        assert 'otelgpu_simulated="true"' in body  # on the info series: not this node's GPU
        # every reading: as many series per metric as the receiver reads from the same record
        assert {f: len(lines) for f, lines in served.items()} == readings(
            board, metric_set, tmp_path / "proc"
        )
        engines = label_values(served[family("hw.gpu.utilization")], "hw_gpu_task")
        assert engines == {"general", "encoder", "decoder"}
        sensors = label_values(served[family("hw.temperature")], "hw_sensor_location")
        assert sensors == {"gpu", "memory"}
        # the figures are the board's own: its power under load, in W
        (power_line,) = served[family("hw.power")]
        power_mw = round(float(power_line.rsplit(" ", 1)[1]) * 1000)
        assert power_mw in recorded_power_mw(board)
        (tensor_line,) = served[family("nvidia.gpu.tensor.active")]
        assert float(tensor_line.rsplit(" ", 1)[1]) > 0.5  # the load phase, a matrix product

    assert agent.stop(signal.SIGTERM) == 0
    # only the calls the records predate, and only where their metrics are on (metric_set: all)
    unanswered = [line for line in agent.output.splitlines() if "the record has no answer" in line]
    assert {re.findall(r'no answer to \["(\w+)"', line)[0] for line in unanswered} == {
        "margin_temperature",
        "temperature_threshold",
    }
    assert all("-all: replay of" in line for line in unanswered), unanswered


def label_values(lines: list[str], label: str) -> set[str]:
    return {value for line in lines for value in re.findall(rf'{label}="([^"]*)"', line)}


def readings(board: str, metric_set: str, host_proc: Path) -> dict[str, int]:
    """Points per family of the receiver itself on the same record and config, in this
    process (three cycles: the figures settled as the agent's have)."""
    config = NvmlReceiverConfig.model_validate(
        {
            "backend": "replay",
            "metric_set": metric_set,
            "processes": True,
            "host_proc": str(host_proc),
            "replay": {"board": board},
        }
    )

    async def scrape() -> dict[str, int]:
        settings = make_settings("nvml", Kind.RECEIVER, SelfTelemetry())
        recv = NvmlReceiver(settings, config, Sink())
        try:
            for _ in range(3):
                batch = await recv.scrape()
        finally:
            await recv.shutdown()
        counted: dict[str, int] = {}
        for rm in batch:
            for metric in rm.metrics:
                name = family(metric.name)
                counted[name] = counted.get(name, 0) + len(metric.points)
        return {name: n for name, n in counted.items() if n}

    return asyncio.run(scrape())


def recorded_power_mw(board: str) -> set[int]:
    record = json.loads(board_path(board).read_text())
    return {
        f["fields"]["value"]
        for e in record["phases"]["load"]
        if e["call"] == "field_values" and "value" in e
        for f in e["value"]
        if f["fields"]["field_id"] == 186  # NVML_FI_DEV_POWER_INSTANT
    }


def test_every_catalog_metric_is_accounted_for() -> None:
    """The lists above name metrics of the catalog (a rename must not make them vacuous)."""
    assert {spec.name for spec in CATALOG} >= NOT_ON_THESE_BOARDS_ALL
    assert {s.name for s in CATALOG if s.enabled} >= NOT_ON_THESE_BOARDS
