"""The health summary rides on `nvidia.gpu.up`, so its labels change with the GPU's state: the
body must then hold the new series alone, never the old state beside it (in both namings)."""

from __future__ import annotations

import pytest

from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.pdata.model import Batch, ResourceMetrics
from tests.unit.exporters.prometheus.batches import gauge, gpu, gpu_metrics
from tests.unit.exporters.prometheus.test_dcgm_labels import ingested, labels_of, sample
from tests.unit.exporters.prometheus.translators import make_translator


def health_batch(state: str, reason: str, up: int = 1) -> Batch:
    summary = {"hw.state": state, "nvidia.gpu.health.reason": reason}
    metric = gauge("nvidia.gpu.up", "{state}", up, summary)
    return (ResourceMetrics(resource=gpu(0), metrics=(*gpu_metrics(), metric)),)


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_a_state_change_leaves_one_up_series_with_the_new_state(naming: str) -> None:
    translator, store = make_translator(naming), SeriesStore()
    history = [
        ("ok", "", 1),
        ("degraded", "pcie_width", 1),
        ("ok", "", 1),
        ("failed", "gpu_lost", 0),
    ]
    for state, reason, up in history:
        (line,) = ingested(translator, store, health_batch(state, reason, up))["nvidia_gpu_up"]
        assert labels_of(line)["hw_state"] == state
        assert labels_of(line).get("nvidia_gpu_health_reason", "") == reason
        assert sample(line) == str(up)
