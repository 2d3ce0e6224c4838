"""Each successful read is the node's whole set of series: what left is gone at once, from the
Prometheus exporter's store and closed over OTLP; a pod is its uid; an outage never serves
frozen values beyond `stale_after_failed_reads`."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.otlp.ended import EndedSeries
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata.model import Batch
from otelgpu.receivers.kubelet_stats.client import KubeletError
from tests.fakes import FakeClock, Sink
from tests.peers.kubelet_stats_server import NOW, sample_summary
from tests.unit.receivers.kubelet_stats.conftest import make_receiver

OLD_UID = "6f1e2d3c-0000-4a5b-8c7d-1"
GROUPS = ["node", "pod", "container", "volume"]


def recreated(summary: dict[str, Any], uid: str = "0b0b0b0b-new") -> dict[str, Any]:
    """The same summary after trainer-0 was deleted and recreated under its name (a
    StatefulSet): a new uid."""
    out = copy.deepcopy(summary)
    out["pods"][0]["podRef"]["uid"] = uid
    return out


class Exporters:
    """What the Prometheus exporter would serve and what OTLP would close, batch by batch."""

    def __init__(self) -> None:
        self.store, self.translator = SeriesStore(), Translator("otel", {})
        self.ended = EndedSeries()
        self.closed: Batch = ()
        self.now = 0.0

    def take(self, batch: Batch) -> None:
        self.now += 10.0
        self.translator.ingest(self.store, batch, now=self.now)
        self.closed = self.ended.closing(batch)

    def lines(self, text: str) -> list[str]:
        return [p for f in self.store.families.values() for p in f.series if text in p]


async def test_a_recreated_pod_replaces_its_series_at_once(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock
) -> None:
    receiver, client = make_receiver(telemetry, sink, clock, metric_groups=GROUPS)
    out = Exporters()
    out.take(await receiver.scrape())
    before = out.store.series_count()
    client.answer = recreated(sample_summary())
    out.take(await receiver.scrape())
    assert out.lines(OLD_UID) == []  # not beside the new pod until metric_expiration
    assert out.lines("0b0b0b0b-new") and out.store.series_count() == before
    # Over OTLP each series of the old pod (pod, its containers, its volumes) gets its one
    # closing point, none of the new pod's.
    closed = {str(rm.resource["k8s.pod.uid"]) for rm in out.closed}
    assert closed == {OLD_UID}
    assert {rm.resource.get("k8s.container.name") for rm in out.closed} >= {"trainer", None}
    assert all(p.value != p.value for rm in out.closed for m in rm.metrics for p in m.points)


async def test_a_deleted_pod_and_a_gone_container_leave_at_once(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock
) -> None:
    receiver, client = make_receiver(telemetry, sink, clock, metric_groups=GROUPS)
    out = Exporters()
    out.take(await receiver.scrape())
    assert out.lines('k8s_container_name="log-shipper"')
    summary = sample_summary()
    summary["pods"][0]["containers"].pop()  # the sidecar ended
    client.answer = summary
    out.take(await receiver.scrape())
    assert out.lines('k8s_container_name="log-shipper"') == []
    assert out.lines('k8s_container_name="trainer"')
    summary["pods"].pop(0)  # the pod was deleted
    client.answer = summary
    out.take(await receiver.scrape())
    assert out.lines('k8s_pod_name="trainer-0"') == []
    assert out.lines("k8s_node_cpu_usage")  # the node stays


async def test_a_steady_node_sends_no_gone_markers(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock
) -> None:
    receiver, _ = make_receiver(telemetry, sink, clock, metric_groups=GROUPS)
    first, second = await receiver.scrape(), await receiver.scrape()
    assert all(rm.metrics for rm in (*first, *second))
    assert [rm.identity for rm in first] == [rm.identity for rm in second]


async def test_an_outage_drops_every_series_after_the_bound_never_before(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    receiver, client = make_receiver(
        telemetry, sink, clock, metric_groups=GROUPS, stale_after_failed_reads=3
    )
    out = Exporters()
    out.take(await receiver.scrape())
    served = out.store.series_count()
    client.answer = KubeletError("connect", "cannot reach the kubelet")
    for _ in range(2):  # a kubelet restart's refused connection or two: values kept
        assert await receiver.scrape() == ()
    assert out.store.series_count() == served
    stale = await receiver.scrape()  # the third failed read in a row
    assert stale and all(not rm.metrics for rm in stale)
    out.take(stale)
    assert out.store.series_count() == 0
    assert len(out.closed) > 0  # and closed over OTLP
    assert "3 failed reads of the kubelet in a row" in caplog.text
    assert await receiver.scrape() == ()  # said once
    client.answer = sample_summary()
    back = await receiver.scrape()
    assert back and all(rm.metrics for rm in back)
    out.take(back)
    assert out.store.series_count() == served


async def test_a_failure_between_successes_restarts_the_count(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock
) -> None:
    receiver, client = make_receiver(telemetry, sink, clock, stale_after_failed_reads=2)
    await receiver.scrape()
    for _ in range(3):
        client.answer = KubeletError("timeout", "did not answer in time")
        assert await receiver.scrape() == ()
        client.answer = sample_summary()
        assert all(rm.metrics for rm in await receiver.scrape())


def test_the_bound_is_validated() -> None:
    from pydantic import ValidationError

    from otelgpu.receivers.kubelet_stats.config import KubeletStatsReceiverConfig

    assert KubeletStatsReceiverConfig().stale_after_failed_reads == 3
    with pytest.raises(ValidationError, match="stale_after_failed_reads"):
        KubeletStatsReceiverConfig.model_validate({"stale_after_failed_reads": 0})


async def test_a_name_listed_twice_reports_the_pod_that_started_last(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    summary = sample_summary()
    newer = recreated(summary)["pods"][0]
    newer["startTime"] = NOW  # the old pod's cgroup still listed beside the new one
    summary["pods"].insert(0, newer)
    receiver, client = make_receiver(telemetry, sink, clock, metric_groups=GROUPS)
    client.answer = summary
    batch = await receiver.scrape()
    uids = {rm.resource.get("k8s.pod.uid") for rm in batch} - {None}
    assert uids == {"0b0b0b0b-new"}
    assert f"ml/trainer-0 uid {OLD_UID}" in caplog.text


class HangingClient:
    """A kubelet that accepts the request and, while `hang`, never answers (the scrape
    controller's own bound cancels the read); then it times out."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.hang = True

    async def summary(self) -> bytes:
        self.asked.set()
        if self.hang:
            await asyncio.Event().wait()
        raise KubeletError("timeout", "did not answer in time")

    async def close(self) -> None:
        pass


async def test_reads_cancelled_by_the_controller_count_toward_the_bound(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock
) -> None:
    receiver, client = make_receiver(
        telemetry, sink, clock, metric_groups=GROUPS, stale_after_failed_reads=2
    )
    served = await receiver.scrape()
    hanging = HangingClient()
    receiver.client = hanging
    for _ in range(2):
        hanging.asked.clear()
        task = asyncio.create_task(receiver.scrape())
        await hanging.asked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    hanging.asked.clear()
    hanging.hang = False
    stale = await receiver.scrape()  # says so instead of a third read
    assert not hanging.asked.is_set()
    assert {rm.identity for rm in stale} == {rm.identity for rm in served}
    assert all(not rm.metrics for rm in stale)
    receiver.client = client
    assert all(rm.metrics for rm in await receiver.scrape())
