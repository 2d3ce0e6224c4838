"""docs/kubelet_stats.md is the catalog rendered; every metric is listed."""

from __future__ import annotations

from pathlib import Path

from otelgpu.receivers.kubelet_stats.docs import render_markdown
from otelgpu.receivers.kubelet_stats.metrics import CATALOG

ROOT = Path(__file__).parents[4]


def test_committed_docs_match_the_catalog() -> None:
    committed = (ROOT / "docs" / "kubelet_stats.md").read_text()
    assert committed == render_markdown(), (
        "regenerate: python -m otelgpu.receivers.kubelet_stats.docs > docs/kubelet_stats.md"
    )
    for spec in CATALOG:
        assert f"`{spec.name}`" in committed
