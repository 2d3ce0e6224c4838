"""Sizes, durations and metric switches as a pipeline file writes them: parsed, kept, or refused
with a message that shows the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.errors import ConfigError
from otelgpu.config import load_config
from otelgpu.config.types import parse_size
from otelgpu.receivers.nvml.config import NvmlReceiverConfig
from otelgpu.service.builtins import builtin_registry
from tests.unit.config.pipelines import AFTER_RECEIVERS


def _write(tmp_path: Path, receivers: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(receivers + AFTER_RECEIVERS)
    return path


def _messages(tmp_path: Path, receivers: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config([str(_write(tmp_path, receivers))], builtin_registry())
    return [i.message for i in info.value.issues]


def test_a_size_in_bytes_reads_the_same_with_or_without_the_unit() -> None:
    assert parse_size("1000B") == 1000
    assert parse_size("512 B") == 512
    assert parse_size("4194304") == 4194304


def test_a_long_invalid_duration_is_shown_cut_and_still_quoted(tmp_path: Path) -> None:
    value = "x" * 80
    (message,) = _messages(tmp_path, f"receivers:\n  nvml: {{collection_interval: {value}}}\n")
    assert message == (
        f'invalid duration "{"x" * 57}...": expected a number with a unit, such as 500ms, 10s or 5m'
    )


def test_a_switch_for_a_metric_the_receiver_lacks_names_it_and_the_valid_ones(
    tmp_path: Path,
) -> None:
    text = "receivers:\n  nvml:\n    metrics: {gpu.bogus: {enabled: false}}\n"
    (message,) = _messages(tmp_path, text)
    assert message.startswith('unknown metric "gpu.bogus": not one of this receiver')
    assert "docs/metrics.md" in message and "did you mean" not in message


def test_a_switch_for_a_catalog_metric_is_kept(tmp_path: Path) -> None:
    switch = "metrics: {nvidia.gpu.up: {enabled: false}, hw.status: {enabled: true}}"
    path = _write(tmp_path, f"receivers:\n  nvml:\n    {switch}\n")
    config = load_config([str(path)], builtin_registry())
    nvml = config.components[Kind.RECEIVER][ComponentID.parse("nvml")]
    assert isinstance(nvml, NvmlReceiverConfig)
    assert "nvidia.gpu.up" not in nvml.enabled_metrics()  # on by default: the switch was kept
    assert "hw.status" in nvml.enabled_metrics()  # off by default
    assert "hw.gpu.utilization" in nvml.enabled_metrics()
