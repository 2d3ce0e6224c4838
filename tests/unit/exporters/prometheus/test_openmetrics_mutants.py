"""OpenMetrics bodies: what the default keeps, and what an exposition refuses to be built
without."""

from __future__ import annotations

import pytest

from otelgpu.exporters.prometheus.openmetrics import Exposition, layout_of, render_openmetrics
from otelgpu.exporters.prometheus.render import Body, render_chunks
from otelgpu.exporters.prometheus.series import Family


def test_the_default_body_holds_its_plain_text() -> None:
    """A plain scrape right after a render must not pay for inflating the gzip bytes."""
    family = Family("g", "gauge", "")
    family.write(1, "g", "1", 1)
    body = render_openmetrics(render_chunks([family]))
    assert body.holds_plain and body.plain.endswith(b"# EOF\n")


def test_an_exposition_needs_a_classic_body_or_an_openmetrics_one_with_its_layout() -> None:
    family = Family("g", "gauge", "")
    family.write(1, "g", "1", 1)
    rendered = render_chunks([family])
    layout = layout_of(rendered)
    openmetrics = render_openmetrics(rendered, True, layout)
    message = "an exposition without its classic body needs the OpenMetrics one"
    with pytest.raises(ValueError, match=f"^{message}$"):
        Exposition(None)
    with pytest.raises(ValueError, match=message):
        Exposition(None, openmetrics)  # no layout: the classic body cannot be made
    with pytest.raises(ValueError, match=message):
        Exposition(None, None, layout)
    assert Exposition(None, openmetrics, layout).openmetrics() is openmetrics
    assert Exposition(Body(b"g 1\n", b"", 1)).openmetrics()  # a classic body alone will do
