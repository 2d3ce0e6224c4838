"""The OTLP exporter core shared by both transports: sending queue, retries (the shared
`exporterhelper` sender), lifecycle.

Every point handed to `consume` ends up counted exactly once, as sent or as failed:
refused by a full queue, given up after retries, rejected by the server (partial success),
or still queued or in flight when shutdown's drain deadline passed.

A batch is encoded when it is consumed. Handed to an idle consumer, its request is sent as it
is; queued, it waits gzip-compressed (level 1: about a millisecond a megabyte with ISA-L; 7 to
25 times smaller than the protobuf on bench/p2_cycle_cpu.py's nodes, 15 to 30 times smaller
than the batch's model objects) and is inflated when a consumer takes it. What the queue
holds in memory is the size `sizer: bytes` bounds.

Every resource sent carries the agent's `service.name`, `service.instance.id` and
`service.version` (`resource.py`) unless it has its own; a resource without metrics (an
exporter's "this identity is now empty" marker) is not sent, but it closes what that identity
sent before: each series an identity stops sending gets one point flagged "no recorded value"
(`ended/`), so a backend fed by OTLP ends it at once instead of serving its last value.
Those closing points are owed until a request carrying them is accepted: a request refused by
the queue, given up, or left unsent at shutdown leaves them to the next request. On a reload
(Settings.listeners set) the memory of what was sent, and what is owed, is parked for the
new service's exporter of the same name and endpoint, which takes it over in `start`.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from otelgpu.component.component import Host, Settings
from otelgpu.component.errors import ExportError
from otelgpu.component.log_limits import capped
from otelgpu.confighttp.compression import gunzip_bytes, gzip_bytes
from otelgpu.exporterhelper.queue import BatchQueue, Item, by_bytes, by_points, by_request
from otelgpu.exporterhelper.sender import GIVEN_UP, RetrySender
from otelgpu.exporters.otlp.config import OtlpCommonConfig
from otelgpu.exporters.otlp.encode import AttributeCache, encode_bytes, encode_closing_bytes
from otelgpu.exporters.otlp.ended import EndedSeries, Receipt
from otelgpu.exporters.otlp.ended.trail import Trail
from otelgpu.exporters.otlp.holder_labels import HolderLabels
from otelgpu.exporters.otlp.resource import service_attributes
from otelgpu.pdata.model import Batch, point_count

QUEUE_SIZE_GAUGE = "otelgpu_exporter_queue_size"


@dataclass(frozen=True, slots=True)
class ExportResponse:
    """What an accepted request came back with: points the server rejected, and why."""

    rejected: int = 0
    message: str = ""


class Transport(Protocol):
    """One OTLP endpoint (gRPC or HTTP).

    `open` connects lazily (it may read TLS files, and raises if they are unusable);
    `export` sends one request, given as the uncompressed protobuf bytes of an
    `ExportMetricsServiceRequest`, within `timeout` seconds and raises `ExportError` saying
    whether a retry may succeed (and after how long, if the server said); `close` releases
    the connection, is idempotent and safe without `open`.
    """

    async def open(self) -> None:
        """Prepares the connection; no request is sent."""

    async def export(self, request: bytes, timeout: float) -> ExportResponse:
        """Sends the serialized request `request`; raises ExportError on failure."""

    async def close(self) -> None:
        """Releases the connection."""


class OtlpExporter:
    """Queues batches and sends them through a `Transport` with `num_consumers` workers."""

    def __init__(
        self,
        settings: Settings,
        config: OtlpCommonConfig,
        transport: Transport,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        environ: Mapping[str, str] | None = None,
        rand: Callable[[], float] = random.random,
        wall: Callable[[], int] = time.time_ns,
    ) -> None:
        self._id = str(settings.id)
        self._log = settings.logger
        self._telemetry = settings.telemetry
        self._config = config
        self._transport = transport
        self._environ = environ  # None: the process's (read in `start`)
        queue = config.sending_queue
        self._queue = BatchQueue(
            queue.queue_size if queue.enabled else 0, weigh=_SIZERS[queue.sizer], pack=_packed
        )
        # Retries; shutdown's drain cuts their waits short (`sender.py`)
        self._sender = RetrySender(
            config.retry_on_failure, sleep=sleep, monotonic=monotonic, rand=rand
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = False
        self._last_error = ""  # logged failures: once per change, never per batch
        self._dropping = False
        self._overflowing = False
        self._last_partial = ""
        self._attributes = AttributeCache()
        self._ended = EndedSeries(wall)  # what each identity sent last, to close what ends
        self._holders = HolderLabels()  # business labels onto allocation points
        self._listeners = settings.listeners  # where the memory waits through a reload
        self._unsent_at_shutdown = 0
        self._in_flight: dict[int, _Flight] = {}  # batches a consumer is sending, by number
        self._flights = itertools.count()

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self, host: Host) -> None:
        environ = os.environ if self._environ is None else self._environ
        self._attributes = AttributeCache(resource_defaults=service_attributes(environ))
        if self._listeners is not None:
            kept = self._listeners.adopt(self._memory_key(), EndedSeries)
            if kept is not None:  # a reload: what the old exporter sent is closed as it ends
                kept.inherit()
                self._ended = kept
                self._log.info(
                    "took over the memory of %d identities sent before the reload (%d closing "
                    "points owed)",
                    len(kept),
                    kept.owed,
                )
        await self._transport.open()
        self._publish_size()
        consumers = self._config.sending_queue.num_consumers
        self._tasks = [
            asyncio.create_task(self._run(), name=f"{self._id} consumer {i}")
            for i in range(consumers)
        ]
        # Lets the consumers reach the queue, so a batch consumed right after start is handed
        # to an idle consumer rather than taking a queue slot.
        await asyncio.sleep(0)

    async def shutdown(self) -> None:
        """Stops taking batches, sends what is queued until `drain_timeout`, counts the rest.

        Cancellation-safe: when the agent's stop deadline cancels it half way, everything
        queued or in flight is still counted as failed and logged before it returns.
        """
        if self._stopped:
            return
        self._stopped = True
        self._sender.drain()
        self._queue.close()
        try:
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=self._config.sending_queue.drain_timeout)
        finally:
            self._count_unsent()
            if self._listeners is not None:  # the next service's exporter takes it over
                self._listeners.keep(self._memory_key(), self._ended)
            await self._stop_consumers()
            await self._transport.close()

    def _memory_key(self) -> tuple[str, str, str]:
        """What the memory is parked under: this exporter's name and its backend."""
        return ("otlp", self._id, self._config.backend())

    def _count_unsent(self) -> None:
        """Counts (synchronously, so a cancelled shutdown cannot skip it) every batch in flight
        or queued as failed, and logs the shutdown's total once."""
        for task in self._tasks:
            task.cancel()
        left = [*(flight.item for flight in self._in_flight.values()), *self._queue.clear()]
        self._in_flight.clear()
        for item in left:
            self._ended.refused(item.receipt)
        points = sum(item.points for item in left)
        self._telemetry.exporter_result(self._id, 0, points)
        self._unsent_at_shutdown += points
        if self._unsent_at_shutdown:
            self._log.warning(
                "shutdown: %d points could not be sent (counted as failed)",
                self._unsent_at_shutdown,
            )
        self._publish_size()

    async def _stop_consumers(self) -> None:
        # Already cancelled and counted; waiting only lets them unwind (skipped if this
        # shutdown is itself being cancelled: they finish on their own).
        tasks, self._tasks = self._tasks, []
        if tasks and not _cancelling():
            await asyncio.wait(tasks)

    async def consume(self, batch: Batch) -> None:
        """Encodes `batch`, queues its request and returns at once; a full queue refuses it and
        counts its points. Resources without metrics are left out (a batch of nothing else is
        not queued). The request also closes the series the batch's identities stopped sending
        (`ended/`); those closing points are not counted as points."""
        if self._stopped:  # a late batch during the service's shutdown: counted, not queued
            if points := point_count(batch):
                self._telemetry.exporter_result(self._id, 0, points)
            return
        request, receipt = request_of(self._holders.apply(batch), self._attributes, self._ended)
        if not request:
            return
        points = point_count(batch)
        if self._queue.offer(Item(request, points, receipt=receipt)):
            if self._overflowing:
                self._overflowing = False
                self._log.info("sending queue has room again")
        else:
            self._ended.refused(receipt)  # its closing points go with the next request
            self._telemetry.exporter_result(self._id, 0, points)
            if not self._overflowing:
                self._overflowing = True
                self._log.warning("sending queue is full: dropping new batches (counted)")
        self._publish_size()

    # --- consumers ------------------------------------------------------------------------

    async def _run(self) -> None:
        while (item := await self._queue.take()) is not None:
            key = next(self._flights)
            flight = self._in_flight[key] = _Flight(item)
            points = item.points
            item = None  # the flight holds it, and swaps in its gzipped form to wait to retry
            self._publish_size()
            sent, failed, accepted = 0, points, False
            try:
                sent, failed, accepted = await self._deliver(flight)
            except Exception:  # a bug must not stop the consumer; the batch is counted
                self._log.exception("export failed unexpectedly")
            finally:  # also on cancellation, unless shutdown already counted it
                if self._in_flight.pop(key, None) is not None:
                    self._done(flight.item, sent, failed, accepted)
            # Not kept alive while the loop waits for the next batch (a whole cycle's batch).
            del flight

    def _done(self, item: Item, sent: int, failed: int, accepted: bool) -> None:
        """Counts a batch a consumer is done with, then settles its closing points. Called
        from the consumer's `finally`: what raises here is logged and the consumer goes on
        (an exception out of a `finally` would end it, and nothing would send again)."""
        try:
            self._telemetry.exporter_result(self._id, sent, failed)
            if self._sender.draining:
                self._unsent_at_shutdown += failed
            if accepted:
                self._ended.accepted(item.receipt)
            else:
                self._ended.refused(item.receipt)
        except Exception:
            self._log.exception(
                "settling a %s batch of %d points failed (counted unless this is the counter's "
                "error); the consumer goes on",
                "sent" if accepted else "failed",
                sent + failed,
            )

    async def _deliver(self, flight: _Flight) -> tuple[int, int, bool]:
        """Sends one batch with retries (`RetrySender`); returns (sent, failed) points and
        whether the server accepted the request (partly, maybe). Between attempts the batch
        waits gzipped, as in the queue: an outage holds no protobuf bytes."""
        points = flight.item.points
        timeout = self._config.timeout

        async def attempt() -> ExportResponse:
            return await self._transport.export(_unpacked(flight.item), timeout)

        def failed(err: ExportError, delay: float | None) -> None:
            self._failed(err, points, delay)

        def waiting() -> None:
            if not flight.item.packed:
                flight.item = _packed(flight.item)

        response = await self._sender.send(attempt, failed, waiting=waiting)
        if response is GIVEN_UP:
            return 0, points, False
        self._succeeded()
        rejected = min(max(response.rejected, 0), points)
        if rejected:
            self._partial(rejected, response.message)
        return points - rejected, rejected, True

    # --- reporting (logs once per change of state, never per batch) ------------------------

    def _failed(self, err: ExportError, points: int, delay: float | None) -> None:
        # One line when failures start or change, one for the first batch given up; the
        # counters carry the rest.
        message = capped(err)  # the endpoint's text: bounded in the log
        if delay is not None:
            if message != self._last_error:
                self._log.warning("export failed, retrying in %.3gs: %s", delay, message)
        elif message != self._last_error or not self._dropping:
            self._log.error("export failed, dropping %d points: %s", points, message)
            self._dropping = True
        self._last_error = message

    def _succeeded(self) -> None:
        if self._last_error:
            self._log.info("export succeeded again")
        self._last_error, self._dropping = "", False

    def _partial(self, rejected: int, message: str) -> None:
        if message != self._last_partial:
            self._last_partial = message
            self._log.warning(
                "the server rejected %d points: %s", rejected, capped(message) if message else "-"
            )

    def _publish_size(self) -> None:
        self._telemetry.set_gauge(QUEUE_SIZE_GAUGE, self._queue.size, exporter=self._id)


