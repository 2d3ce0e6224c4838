"""Configuration of the `debug` exporter."""

from __future__ import annotations

from typing import Literal

from otelgpu.config.types import StrictModel


class DebugExporterConfig(StrictModel):
    """`exporters::debug`.

    verbosity: `basic` logs one line per batch (resources, metrics, points);
    `detailed` also logs every point with its resource and attributes.
    """

    verbosity: Literal["basic", "detailed"] = "basic"
