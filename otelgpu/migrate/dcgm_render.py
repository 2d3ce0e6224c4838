"""A migration (the pipeline and the chart values, each with its comments) and how it is
written: YAML in the order built, multi-line text as `|` blocks, each file headed by its
comments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass
class Migration:
    """The pipeline and the chart values, with a comment line per flag given."""

    pipeline: dict[str, Any]
    chart: dict[str, Any]
    comments: list[str] = field(default_factory=list)
    chart_comments: list[str] = field(default_factory=list)


class _Dumper(yaml.SafeDumper):
    """Multi-line text (a counters CSV, a pipeline) as a `|` block, as a person writes it."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def dump(data: Any) -> str:
    """`data` as YAML in the order given, multi-line text as blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)


def render(migration: Migration) -> tuple[str, str]:
    """The pipeline file and the chart values, as YAML, each headed by its comments."""
    head = [
        "# otelgpu pipeline migrated from dcgm-exporter (otelgpu migrate dcgm-exporter).",
        "# naming: dcgm serves dcgm-exporter's metric and label names.",
        *(f"# {line}" for line in migration.comments),
    ]
    pipeline = "\n".join(head) + "\n" + dump(migration.pipeline)
    chart_head = [
        "# otelgpu Helm chart values migrated from dcgm-exporter.",
        *(f"# {line}" for line in migration.chart_comments),
    ]
    chart = "\n".join(chart_head) + "\n" + dump(migration.chart)
    return pipeline, chart
