"""The receiver around a scripted client: the loop, failures, recovery and self-telemetry."""

from __future__ import annotations

import asyncio
import logging

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.kubelet_stats.client import KubeletError
from otelgpu.receivers.kubelet_stats.config import KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.receiver import KubeletStatsReceiver, make_client
from tests.conftest import make_settings
from tests.fakes import FakeClock, FakeHost, Sink
from tests.unit.receivers.kubelet_stats.conftest import counter, make_receiver

ERRORS = "otelgpu_kubelet_errors_total"


def _errors(telemetry: SelfTelemetry) -> dict[str, float]:
    return counter(telemetry, ERRORS, lambda a: str(a["reason"]))


async def _converted(sink: Sink, batches: int) -> None:
    """Waits (bounded) for the summary's conversion, which runs in a worker thread."""
    for _ in range(500):
        if len(sink.batches) >= batches:
            return
        await asyncio.sleep(0.01)


async def test_scrapes_every_interval_and_reports_the_source_up(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock
) -> None:
    receiver, client = make_receiver(telemetry, sink, clock, collection_interval="10s")
    await receiver.start(FakeHost(telemetry))
    await clock.advance(0)
    await _converted(sink, 1)
    await clock.advance(10)
    await _converted(sink, 2)
    await receiver.shutdown()
    assert client.calls == 2 and len(sink.batches) == 2
    assert "k8s.pod.cpu.usage" in sink.metric_names()
    assert telemetry.sources["kubelet"].up
    points = counter(telemetry, "otelgpu_receiver_points_total", lambda a: str(a["receiver"]))
    assert points["kubelet_stats"] == sum(
        len(m.points) for batch in sink.batches for rm in batch for m in rm.metrics
    )
    skipped = counter(telemetry, "otelgpu_kubelet_skipped_entries_total", lambda a: "n")
    assert skipped == {"n": 2}  # the sample's nameless pod, once per scrape
    assert client.closed == 1


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (KubeletError("connect", "cannot reach https://n1:10250/stats/summary"), "connect"),
        (KubeletError("unauthorized", "answered HTTP 401"), "unauthorized"),
        (b"<html>not json</html>", "bad_json"),
        (b"\xff\xfe", "bad_json"),
        (b"[1, 2]", "bad_json"),
    ],
)
async def test_failures_are_counted_and_reported_never_raised(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, answer: object, reason: str
) -> None:
    receiver, client = make_receiver(telemetry, sink, clock)
    client.answer = answer  # type: ignore[assignment]
    assert await receiver.scrape() == ()
    assert await receiver.scrape() == ()
    assert _errors(telemetry) == {reason: 2}
    state = telemetry.sources["kubelet"]
    assert not state.up and state.last_error


async def test_down_and_up_again_is_logged_once_each(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    receiver, client = make_receiver(telemetry, sink, clock, collection_interval="10s")
    await receiver.start(FakeHost(telemetry))
    await clock.advance(0)
    await _converted(sink, 1)
    client.answer = KubeletError("connect", "cannot reach the kubelet")
    for _ in range(5):
        await clock.advance(10)
    assert not telemetry.sources["kubelet"].up
    client.answer = b'{"node": {"nodeName": "n1", "cpu": {"usageNanoCores": 5}}}'
    await clock.advance(10)
    await _converted(sink, 2)
    await receiver.shutdown()
    assert telemetry.sources["kubelet"].up
    downs = [r for r in caplog.records if "source kubelet is down" in r.getMessage()]
    ups = [r for r in caplog.records if "source kubelet is up again" in r.getMessage()]
    assert (len(downs), len(ups)) == (1, 1)
    assert _errors(telemetry) == {"connect": 5}
    assert len(sink.batches) == 2  # the first and the last scrape


async def test_start_without_node_name_or_endpoint_refuses(
    telemetry: SelfTelemetry, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("K8S_NODE_NAME", raising=False)
    receiver = KubeletStatsReceiver(
        make_settings("kubelet_stats", Kind.RECEIVER, telemetry), KubeletStatsReceiverConfig(), sink
    )
    with pytest.raises(ValueError, match="K8S_NODE_NAME is not set"):
        await receiver.start(FakeHost(telemetry))
    await receiver.shutdown()


def test_make_client_reads_node_name_and_auth() -> None:
    client = make_client(KubeletStatsReceiverConfig(), {"K8S_NODE_NAME": "gpu-7"})
    assert client.url == "https://gpu-7:10250/stats/summary"  # type: ignore[attr-defined]
    plain = make_client(KubeletStatsReceiverConfig(read_only_port=True), {"K8S_NODE_NAME": "gpu-7"})
    assert plain.url == "http://gpu-7:10255/stats/summary"  # type: ignore[attr-defined]
    assert plain._token is None  # type: ignore[attr-defined]
