"""The pods the kubelet's pod-resources API lists that the summary misses: counted by reason
against the listing k8s_attributes posts (`PodListings`), only for pods listed before a read
began and until after it ended, and never without a listing."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.pod_listing import PodListings, PodName
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.kubelet_stats.client import KubeletError
from otelgpu.receivers.kubelet_stats.config import KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.missed_pods import MISSED_PODS, PENDING_MAX
from otelgpu.receivers.kubelet_stats.receiver import KubeletStatsReceiver
from tests.conftest import make_settings
from tests.fakes import FakeClock, Sink
from tests.unit.receivers.kubelet_stats.conftest import ScriptedClient, counter

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
TRAINER = ("ml", "trainer-0")  # in the sample summary, with stats
PENDING = ("ml", "pending-1")  # in the sample summary, without any stats yet
GHOST = ("ml", "ghost-gpu")  # not in the sample summary


class DuringRead(ScriptedClient):
    """A scripted client that runs `during` while the summary is being read."""

    def __init__(self) -> None:
        super().__init__()
        self.during: Callable[[], None] | None = None

    async def summary(self) -> bytes:
        if self.during is not None:
            self.during()
        return await super().summary()


def receiver(
    telemetry: SelfTelemetry, listings: PodListings | None, **config: Any
) -> tuple[KubeletStatsReceiver, DuringRead]:
    settings = make_settings("kubelet_stats", Kind.RECEIVER, telemetry)
    settings = replace(settings, pod_listings=listings)
    client = DuringRead()
    parsed = KubeletStatsReceiverConfig.model_validate(config)
    return KubeletStatsReceiver(settings, parsed, Sink(), client=client, clock=FakeClock()), client


def answer(listings: PodListings, pods: Iterable[PodName], source: str = SOCKET) -> None:
    """k8s_attributes asking pod-resources once, and the answer listing `pods`."""
    listings.answered(source, listings.asking(source), pods)


def missed(telemetry: SelfTelemetry) -> dict[str, float]:
    return counter(telemetry, MISSED_PODS, lambda a: a["reason"])


async def test_a_listed_pod_missing_from_the_summary_is_counted_once_listed_after_the_read(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    listings = PodListings()
    recv, _ = receiver(telemetry, listings)
    answer(listings, [TRAINER, PENDING, GHOST])
    await recv.scrape()
    assert missed(telemetry) == {}, "judged before pod-resources answered after the read"
    answer(listings, [TRAINER, PENDING, GHOST])
    with caplog.at_level(logging.INFO):
        await recv.scrape()  # judges the first read
        answer(listings, [TRAINER, PENDING, GHOST])
        await recv.scrape()  # the second
    assert missed(telemetry) == {"not_in_summary": 2, "no_stats_yet": 2}
    said = [r.getMessage() for r in caplog.records if "pod-resources API lists" in r.message]
    assert len(said) == 2, said  # once per pod, however many reads miss it
    assert any("ml/ghost-gpu" in m and "(not_in_summary)" in m for m in said)
    assert any("ml/pending-1" in m and "(no_stats_yet)" in m for m in said)


async def test_a_pod_created_or_deleted_during_the_read_is_not_counted(
    telemetry: SelfTelemetry,
) -> None:
    listings = PodListings()
    recv, client = receiver(telemetry, listings)
    answer(listings, [TRAINER, ("ml", "deleted-now")])
    # While the summary is read, pod-resources answers with the pod gone and a new one there.
    client.during = lambda: answer(listings, [TRAINER, ("ml", "created-now")])
    await recv.scrape()
    client.during = None
    answer(listings, [TRAINER, ("ml", "created-now")])
    await recv.scrape()
    assert missed(telemetry) == {}


async def test_a_pod_listed_before_the_read_but_not_after_it_is_not_counted(
    telemetry: SelfTelemetry,
) -> None:
    listings = PodListings()
    recv, _ = receiver(telemetry, listings)
    answer(listings, [TRAINER, GHOST])
    await recv.scrape()
    answer(listings, [TRAINER])  # deleted after the summary was read
    await recv.scrape()
    assert missed(telemetry) == {}


@pytest.mark.parametrize("why", ["no listing shared", "source down", "two sources"])
async def test_without_a_listing_nothing_is_counted(telemetry: SelfTelemetry, why: str) -> None:
    listings = None if why == "no listing shared" else PodListings()
    recv, _ = receiver(telemetry, listings)
    for _ in range(3):
        if listings is not None:
            answer(listings, [GHOST])
            if why == "source down":
                listings.failed(SOCKET)
            if why == "two sources":
                answer(listings, [GHOST], source="/other/kubelet.sock")
        await recv.scrape()
    assert missed(telemetry) == {}


async def test_a_read_the_source_failed_after_is_not_judged_by_later_answers(
    telemetry: SelfTelemetry,
) -> None:
    listings = PodListings()
    recv, _ = receiver(telemetry, listings)
    answer(listings, [GHOST])
    await recv.scrape()
    listings.failed(SOCKET)  # whether ghost was listed throughout that read is unknown
    answer(listings, [GHOST])
    await recv.scrape()  # judges the first read: nothing listed since before it
    assert missed(telemetry) == {}
    answer(listings, [GHOST])
    await recv.scrape()  # the second read began after an answer of the new run
    assert missed(telemetry) == {"not_in_summary": 1}


async def test_a_pod_missed_before_and_after_an_outage_of_the_source_is_logged_once(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """A read that spans a pod-resources failure is dropped, not judged against an empty
    listing (which would forget the pods already logged, and log them all again)."""
    listings = PodListings()
    recv, _ = receiver(telemetry, listings)
    with caplog.at_level(logging.INFO):
        answer(listings, [GHOST])
        await recv.scrape()
        answer(listings, [GHOST])
        await recv.scrape()  # judges the first read: ghost missed, logged
        listings.failed(SOCKET)
        answer(listings, [GHOST])
        await recv.scrape()  # the second read spans the failure: dropped
        answer(listings, [GHOST])
        await recv.scrape()  # the third began after the new run's first answer: judged
    said = [r.getMessage() for r in caplog.records if "ml/ghost-gpu" in r.getMessage()]
    assert len(said) == 1, said
    assert missed(telemetry) == {"not_in_summary": 2}


def test_a_read_spanning_a_failure_of_the_source_is_never_judged() -> None:
    listings = PodListings()
    answer(listings, [GHOST])
    mark = listings.began()
    assert mark is not None
    mark = listings.ended(mark)
    listings.failed(SOCKET)
    answer(listings, [GHOST])
    answer(listings, [GHOST])
    assert listings.listed_throughout(mark) is None
    assert listings.lost(mark)


async def test_many_pods_missed_at_once_take_one_line_per_reason(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """A node-wide cAdvisor failure misses every pod: one line per read and reason names a
    few of them and the count, not one line per pod."""
    listings = PodListings()
    recv, _ = receiver(telemetry, listings)
    ghosts = [("ml", f"ghost-{n}") for n in range(50)]
    answer(listings, ghosts)
    await recv.scrape()
    with caplog.at_level(logging.INFO):
        answer(listings, ghosts)
        await recv.scrape()
    said = [r.getMessage() for r in caplog.records if "pod-resources API lists" in r.message]
    assert len(said) == 1, said
    assert "50 pods" in said[0] and "ml/ghost-0" in said[0]
    assert missed(telemetry) == {"not_in_summary": 50}


async def test_a_failed_summary_read_is_not_judged(telemetry: SelfTelemetry) -> None:
    listings = PodListings()
    recv, client = receiver(telemetry, listings)
    client.answer = KubeletError("connect", "refused")
    answer(listings, [GHOST])
    await recv.scrape()
    answer(listings, [GHOST])
    await recv.scrape()
    assert missed(telemetry) == {}


async def test_no_stats_yet_is_not_judged_when_no_pod_group_is_read(
    telemetry: SelfTelemetry,
) -> None:
    """With `metric_groups: [node]` no pod gives series: only pods absent from the summary
    are missed."""
    listings = PodListings()
    recv, _ = receiver(telemetry, listings, metric_groups=["node"])
    answer(listings, [TRAINER, PENDING, GHOST])
    await recv.scrape()
    answer(listings, [TRAINER, PENDING, GHOST])
    await recv.scrape()
    assert missed(telemetry) == {"not_in_summary": 1}


async def test_reads_left_unjudged_are_dropped_not_kept(telemetry: SelfTelemetry) -> None:
    """Reads wait for an answer after them, a few at most: a pod-resources source that stops
    answering costs no memory, and the reads it never judged are not counted."""
    listings = PodListings()
    recv, _ = receiver(telemetry, listings)
    answer(listings, [GHOST])
    for _ in range(20):
        await recv.scrape()
    answer(listings, [GHOST])
    await recv.scrape()
    assert missed(telemetry) == {"not_in_summary": PENDING_MAX}
