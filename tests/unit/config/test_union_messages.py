"""Messages for values that fit no member of a union: one line at the value, in words, whatever
the depth of the union, and a choice that is the empty string shown as `""`."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.component.errors import ConfigError
from otelgpu.config import load_config
from otelgpu.service.builtins import builtin_registry


def _lines(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config([str(path)], builtin_registry())
    prefix = f"{path}:"
    return [str(issue).removeprefix(prefix) for issue in info.value.issues]


def test_an_item_that_fits_no_member_of_a_union_inside_a_union_is_one_line(
    tmp_path: Path,
) -> None:
    # devices: "all", or a list of indexes and/or UUIDs (a union whose list holds a union)
    text = (
        "receivers:\n  nvml:\n    devices: [[1]]\n"
        "exporters:\n  debug:\n"
        "service:\n  pipelines:\n    metrics: {receivers: [nvml], exporters: [debug]}\n"
    )
    assert _lines(tmp_path, text) == [
        "3:15: receivers::nvml::devices::0: expected an integer or a string"
    ]


def test_a_union_of_choices_lists_them_all_with_the_empty_one_quoted(tmp_path: Path) -> None:
    text = (
        "receivers:\n  nvml:\n"
        "exporters:\n  otlp:\n    endpoint: 127.0.0.1:4317\n    tls: {max_version: '0.9'}\n"
        "service:\n  pipelines:\n    metrics: {receivers: [nvml], exporters: [otlp]}\n"
    )
    assert _lines(tmp_path, text) == [
        '6:24: exporters::otlp::tls::max_version: must be one of: 1.0, 1.1, 1.2, 1.3, "" '
        '(got "0.9")'
    ]
