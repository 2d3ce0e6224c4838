"""Configuration shared by exporters that queue and retry: `retry_on_failure` and
`sending_queue`, with the Collector's (`exporterhelper`, `configretry`) names and defaults."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from otelgpu.config.types import Duration, PositiveDuration, StrictModel


class RetryConfig(StrictModel):
    """`retry_on_failure`: exponential backoff with jitter for retryable failures only.

    enabled: true. initial_interval: 5s (the first wait). max_interval: 30s (the longest
    wait). max_elapsed_time: 300s (then the batch is dropped and counted; 0 retries forever).
    multiplier: 1.5, each wait is this many times the last. randomization_factor: 0.5, each
    wait is drawn from ±this fraction of the interval (0 = no jitter). The Collector's
    (configretry) names, defaults and bounds. A delay the server asks for (gRPC RetryInfo,
    HTTP Retry-After) is honoured.
    """

    enabled: bool = True
    initial_interval: PositiveDuration = 5.0
    max_interval: PositiveDuration = 30.0
    max_elapsed_time: Annotated[Duration, Field(ge=0)] = 300.0
    multiplier: Annotated[float, Field(gt=0, le=100)] = 1.5
    randomization_factor: Annotated[float, Field(ge=0, le=1)] = 0.5

    @model_validator(mode="after")
    def _order(self) -> RetryConfig:
        if self.max_interval < self.initial_interval:
            raise ValueError("max_interval must not be shorter than initial_interval")
        return self


# Default queue capacity with `sizer: bytes`: the memory the queued requests may hold. A
# queued request is its protobuf bytes gzipped (~17-35 bytes a point with a pod's labels, from
# 225-435 uncompressed: bench/p2_cycle_cpu.py's nodes), so 6 MiB holds some 180k-370k points:
# 18-37 collections of a 10k-series node (3 to 6 minutes at the default 10 s interval, about
# the 5 minutes a batch is retried). It is also what a full queue adds to the agent's RSS: a
# 7k-series agent with its endpoint down and the queue full stays under 100 MiB
# (bench/p3_rss.py --otlp-down), well inside the DaemonSet's 192Mi limit.
DEFAULT_QUEUE_BYTES = 6 << 20
# Default capacity with `sizer: items` (points) or `sizer: requests` (batches).
DEFAULT_QUEUE_POINTS = 100_000
Sizer = Literal["bytes", "items", "requests"]
_log = logging.getLogger("otelgpu.config")


class QueueConfig(StrictModel):
    """`sending_queue`: the bounded in-memory backlog between the pipeline and the endpoint.

    Batches wait in the queue as their encoded request (the protobuf bytes sent), gzipped, so
    what the queue holds in memory is what `sizer: bytes` counts.
    enabled: true; when false there is no backlog: a batch is sent only if a consumer is idle,
    otherwise it is dropped and counted.
    sizer: what `queue_size` counts, as the Collector spells it: `bytes` (the default: the
    queued requests' size as held, gzipped, which is the queue's memory), `items` (data
    points) or `requests` (batches, whatever their size: memory is then not bounded by the
    number of series). A `queue_size` written without a `sizer` counts points (`items`), with
    a warning: the default sizer counts bytes, so the same number means something else once
    the `sizer` line goes (or comes).
    queue_size: 6 MiB with `sizer: bytes` (`DEFAULT_QUEUE_BYTES`), 100000 otherwise.
    num_consumers: 1, batches sent concurrently; each holds one batch in flight, outside the
    queue's capacity.
    drain_timeout: 20s, how long shutdown keeps sending what is queued before it counts the
    rest as failed (the agent's stop deadline cuts it shorter if needed).
    """

    enabled: bool = True
    sizer: Sizer = "bytes"
    queue_size: Annotated[int, Field(ge=1)] = DEFAULT_QUEUE_BYTES
    num_consumers: Annotated[int, Field(ge=1, le=64)] = 1
    drain_timeout: Annotated[Duration, Field(ge=0)] = 20.0

    @model_validator(mode="before")
    @classmethod
    def _sized(cls, data: Any) -> Any:
        """A `queue_size` without a `sizer` counts points; a `sizer` without a `queue_size`
        gets that sizer's default capacity."""
        if not isinstance(data, dict):
            return data
        if "sizer" not in data:
            if "queue_size" not in data:
                return data
            _log.warning(
                "sending_queue: queue_size %s is written without a sizer, so it counts data "
                "points (sizer: items), not bytes as the default sizer does; write "
                '"sizer: items" to keep this meaning, or "sizer: bytes" for a memory bound',
                data["queue_size"],
            )
            return {"sizer": "items", **data}
        if "queue_size" not in data and data["sizer"] in ("items", "requests"):
            return {**data, "queue_size": DEFAULT_QUEUE_POINTS}
        return data
