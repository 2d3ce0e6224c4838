"""Configuration of the `debug` exporter (the Collector's options and defaults)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from otelgpu.config.types import StrictModel


class DebugExporterConfig(StrictModel):
    """`exporters::debug`.

    verbosity: `basic` logs one line per batch (resources, metrics, points); `normal` also a
    line per resource and per point; `detailed` adds each point's unit and kind.
    sampling_initial (2), sampling_thereafter (1): in each second the first `sampling_initial`
    batches are written, then every `sampling_thereafter`-th (1: all of them).
    use_internal_logger: true writes through the agent's log (its level and encoding);
    false writes plain lines to stdout.
    """

    verbosity: Literal["basic", "normal", "detailed"] = "basic"
    sampling_initial: Annotated[int, Field(ge=1)] = 2
    sampling_thereafter: Annotated[int, Field(ge=1)] = 1
    use_internal_logger: bool = True
