"""Glue between components: a pipeline's processor chain and the fan-out to its exporters.

Every hand-over between components goes through a `GuardedConsumer`: a consumer that raises
(a bug: consumers must count and drop bad data themselves) costs only that batch, which is
counted in `otelgpu_consumer_failed_points_total{consumer}` and logged at most once a minute.
The caller (a receiver's scrape loop, a fan-out) never sees the exception.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from otelgpu.component.component import MetricsConsumer, Processor
from otelgpu.component.log_limits import RateLimitedLog, capped
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch, point_count

_log = logging.getLogger("otelgpu.service")


class GuardedConsumer:
    """Hands batches to `consumer`; if it raises, counts the batch's points, logs, returns."""

    def __init__(
        self,
        name: str,
        consumer: MetricsConsumer,
        telemetry: SelfTelemetry,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.consumer = consumer
        self._telemetry = telemetry
        self._errors = RateLimitedLog(_log, monotonic=monotonic)

    async def consume(self, batch: Batch) -> None:
        try:
            await self.consumer.consume(batch)
        except Exception as exc:
            points = point_count(batch)
            self._telemetry.consumer_failed(self.name, points)
            self._errors.log(
                logging.ERROR,
                'consumer "%s" failed, %d points dropped: %s',
                self.name,
                points,
                capped(f"{type(exc).__name__}: {exc}"),
                exc_info=True,
            )


class FanOut:
    """Hands each batch to several consumers, each behind its own guard, so one failing
    consumer never starves the others. Batches are immutable: every consumer gets the same one.
    """

    def __init__(self, consumers: Sequence[GuardedConsumer]) -> None:
        self.consumers = tuple(consumers)

    async def consume(self, batch: Batch) -> None:
        for consumer in self.consumers:
            await consumer.consume(batch)


class PipelineHead:
    """A pipeline's entry: runs its processors in order, then fans out to its exporters.

    A processor that raises (a bug: processors must count and drop bad data themselves)
    costs only that batch; its points are counted in `otelgpu_processor_failed_points_total`.
    """

    def __init__(
        self,
        name: str,
        processors: Sequence[tuple[str, Processor]],
        next: MetricsConsumer,
        telemetry: SelfTelemetry,
    ) -> None:
        self.name = name
        self.processors = tuple(processors)
        self.next = next
        self._telemetry = telemetry
        self._errors = {label: RateLimitedLog(_log) for label, _ in self.processors}

    async def consume(self, batch: Batch) -> None:
        for label, processor in self.processors:
            try:
                batch = processor.process(batch)
            except Exception as exc:
                self._errors[label].log(
                    logging.ERROR,
                    "pipeline %s: processor %s failed; batch dropped: %s",
                    self.name,
                    label,
                    capped(f"{type(exc).__name__}: {exc}"),
                    exc_info=True,
                )
                self._telemetry.count(
                    "otelgpu_processor_failed_points_total",
                    point_count(batch),
                    processor=label,
                )
                return
            if not batch:
                return
        await self.next.consume(batch)
