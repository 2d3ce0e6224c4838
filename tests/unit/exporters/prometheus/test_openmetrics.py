"""OpenMetrics 1.0 made of the classic render's sample lines: every body must pass
prometheus_client's strict OpenMetrics parser and carry the same samples (names, labels,
values) as the classic text, and either format is the other with its families' heads swapped."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable
from typing import get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_classic

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.openmetrics import Exposition, layout_of, render_openmetrics
from otelgpu.exporters.prometheus.render import CHUNK_SERIES, Body, render_chunks, render_text
from otelgpu.exporters.prometheus.series import Family, FamilyType
from otelgpu.exporters.prometheus.server import OPENMETRICS
from otelgpu.exporters.prometheus.targets import Targets
from otelgpu.pdata.model import Batch, Metric, MetricKind, NumberDataPoint, ResourceMetrics
from otelgpu.receivers.nvml.dcgm_names import NAMING
from tests.fakes import FakeHost
from tests.unit.exporters.prometheus.batches import batch, gpu, held_by
from tests.unit.exporters.prometheus.translators import nvml_settings

Sample = tuple[str, tuple[tuple[str, str], ...], str]


def samples(families: Iterable[object]) -> set[Sample]:
    out: set[Sample] = set()
    for family in families:
        for s in family.samples:  # type: ignore[attr-defined]
            value = "NaN" if math.isnan(s.value) else repr(float(s.value))
            out.add((s.name, tuple(sorted(s.labels.items())), value))
    return out


def body_of(naming: str, *batches: Batch, with_self_telemetry: bool = True) -> tuple[bytes, bytes]:
    """The classic and OpenMetrics bodies an exporter renders for `batches` (and its
    self-telemetry), as a Prometheus-scraped exporter renders both."""

    async def render() -> tuple[bytes, bytes]:
        host = FakeHost(SelfTelemetry())
        cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0", "naming": naming})
        exporter = PrometheusExporter(
            nvml_settings("prometheus", Kind.EXPORTER, host.telemetry), cfg
        )
        if with_self_telemetry:
            await exporter.start(host)
        try:
            exporter.scraped(200, "openmetrics")  # a labelled self-metric counter
            exporter.scraped(200, "text")  # and both formats wanted: both rendered
            for b in batches:
                await exporter.consume(b)
            await exporter.refresh()
            exposition = exporter.exposition
            assert exposition.holds_classic and exposition.converted  # both rendered
            return exposition.classic.plain, exposition.openmetrics().plain
        finally:
            if with_self_telemetry:
                await exporter.shutdown()

    return asyncio.run(render())


def check(classic: bytes, om: bytes) -> dict[str, str]:
    """Parses both formats, compares their samples; the OpenMetrics family types by name."""
    assert om.endswith(b"# EOF\n")
    families = list(parse_om(om.decode()))
    # untyped: prometheus_client's classic parser would append `_total` to counter samples
    reference = re.sub(r"^(# TYPE \S+) counter$", r"\1 untyped", classic.decode(), flags=re.M)
    assert samples(families) == samples(parse_classic(reference))
    return {f.name: f.type for f in families}


def openmetrics_of(families: list[Family]) -> str:
    """The OpenMetrics text of `families`, rendered."""
    return render_openmetrics(render_chunks(families)).plain.decode()


def family(name: str, type_: str, help_: str, *lines: tuple[str, str]) -> Family:
    out = Family(name, type_, help_)
    for prefix, value in lines:
        out.write(0, prefix, value + "\n", 0)
    return out


WEIRD_POD = 'tr"ain\\er\nx}{ y=1'


def test_otel_naming_counters_drop_total_in_metadata_only() -> None:
    classic, body = body_of("otel", batch(gpu(0, **held_by(WEIRD_POD)), gpu(1)))
    types = check(classic, body)
    om = body.decode()
    assert types["hw_energy_joules"] == "counter"
    assert "# TYPE hw_energy_joules counter\n" in om and "\nhw_energy_joules_total{" in om
    assert types["hw_gpu_utilization_ratio"] == "gauge"
    assert types["otelgpu_prometheus_scrapes"] == "counter"
    assert 'format="openmetrics"' in om


def test_dcgm_counters_keep_their_names_as_unknown() -> None:
    classic, body = body_of("dcgm", batch(gpu(0, **held_by(WEIRD_POD))))
    types = check(classic, body)
    om = body.decode()
    assert types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "unknown"
    assert "\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" in om


def test_every_family_the_translation_makes_is_a_gauge_or_a_counter() -> None:
    """Why OpenMetrics needs no histogram or summary heads: the model has gauges and sums only,
    and every target of either naming (each dcgm field, split ones and declared types included)
    is a gauge or a counter (`series.FamilyType`, which mypy holds every family to)."""
    assert set(MetricKind) == {MetricKind.GAUGE, MetricKind.SUM}
    assert get_args(FamilyType) == ("gauge", "counter")
    types = set()
    for naming in ("otel", "dcgm"):
        targets = Targets(naming, "", NAMING)  # type: ignore[arg-type]
        for name, names in NAMING.dcgm.items():
            for kind, monotonic in [(k, m) for k in MetricKind for m in (False, True)]:
                metric = Metric(
                    name=name, unit=names.unit, description="d", kind=kind, points=(),
                    monotonic=monotonic,
                )  # fmt: skip
                for value in names.splits or [None]:
                    attributes = {names.split_by: value} if names.split_by else {}
                    types.add(targets.of_point(metric, attributes).type)
                types.add(targets.of(metric).type)
    assert types == {"gauge", "counter"}


def test_help_quotes_are_escaped() -> None:
    om = openmetrics_of(
        [
            family("a_total", "counter", 'say "hi" \\ back\nslash', ("a_total ", "3")),
            family("g", "gauge", "", ('g{l="v\\""} ', "-1.5e+20")),
        ]
    )
    assert om == (
        "# TYPE a counter\n"
        '# HELP a say \\"hi\\" \\\\ back\\nslash\n'
        "a_total 3\n"
        "# TYPE g gauge\n"
        'g{l="v\\""} -1.5e+20\n'
        "# EOF\n"
    )
    [a, g] = parse_om(om)
    assert a.documentation == 'say "hi" \\ back\nslash'
    assert g.type == "gauge"


def test_counters_that_cannot_be_openmetrics_counters_become_unknown() -> None:
    families = [
        family("c_total", "counter", "", ("c_total ", "1")),  # family names clash
        family("c", "gauge", "", ("c ", "2")),
        family("n_total", "counter", "", ("n_total ", "NaN")),  # counters cannot be NaN
        family("m_total", "counter", "", ("m_total ", "-1")),  # nor negative
        family("k_total", "counter", "", ("k_total ", "3")),  # k's own `_created`
        family("k_created", "gauge", "", ("k_created ", "4")),
    ]
    classic = render_text(families)[0].encode()
    assert check(classic, openmetrics_of(families).encode()) == {
        "c_total": "unknown",
        "c": "gauge",
        "n_total": "unknown",
        "m_total": "unknown",
        "k_total": "unknown",
        "k_created": "gauge",
    }


def test_an_empty_render_is_just_eof() -> None:
    assert openmetrics_of([]) == "# EOF\n"
    assert openmetrics_of([Family("g", "gauge", "")]) == "# EOF\n"  # no series: left out


def test_exposition_converts_once_and_keeps_it() -> None:
    plain = b"# TYPE g gauge\ng 1\n"
    exposition = Exposition(Body(plain, b"", 1))
    assert not exposition.converted
    first = exposition.openmetrics()
    assert exposition.converted and exposition.openmetrics() is first
    # A body made by hand has no render's layout: its text as it is, then `# EOF`.
    assert first.plain == b"# TYPE g gauge\ng 1\n# EOF\n" and first.series == 1


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
    check(*body_of(naming, b, with_self_telemetry=False))


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
        made = Family(name, draw(st.sampled_from(["gauge", "counter"])), draw(_HELPS))
        for i in range(draw(st.integers(0, 2 * CHUNK_SERIES + 3))):
            value = draw(_VALUES) + "\n" if i < 3 else f"{i}\n"
            made.write(0, f'{name}{{i="{i}"}} ', value, 0)
        out.append(made)
    return out


@settings(max_examples=150, deadline=None)
@given(_families())
def test_the_openmetrics_render_is_valid_and_swaps_heads_both_ways(families: list[Family]) -> None:
    """Counters with a clashing base or a `_created` sibling, negative or NaN samples (in the
    first chunk or not), help with quotes, backslashes and newlines, families without series,
    and several chunks per family: valid OpenMetrics with the classic text's samples, each
    format the other with its heads swapped (`Layout`)."""
    text, count = render_text(families)
    rendered = render_chunks(families)
    layout = layout_of(rendered)
    body = render_openmetrics(rendered, True, layout)
    assert body.series == count
    assert b"".join(rendered.chunks) == text.encode()  # the classic body is joined after
    check(text.encode(), body.plain)
    assert b"".join(layout.openmetrics(text.encode())) == body.plain
    assert b"".join(layout.classic(body.plain)) == text.encode()


def test_a_cycle_makes_both_bodies_of_one_render() -> None:
    """While Prometheus asks for OpenMetrics and another scraper for classic text, each update
    renders both from the same chunks; converting either with the render's layout gives the
    other, byte for byte."""

    async def run() -> Exposition:
        host = FakeHost(SelfTelemetry())
        cfg = PrometheusExporterConfig.model_validate({"endpoint": "127.0.0.1:0"})
        exporter = PrometheusExporter(
            nvml_settings("prometheus", Kind.EXPORTER, host.telemetry), cfg
        )
        await exporter.consume(batch(gpu(0), gpu(1), utilization=0.5))
        exporter.scraped(200, OPENMETRICS)  # Prometheus asked: pre-render from now on
        exporter.scraped(200, "text")
        await exporter.consume(batch(gpu(0), gpu(1), utilization=0.75))
        await exporter.refresh()
        return exporter.exposition

    exposition = asyncio.run(run())
    assert exposition.converted and exposition.holds_classic
    classic, om = exposition.classic.plain, exposition.openmetrics().plain
    check(classic, om)
    converted = Exposition(None, exposition.openmetrics(), exposition._layout)
    assert converted.classic.plain == classic
    assert Exposition(exposition.classic, None, exposition._layout).openmetrics().plain == om


def test_an_exposition_says_inflated_only_once_a_plain_request_inflated_a_body() -> None:
    """What tells the exporter to hold plain bodies again: a body that holds its plain bytes,
    or one not asked for plain text yet, is no such request."""
    from otelgpu.confighttp.compression import gzip_bytes

    plain = b"# TYPE a gauge\na 1\n"
    assert not Exposition(Body(plain, gzip_bytes(plain), 1)).inflated()
    gzip_only = Exposition(Body(None, gzip_bytes(plain), 1))
    assert not gzip_only.inflated()
    assert gzip_only.classic.plain == plain
    assert gzip_only.inflated() is True
