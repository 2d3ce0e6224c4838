"""Glue between components: a pipeline's processor chain and the fan-out to its exporters."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from otelgpu.component import MetricsConsumer, Processor
from otelgpu.model import Batch, point_count
from otelgpu.telemetry import SelfTelemetry

_log = logging.getLogger("otelgpu.service")


class FanOut:
    """Hands each batch to several consumers; one failing consumer never starves the others.

    Batches are immutable, so every consumer gets the same object.
    """

    def __init__(self, consumers: Sequence[MetricsConsumer]) -> None:
        self.consumers = tuple(consumers)

    async def consume(self, batch: Batch) -> None:
        for consumer in self.consumers:
            try:
                await consumer.consume(batch)
            except Exception:
                _log.exception("consumer %r failed; batch dropped for it", consumer)


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

    async def consume(self, batch: Batch) -> None:
        for label, processor in self.processors:
            try:
                batch = processor.process(batch)
            except Exception:
                _log.exception("pipeline %s: processor %s failed; batch dropped", self.name, label)
                self._telemetry.count(
                    "otelgpu_processor_failed_points_total",
                    point_count(batch),
                    "Points lost because a processor raised",
                    processor=label,
                )
                return
            if not batch:
                return
        await self.next.consume(batch)
