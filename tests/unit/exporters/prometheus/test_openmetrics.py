"""OpenMetrics 1.0 made from the classic body: every body must pass prometheus_client's strict
OpenMetrics parser and carry the same samples (names, labels, values) as the classic text."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_classic

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus import openmetrics
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.openmetrics import (
    Exposition,
    encode,
    render_openmetrics,
    to_openmetrics,
)
from otelgpu.exporters.prometheus.render import CHUNK_SERIES, Body, render_chunks, render_text
from otelgpu.exporters.prometheus.series import Family
from otelgpu.exporters.prometheus.server import OPENMETRICS
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from tests.conftest import make_settings
from tests.fakes import FakeHost
from tests.unit.exporters.prometheus.batches import batch, gpu, held_by

Sample = tuple[str, tuple[tuple[str, str], ...], str]


def samples(families: Iterable[object]) -> set[Sample]:
    out: set[Sample] = set()
    for family in families:
        for s in family.samples:  # type: ignore[attr-defined]
            value = "NaN" if math.isnan(s.value) else repr(float(s.value))
            out.add((s.name, tuple(sorted(s.labels.items())), value))
    return out


def body_of(naming: str, *batches: Batch, with_self_telemetry: bool = True) -> bytes:
    """The classic body an exporter renders for `batches` (and its self-telemetry)."""

    async def render() -> bytes:
        host = FakeHost(SelfTelemetry())
        cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0", "naming": naming})
        exporter = PrometheusExporter(
            make_settings("prometheus", Kind.EXPORTER, host.telemetry), cfg
        )
        if with_self_telemetry:
            await exporter.start(host)
        try:
            for b in batches:
                await exporter.consume(b)
            await exporter.refresh()
            exporter.scraped(200, "openmetrics")  # a labelled self-metric counter
            await exporter.refresh()
            return exporter.body.plain
        finally:
            if with_self_telemetry:
                await exporter.shutdown()

    return asyncio.run(render())


def check(classic: bytes, fast: bool = True) -> dict[str, str]:
    """Parses both formats, compares their samples; the OpenMetrics family types by name.
    `fast`: the body is in the renderer's shape, which takes the block-wise path; the
    line-by-line path must give the same text."""
    om = to_openmetrics(classic)
    text = classic.decode()
    assert (openmetrics._blocks(text) is not None) == fast
    assert [(f.name, f.type, f.help, "".join(f.samples)) for f in openmetrics._lines(text)] == [
        (f.name, f.type, f.help, "".join(f.samples))
        for f in openmetrics._blocks(text) or openmetrics._lines(text)
    ]
    assert om.endswith("# EOF\n")
    families = list(parse_om(om))
    # untyped: prometheus_client's classic parser would append `_total` to counter samples
    reference = re.sub(r"^(# TYPE \S+) counter$", r"\1 untyped", classic.decode(), flags=re.M)
    assert samples(families) == samples(parse_classic(reference))
    return {f.name: f.type for f in families}


WEIRD_POD = 'tr"ain\\er\nx}{ y=1'


def test_otel_naming_counters_drop_total_in_metadata_only() -> None:
    classic = body_of("otel", batch(gpu(0, **held_by(WEIRD_POD)), gpu(1)))
    types = check(classic)
    om = to_openmetrics(classic)
    assert types["hw_energy_joules"] == "counter"
    assert "# TYPE hw_energy_joules counter\n" in om and "\nhw_energy_joules_total{" in om
    assert types["hw_gpu_utilization_ratio"] == "gauge"
    assert types["otelgpu_prometheus_scrapes"] == "counter"
    assert 'format="openmetrics"' in om


def test_dcgm_counters_keep_their_names_as_unknown() -> None:
    classic = body_of("dcgm", batch(gpu(0, **held_by(WEIRD_POD))))
    types = check(classic)
    om = to_openmetrics(classic)
    assert types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "unknown"
    assert "\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" in om


def test_help_quotes_are_escaped_and_comments_dropped() -> None:
    classic = (
        '# HELP a_total say "hi" \\\\ back\\nslash\n# TYPE a_total counter\na_total 3\n'
        '# some comment\n# TYPE g gauge\ng{l="v\\""} -1.5e+20\nu 1\n'
    )
    om = to_openmetrics(classic)
    assert om == (
        "# TYPE a counter\n"
        '# HELP a say \\"hi\\" \\\\ back\\nslash\n'
        "a_total 3\n"
        "# TYPE g gauge\n"
        'g{l="v\\""} -1.5e+20\n'
        "# TYPE u unknown\n"
        "u 1\n"
        "# EOF\n"
    )
    [a, g, u] = parse_om(om)
    assert a.documentation == 'say "hi" \\ back\nslash'
    assert (g.type, u.type) == ("gauge", "unknown")


def test_counters_that_cannot_be_openmetrics_counters_become_unknown() -> None:
    classic = (
        "# TYPE c_total counter\nc_total 1\n# TYPE c gauge\nc 2\n"  # family names clash
        "# TYPE n_total counter\nn_total NaN\n"  # OpenMetrics counters cannot be NaN
        "# TYPE m_total counter\nm_total -1\n"  # nor negative
        "# TYPE k_total counter\nk_total 3\n# TYPE k_created gauge\nk_created 4\n"  # k's own
    )
    assert check(classic.encode(), fast=True) == {
        "c_total": "unknown",
        "c": "gauge",
        "n_total": "unknown",
        "m_total": "unknown",
        "k_total": "unknown",
        "k_created": "gauge",
    }


def test_histograms_and_summaries_keep_their_type() -> None:
    """Not what the renderer writes, but classic text the converter accepts."""
    classic = (
        "# TYPE h histogram\n"
        'h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n'
        "# TYPE s summary\n"
        's{quantile="0.5"} 1\ns_sum 3\ns_count 2\n'
    )
    om = to_openmetrics(classic)
    assert "# TYPE h histogram\n" in om and "# TYPE s summary\n" in om


def test_timestamps_become_seconds_and_empty_body_is_just_eof() -> None:
    om = to_openmetrics('# TYPE g gauge\ng{a="} 1"} 2 1500\n')
    assert om == '# TYPE g gauge\ng{a="} 1"} 2 1.5\n# EOF\n'
    assert to_openmetrics(b"") == "# EOF\n"
    list(parse_om(om))


def test_exposition_converts_once_and_keeps_it() -> None:
    plain = b"# TYPE g gauge\ng 1\n"
    exposition = Exposition(Body(plain, b"", 1))
    assert not exposition.converted
    first = exposition.openmetrics()
    assert exposition.converted and exposition.openmetrics() is first
    assert first.plain == b"# TYPE g gauge\ng 1\n# EOF\n" and first.series == 1
    assert encode(Body(plain, b"", 1)).plain == first.plain


_NAMES = st.text(alphabet="abcXY_.:-/ 9é", min_size=1, max_size=12)
_TEXT = st.text(max_size=20)
_VALUES = st.one_of(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
)
_KINDS = st.sampled_from(["gauge", "counter", "updown"])


@st.composite
def metrics(draw: st.DrawFn) -> Metric:
    kind = draw(_KINDS)
    points = tuple(
        NumberDataPoint(
            attributes=draw(st.dictionaries(_NAMES, _TEXT, max_size=3)),
            time_unix_nano=1,
            start_time_unix_nano=0,
            value=draw(_VALUES),
        )
        for _ in range(draw(st.integers(1, 3)))
    )
    return Metric(
        name=draw(_NAMES),
        unit=draw(st.sampled_from(["", "1", "By", "J", "{error}", "s"])),
        description=draw(_TEXT),
        kind=MetricKind.GAUGE if kind == "gauge" else MetricKind.SUM,
        monotonic=kind == "counter",
        points=points,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(metrics(), min_size=1, max_size=6),
    st.dictionaries(_NAMES, _TEXT, max_size=2),
    st.sampled_from(["otel", "dcgm"]),
)
def test_any_body_is_valid_openmetrics_with_the_same_samples(
    metrics_: list[Metric], resource: dict[str, str], naming: str
) -> None:
    b: Batch = (ResourceMetrics(resource=resource, metrics=tuple(metrics_), scope="s"),)
    check(body_of(naming, b, with_self_telemetry=False))


# --- the OpenMetrics body made from the render's chunks ------------------------------------

_FAMILY_NAMES = st.sampled_from(
    ["a", "a_total", "a_created", "b_total", "b", "c_total", "_total", "d", "e_total"]
)
_VALUES = st.sampled_from(["1", "0", "-1", "NaN", "+Inf", "-Inf", "2.5", "-0.5"])
_HELPS = st.sampled_from(["", "Plain.", 'With "quotes".', "Back\\slash.", "Two\nlines."])


@st.composite
def _families(draw: st.DrawFn) -> list[Family]:
    out = []
    for name in draw(st.lists(_FAMILY_NAMES, min_size=1, max_size=6, unique=True)):
        family = Family(name, draw(st.sampled_from(["gauge", "counter"])), draw(_HELPS))
        for i in range(draw(st.integers(0, 2 * CHUNK_SERIES + 3))):
            family.series[f'{name}{{i="{i}"}} '] = draw(_VALUES) + "\n" if i < 3 else f"{i}\n"
        out.append(family)
    return out


@settings(max_examples=150, deadline=None)
@given(_families())
def test_the_render_path_gives_what_converting_the_text_gives(families: list[Family]) -> None:
    """Counters with a clashing base or a `_created` sibling, negative or NaN samples (in the
    first chunk or not), help with quotes, backslashes and newlines, families without series,
    and several chunks per family: the same bytes as `to_openmetrics` of the classic text."""
    text, count = render_text(families)
    rendered = render_chunks(families)
    body = render_openmetrics(rendered)
    assert body.plain == to_openmetrics(text).encode()
    assert body.series == count
    assert b"".join(rendered.chunks) == text.encode()  # the classic body is joined after


def test_a_cycle_makes_the_openmetrics_body_without_reading_the_text_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each new body while Prometheus asks for OpenMetrics used to be decoded, scanned and
    encoded again as 6 MB of text (~30 ms of the GIL at 10k series, some in single calls a
    scrape cannot interrupt): the render's own chunks make it now."""
    converted = []

    def refused(classic: bytes | str) -> str:
        converted.append(len(classic))
        raise AssertionError("the text was converted")

    async def run() -> tuple[bytes, bytes]:
        host = FakeHost(SelfTelemetry())
        cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0"})
        exporter = PrometheusExporter(
            make_settings("prometheus", Kind.EXPORTER, host.telemetry), cfg
        )
        await exporter.consume(batch(gpu(0), gpu(1), utilization=0.5))
        exporter.scraped(200, OPENMETRICS)  # Prometheus asked: pre-render from now on
        await exporter.consume(batch(gpu(0), gpu(1), utilization=0.75))
        monkeypatch.setattr(openmetrics, "to_openmetrics", refused)
        await exporter.refresh()
        exposition = exporter._exposition
        assert exposition.converted
        return exposition.classic.plain, exposition.openmetrics().plain

    classic, om = asyncio.run(run())
    assert converted == []
    monkeypatch.undo()
    assert om == to_openmetrics(classic).encode()
    check(classic)
