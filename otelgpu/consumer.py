"""Glue between components: a pipeline's processor chain and the fan-out to its exporters."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from otelgpu.component import MetricsConsumer, Processor
from otelgpu.model import Batch

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
    """A pipeline's entry: runs its processors in order, then fans out to its exporters."""

    def __init__(self, name: str, processors: Sequence[Processor], next: MetricsConsumer) -> None:
        self.name = name
        self.processors = tuple(processors)
        self.next = next

    async def consume(self, batch: Batch) -> None:
        for processor in self.processors:
            try:
                batch = processor.process(batch)
            except Exception:
                _log.exception(
                    "pipeline %s: processor %r failed; batch dropped", self.name, processor
                )
                return
            if not batch:
                return
        await self.next.consume(batch)
