"""One validated pipeline, as the schema builds it and the checks across components read it."""

from __future__ import annotations

from dataclasses import dataclass

from otelgpu.component.component import ComponentID


@dataclass(frozen=True)
class Pipeline:
    """One validated pipeline: its components in order."""

    id: ComponentID
    receivers: tuple[ComponentID, ...]
    processors: tuple[ComponentID, ...]
    exporters: tuple[ComponentID, ...]
