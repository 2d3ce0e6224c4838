"""Only the formats scrapers ask for are rendered and held.

Prometheus 2 and 3 ask for OpenMetrics: an agent they scrape holds (and gzips, every update)
the OpenMetrics body alone, not the classic one beside it. A scrape of the other format
converts the current body version once, by swapping the families' heads (`Layout`), and that
format is rendered too while it is asked for.
"""

from __future__ import annotations

import gc
import gzip
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings

from otelgpu.exporters.prometheus.demand import FORMAT_WANTED, PLAIN, PLAIN_WANTED, Demand
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.openmetrics import Exposition, layout_of, render_openmetrics
from otelgpu.exporters.prometheus.render import Body, render_chunks, render_text
from otelgpu.exporters.prometheus.series import Family
from otelgpu.exporters.prometheus.server import OPENMETRICS, TEXT
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.prometheus.batches import batch, gpu
from tests.unit.exporters.prometheus.test_exporter import make
from tests.unit.exporters.prometheus.test_negotiation import PROMETHEUS_3, get
from tests.unit.exporters.prometheus.test_openmetrics import _families, check


@pytest.fixture
async def exporter(host: FakeHost, clock: FakeClock) -> AsyncIterator[PrometheusExporter]:
    exp = make(host.telemetry, clock, metric_expiration="1h")
    await exp.start(host)
    yield exp
    await exp.shutdown()


def bodies_held(exposition: Exposition) -> list[Body]:
    """The bodies an exposition references right now (rendered or converted)."""
    return [o for o in gc.get_referents(exposition) if isinstance(o, Body)]


async def test_an_openmetrics_only_scraper_leaves_one_body_held(
    exporter: PrometheusExporter,
) -> None:
    await exporter.consume(batch(gpu(0), utilization=0.25))
    await exporter.refresh()
    content_type, _ = await get(exporter, PROMETHEUS_3, "gzip")  # converts, once
    assert content_type.startswith("application/openmetrics-text")
    await exporter.consume(batch(gpu(0), gpu(1), utilization=0.5))
    await exporter.refresh()
    exposition = exporter.exposition
    held = bodies_held(exposition)
    assert len(held) == 1, f"{len(held)} bodies held for an OpenMetrics-only scraper"
    assert exposition.converted and not exposition.holds_classic
    content_type, zipped = await get(exporter, PROMETHEUS_3, "gzip")
    assert content_type.startswith("application/openmetrics-text")
    assert b"hw_power_watts{" in gzip.decompress(zipped)
    # A classic text scrape (curl) still gets classic text, converted from that body.
    content_type, classic = await get(exporter, "*/*")
    assert content_type.startswith("text/plain")
    assert b"# TYPE hw_energy_joules_total counter" in classic and b"# EOF" not in classic


async def test_a_classic_scrape_converts_once_and_is_rendered_while_asked_for(
    exporter: PrometheusExporter, clock: FakeClock
) -> None:
    exporter.scraped(200, OPENMETRICS)  # what the server reports after a Prometheus scrape
    await exporter.consume(batch(gpu(0), gpu(1), utilization=0.5))
    await exporter.refresh()
    exposition = exporter.exposition
    assert bodies_held(exposition) == [exposition.openmetrics()]
    om = gzip.decompress(exposition.openmetrics().gzipped)
    # What a classic text scrape of this version gets: converted from the OpenMetrics body,
    # gzip only, and kept for the next scrapes of the version.
    converted = exposition.classic
    assert exposition.classic is converted and not converted.holds_plain
    classic = gzip.decompress(converted.gzipped)
    assert b"".join(exposition._layout.openmetrics(classic)) == om  # type: ignore[union-attr]
    assert b"# TYPE hw_energy_joules_total counter" in classic and b"# EOF" not in classic
    assert len(bodies_held(exposition)) == 2
    # Asked for within FORMAT_WANTED: each new body is rendered in both formats.
    exporter.scraped(200, TEXT)
    await exporter.consume(batch(gpu(0), gpu(1), utilization=0.75))
    await exporter.refresh()
    both = exporter.exposition
    assert both is not exposition and both.holds_classic and both.converted
    # The classic scraper went away; OpenMetrics is still scraped: one body again.
    clock.now += FORMAT_WANTED + 1
    exporter.scraped(200, OPENMETRICS)
    await exporter.consume(batch(gpu(0), utilization=0.5))
    await exporter.refresh()
    assert len(bodies_held(exporter.exposition)) == 1
    assert exporter.exposition.converted


async def test_refused_scrapes_do_not_choose_what_is_rendered(
    exporter: PrometheusExporter,
) -> None:
    exporter.scraped(200, OPENMETRICS)
    exporter.scraped(401, TEXT)  # a wrong password asking for classic text
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    assert not exporter.exposition.holds_classic


ASKED = ["never", "lately", "long ago"]  # within the window, or just past it


@pytest.mark.parametrize("openmetrics", ASKED)
@pytest.mark.parametrize("text", ASKED)
@pytest.mark.parametrize("plain", ASKED)
def test_a_body_is_made_in_the_formats_asked_for_lately_and_never_in_none(
    openmetrics: str, text: str, plain: str
) -> None:
    """What a new body is made in is derived from when each format was last asked for: the
    formats asked for within `FORMAT_WANTED`, classic text when OpenMetrics was not; plain
    bytes kept within `PLAIN_WANTED` of a plain scrape that inflated a body."""
    demand, now = Demand(), 10_000.0
    for what, when, window in (
        (OPENMETRICS, openmetrics, FORMAT_WANTED),
        (TEXT, text, FORMAT_WANTED),
        (PLAIN, plain, PLAIN_WANTED),
    ):
        if when != "never":
            demand.asked(what, now - 1.0 if when == "lately" else now - window)
    formats = demand.formats(now)
    assert formats.openmetrics == (openmetrics == "lately")
    assert formats.text == (text == "lately" or openmetrics != "lately")
    assert demand.plain(now) == (plain == "lately")


@settings(max_examples=150, deadline=None)
@given(_families())
def test_each_format_is_the_other_with_its_heads_swapped(families: list[Family]) -> None:
    """The layout's slices give byte for byte what each format's own render gives: counters
    typed `unknown` in OpenMetrics (a clashing base, a negative or NaN sample), HELP with
    quotes, backslashes and newlines, families without series, several chunks per family."""
    classic = render_text(families)[0].encode()
    rendered = render_chunks(families)
    layout = layout_of(rendered)
    om = render_openmetrics(rendered, True, layout).plain
    check(classic, om)  # valid OpenMetrics, the classic text's samples
    assert b"".join(layout.classic(om)) == classic
    assert b"".join(layout.openmetrics(classic)) == om
