"""The Prometheus body a sequence of batches leaves: the real translation and store."""

from __future__ import annotations

from otelgpu.exporters.prometheus.labels import Naming
from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata.model import Batch
from otelgpu.receivers.nvml.dcgm_names import NAMING


class Body:
    """One Prometheus translation and store, ingesting batch after batch."""

    def __init__(self, naming: Naming) -> None:
        self.store = SeriesStore()
        self.translator = Translator(naming, {}, names=NAMING)
        self.now = 0.0

    def ingest(self, batch: Batch) -> list[str]:
        """The body's sample lines after `batch` (one second after the previous one)."""
        self.now += 1.0
        self.translator.ingest(self.store, batch, self.now)
        text, _ = render_text(self.store.families.values())
        return [line for line in text.splitlines() if not line.startswith("#")]
