"""Loading and validating the pipeline file: `load_config` runs every stage."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from otelgpu.component.registry import Registry
from otelgpu.config.loader import RawConfig, load, read_files
from otelgpu.config.schema import AgentConfig, validate

DEFAULT_PIPELINE_NAME = "<embedded default pipeline>"


def default_pipeline_text() -> str:
    """The embedded default: simulated GPUs, served on :9400 and logged (works on a laptop)."""
    from importlib import resources  # only without -c: a pipeline file never needs it

    return resources.files("otelgpu").joinpath("default_pipeline.yaml").read_text("utf-8")


def load_raw(
    paths: Sequence[str], overrides: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> RawConfig:
    """Stage 1 over the `-c` files (or the embedded default when there are none)."""
    sources = (
        read_files(list(paths)) if paths else [(DEFAULT_PIPELINE_NAME, default_pipeline_text())]
    )
    return load(sources, list(overrides), environ)


def load_config(
    paths: Sequence[str],
    registry: Registry,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> AgentConfig:
    """Every validation stage; raises ConfigError listing all issues."""
    return validate(load_raw(paths, overrides, environ), registry)


__all__ = ["AgentConfig", "default_pipeline_text", "load_config", "load_raw"]
