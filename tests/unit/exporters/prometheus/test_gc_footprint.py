"""The series store stays cheap for the cyclic garbage collector at 10k series (P7).

A full collection holds the GIL while it walks every tracked object outside the frozen
start-up set, and the scrape thread waits meanwhile. The store keeps its series in dicts of str
to str or int, which CPython does not track, so a 10k-series exporter keeps only a few tracked
objects per *identity* (GPU, process), not per series, and a batch that only updates values
adds none (docs/dev/p7.md has the figures). A guard: a per-series tuple or list would fail it.
"""

from __future__ import annotations

import gc

from otelgpu.component.telemetry import SelfTelemetry
from tests.fakes import FakeClock
from tests.unit.exporters.prometheus.batches import batch, gpu
from tests.unit.exporters.prometheus.test_exporter import make

GPUS = 1111  # 8 series each (batches.gpu_metrics) and an info series: ~10k series


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


async def test_10k_series_keep_few_tracked_objects_and_updates_add_none() -> None:
    exporter = make(SelfTelemetry(), FakeClock())
    before = _tracked()
    await exporter.consume(batch(*(gpu(i) for i in range(GPUS))))
    await exporter.refresh()  # renders the body (and shows the series were stored)
    series = 9 * GPUS
    assert exporter.body.series == series
    first = _tracked() - before  # the batch itself is garbage by now
    assert first < 3 * series, f"{first} tracked objects kept for {series} series"
    before = _tracked()
    for utilization in (0.1, 0.2, 0.3):
        await exporter.consume(batch(*(gpu(i) for i in range(GPUS)), utilization=utilization))
    assert _tracked() - before < 100  # values replaced in place: nothing new to walk
