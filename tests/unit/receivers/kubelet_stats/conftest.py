"""Helpers for kubelet_stats tests: a scripted client, resource lookup, telemetry reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch, Metric, ResourceMetrics
from otelgpu.receivers.kubelet_stats.client import KubeletError
from otelgpu.receivers.kubelet_stats.config import KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.receiver import KubeletStatsReceiver
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink
from tests.peers.kubelet_stats_server import sample_summary


class ScriptedClient:
    """A KubeletClient answering what the test sets: a summary, raw bytes, or an error."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] | bytes | KubeletError = sample_summary()
        self.calls = 0
        self.closed = 0

    async def summary(self) -> bytes:
        self.calls += 1
        if isinstance(self.answer, KubeletError):
            raise self.answer
        if isinstance(self.answer, bytes):
            return self.answer
        return json.dumps(self.answer).encode()

    async def close(self) -> None:
        self.closed += 1


def make_receiver(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, **config: Any
) -> tuple[KubeletStatsReceiver, ScriptedClient]:
    client = ScriptedClient()
    parsed = KubeletStatsReceiverConfig.model_validate(config)
    settings = make_settings("kubelet_stats", Kind.RECEIVER, telemetry)
    return KubeletStatsReceiver(settings, parsed, sink, client=client, clock=clock), client


def find(batch: Batch, **resource: str) -> ResourceMetrics:
    """The one resource whose attributes are exactly `resource` (keys with dots as __)."""
    wanted = {k.replace("__", "."): v for k, v in resource.items()}
    found = [rm for rm in batch if dict(rm.resource) == wanted]
    assert len(found) == 1, f"{wanted} not found once in {[dict(r.resource) for r in batch]}"
    return found[0]


def by_name(rm: ResourceMetrics) -> dict[str, Metric]:
    return {m.name: m for m in rm.metrics}


def value(rm: ResourceMetrics, name: str) -> float:
    (point,) = by_name(rm)[name].points
    return point.value


def counter(telemetry: SelfTelemetry, name: str, key: Callable[[dict[str, Any]], str]) -> dict:
    """A self-telemetry counter's values, keyed by `key(point attributes)`."""
    for metric in telemetry.collect().metrics:
        if metric.name == name:
            return {key(dict(p.attributes)): p.value for p in metric.points}
    return {}
