"""Builds nvml receivers over the simulated backend, driven by a hand-advanced clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.errors import ConfigError
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config import load_config
from otelgpu.pdata.model import Batch, Metric, ResourceMetrics
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.receivers.nvml.processes import PROCESS_METRICS
from otelgpu.receivers.nvml.receiver import NvmlReceiver
from otelgpu.receivers.nvml.simulated import SimulatedNvml
from otelgpu.service.builtins import builtin_registry
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink

MakeReceiver = Callable[..., NvmlReceiver]
# `metrics:` switching the per-process metrics on (they are opt-in).
PROCESS_METRICS_ON = {name: {"enabled": True} for name in sorted(PROCESS_METRICS)}


@pytest.fixture
async def make_receiver(
    telemetry: SelfTelemetry, clock: FakeClock, sink: Sink
) -> AsyncIterator[MakeReceiver]:
    """`make_receiver(**config)` → an unstarted receiver on the simulated backend."""
    made: list[NvmlReceiver] = []

    def make(**config: Any) -> NvmlReceiver:
        config.setdefault("simulated", {"gpus": 1})
        config.setdefault("backend", "simulated")  # auto would pick NVML on a GPU machine
        parsed = NvmlReceiverConfig.model_validate(config)
        receiver = NvmlReceiver(
            make_settings("nvml", Kind.RECEIVER, telemetry), parsed, sink, clock=clock
        )
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        await receiver.shutdown()


def sim(receiver: NvmlReceiver) -> SimulatedNvml:
    """The receiver's simulated NVML (to count calls and inject faults)."""
    assert isinstance(receiver.client, SimulatedNvml)
    return receiver.client


def by_id(batch: Batch) -> dict[str, ResourceMetrics]:
    """Device resources by hw.id (process resources left out)."""
    return {str(rm.resource["hw.id"]): rm for rm in batch if "process.pid" not in rm.resource}


def metrics(rm: ResourceMetrics) -> dict[str, Metric]:
    return {m.name: m for m in rm.metrics}


def value(rm: ResourceMetrics, name: str) -> float:
    (point,) = metrics(rm)[name].points
    return point.value


def by_attribute(rm: ResourceMetrics, name: str, key: str) -> dict[object, float]:
    """The points of one metric keyed by one of their attributes."""
    return {p.attributes[key]: p.value for p in metrics(rm)[name].points}


def has_point(rm: ResourceMetrics, name: str, key: str, wanted: object) -> bool:
    """Whether metric `name` has a point whose attribute `key` is `wanted`."""
    found = metrics(rm).get(name)
    return found is not None and any(p.attributes.get(key) == wanted for p in found.points)


def config_issues(tmp_path: Path, nvml: str) -> tuple[Path, list[str]]:
    """The config errors the real loader reports for an agent file whose nvml receiver block
    is `nvml` (its lines, indented under `nvml:` from line 3), and the file's path."""
    path = tmp_path / "agent.yaml"
    path.write_text(
        "receivers:\n"
        "  nvml:\n"
        f"{nvml}"
        "exporters:\n"
        "  debug: {}\n"
        "service:\n"
        "  pipelines:\n"
        "    metrics: {receivers: [nvml], exporters: [debug]}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config([str(path)], builtin_registry())
    return path, [str(i) for i in info.value.issues]
