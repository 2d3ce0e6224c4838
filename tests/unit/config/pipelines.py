"""Pipeline texts the config tests build on (the smallest whole pipeline, with a processor in
it or not, and its part after a `receivers:` block that names `nvml`), and a second file laid
over one of them, validated or refused."""

from __future__ import annotations

import pytest

from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.schema import AgentConfig, validate
from otelgpu.service.builtins import builtin_registry

AFTER_RECEIVERS = """
exporters:
  debug:
service:
  pipelines:
    metrics: {receivers: [nvml], exporters: [debug]}
"""
# nvml (simulated) → debug
MINIMAL = "\nreceivers:\n  nvml: {backend: simulated}" + AFTER_RECEIVERS


def through(processor: str) -> str:
    """`MINIMAL` with `processor` in its pipeline."""
    return MINIMAL.replace(
        "exporters: [debug]}", f"processors: [{processor}], exporters: [debug]}}"
    )


def validated(pipeline: str, text: str) -> AgentConfig:
    """`pipeline` (as p.yaml) with `text` (as f.yaml) laid over it, validated."""
    return validate(load([("p.yaml", pipeline), ("f.yaml", text)], environ={}), builtin_registry())


def refusals(pipeline: str, text: str) -> list[str]:
    """The lines of the error `validated` raises, each `file:line:col: path: message`."""
    with pytest.raises(ConfigError) as info:
        validated(pipeline, text)
    return str(info.value).splitlines()
