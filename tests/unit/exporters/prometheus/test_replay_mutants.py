"""Replay (replay.py) cases that random batch sequences rarely reach, held directly
(docs/dev/mutation.md)."""

from __future__ import annotations

from otelgpu.exporters.prometheus.render import render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata import semconv
from otelgpu.pdata.model import ResourceMetrics
from tests.unit.exporters.prometheus.batches import gauge, gpu
from tests.unit.exporters.prometheus.translators import make_translator


def test_a_device_leaving_a_shared_identity_takes_its_info_series_along() -> None:
    """Two devices report under one identity and both replay; then one is gone: its info
    series leaves at once with its other lines, though the other device replays."""
    store, translator = SeriesStore(), make_translator("otel")

    def device(index: int) -> ResourceMetrics:
        power = (gauge("hw.power", "W", 300.0 + index),)
        return ResourceMetrics(resource=gpu(index), metrics=power, identity="shared")

    for now in (1.0, 2.0):  # the general path, then both replayed
        translator.ingest(store, (device(0), device(1)), now)
    translator.ingest(store, (device(0),), 3.0)
    text = render_text(store.families.values())[0]
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(lines) == 2 and all('hw_name="nvidia0"' in line for line in lines)


def test_a_plan_whose_lines_are_all_still_owned_replays_after_a_loss_elsewhere() -> None:
    """Identity "s" loses the line of one of its two resources to another identity; the other
    resource's plan still owns every line: it replays (only the first takes the general path)."""
    store, translator = SeriesStore(), make_translator("otel")
    power = (gauge("hw.power", "W", 300.0),)
    first = ResourceMetrics(resource=gpu(0), metrics=power, identity="s")
    second = ResourceMetrics(resource=gpu(1), metrics=power, identity="s")
    alike = {**gpu(0), semconv.GPU_INDEX: 0}  # renders as `first` does
    for now in (1.0, 2.0):
        translator.ingest(store, (first, second), now)
    translator.ingest(store, (ResourceMetrics(resource=alike, metrics=power, identity="o"),), 3.0)
    written: list[object] = []
    general = translator._general.write_resource

    def spy(*args: object, **kwargs: object) -> tuple[int, int, bool]:
        written.append(args[2])
        return general(*args, **kwargs)  # type: ignore[arg-type]

    translator._general.write_resource = spy  # type: ignore[method-assign]
    translator.ingest(store, (first, second), 4.0)
    assert written == [tuple(first.resource.items())]
