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
from tests.peers.kubelet_stats_server import sample_summary
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
    gaps = counter(
        telemetry, "otelgpu_kubelet_gaps_total", lambda a: f"{a['entity']}/{a['reason']}"
    )
    # once per scrape: the sample's nameless pod, and its pending pod and container
    assert gaps == {"pod/empty_name": 2, "pod/no_stats_yet": 2, "container/no_stats_yet": 2}
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
    await _converted(sink, 3)
    await receiver.shutdown()
    assert telemetry.sources["kubelet"].up
    downs = [r for r in caplog.records if "source kubelet is down" in r.getMessage()]
    ups = [r for r in caplog.records if "source kubelet is up again" in r.getMessage()]
    assert (len(downs), len(ups)) == (1, 1)
    assert _errors(telemetry) == {"connect": 5}
    # the first scrape, the gone markers of the third failed read in a row, the last scrape
    assert len(sink.batches) == 3
    assert all(not rm.metrics for rm in sink.batches[1])


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


async def test_gaps_are_counted_by_reason_every_read_and_logged_once_each(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    receiver, client = make_receiver(telemetry, sink, clock)
    summary = sample_summary()
    summary["node"]["nodeName"] = ""
    summary["pods"][0]["containers"].append({"name": "", "cpu": {"usageNanoCores": 1}})
    client.answer = summary
    for _ in range(3):
        await receiver.scrape()
    gaps = counter(
        telemetry, "otelgpu_kubelet_gaps_total", lambda a: f"{a['entity']}/{a['reason']}"
    )
    assert gaps == {
        "node/no_node_name": 3,
        "pod/empty_name": 3,
        "pod/no_stats_yet": 3,
        "container/no_stats_yet": 3,
        "container/empty_name": 3,
    }
    logged = [r.getMessage() for r in caplog.records if "kubelet summary gap" in r.getMessage()]
    assert len(logged) == 4 + 1  # one per entity and reason, the first read only
    assert any("no_stats_yet (pod), first seen: ml/pending-1" in m for m in logged)
    assert any(
        "empty_name (container), first seen: a container of pod ml/trainer-0" in m for m in logged
    )


async def test_a_change_of_failure_cause_is_logged_again(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    receiver, client = make_receiver(telemetry, sink, clock, stale_after_failed_reads=100)
    client.answer = KubeletError("connect", "cannot reach https://n1:10250/stats/summary")
    await receiver.scrape()
    await receiver.scrape()
    client.answer = KubeletError("tls", "TLS with https://n1:10250/stats/summary failed: expired")
    await receiver.scrape()
    await receiver.scrape()
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(messages) == 2, messages
    assert "source kubelet is down: cannot reach" in messages[0]
    assert "another cause (tls, was connect): TLS with" in messages[1]
    assert "failed: expired" in telemetry.sources["kubelet"].last_error