def request_of(batch: Batch, cache: AttributeCache, ended: EndedSeries) -> tuple[bytes, Receipt]:
    """The request for `batch` as sent on the wire (b"": nothing to send): its points, then a
    closing point for each series its identities stopped sending; and the receipt of the
    closing points it carries (the points still owed from failed requests among them), for
    `ended` to settle. Wire bytes, sent as they are: parsing them into a protobuf message only
    for the transport to serialize it again would cost ~4x their size in memory and the CPU of
    both steps, every cycle."""
    sent = batch
    trail: Trail | None = Trail()  # written by the encoder, for the memory (`ended/trail.py`)
    if _gone_in(batch):  # the memory looks at the batch
        sent, trail = tuple(rm for rm in batch if rm.metrics), None
    request = encode_bytes(sent, cache, trail) if sent else b""
    closing, receipt = ended.closes(batch, trail)
    if closing:
        request += encode_closing_bytes(closing, cache)
    return request, receipt


def _gone_in(batch: Batch) -> bool:
    """Whether `batch` holds a gone marker (a resource without metrics: nothing is sent for
    it). A loop, not `any(...)` of a generator or a map: every batch is asked, and a slot
    read in a loop costs half of either."""
    for rm in batch:  # noqa: SIM110
        if not rm.metrics:
            return True
    return False


_SIZERS = {"bytes": by_bytes, "items": by_points, "requests": by_request}


@dataclass(slots=True)
class _Flight:
    """A batch a consumer is sending (mutable: gzipped while it waits to retry)."""

    item: Item


def _packed(item: Item) -> Item:
    """The form a batch waits in, in the queue or to be retried: its request gzipped
    (level 1)."""
    return Item(gzip_bytes(item.request), item.points, packed=True, receipt=item.receipt)


def _unpacked(item: Item) -> bytes:
    """The request to send."""
    return gunzip_bytes(item.request) if item.packed else item.request


def _cancelling() -> bool:
    """Whether the running task has been asked to stop (its cancellation is in progress)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
