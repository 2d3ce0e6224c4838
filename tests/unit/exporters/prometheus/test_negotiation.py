"""Content negotiation on `/metrics` and the OpenMetrics body's lifecycle in the exporter."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om

from otelgpu.exporters.prometheus.demand import FORMAT_WANTED
from otelgpu.exporters.prometheus.exporter import PrometheusExporter
from otelgpu.exporters.prometheus.server import (
    NEGOTIATED,
    OPENMETRICS,
    TEXT,
    accepts_gzip,
    negotiate,
)
from tests.fakes import FakeClock, FakeHost
from tests.unit.exporters.prometheus.batches import batch, gpu
from tests.unit.exporters.prometheus.test_exporter import make

# What the real servers send (research-16, seen on the wire).
PROMETHEUS_3 = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
    "application/openmetrics-text;version=0.0.1;q=0.5,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)
PROMETHEUS_2 = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
OM = "application/openmetrics-text; version=1.0.0; charset=utf-8"
CLASSIC = "text/plain; version=0.0.4; charset=utf-8"


@pytest.mark.parametrize(
    ("accept", "answer"),
    [
        (PROMETHEUS_3, (OPENMETRICS, f"{OM}; escaping=allow-utf-8")),
        (PROMETHEUS_2, (OPENMETRICS, f"{OM}; escaping=underscores")),
        ("", (TEXT, CLASSIC)),
        ("*/*", (TEXT, CLASSIC)),
        ("text/plain", (TEXT, CLASSIC)),
        ("garbage;;;,,", (TEXT, CLASSIC)),
        ("application/json", (TEXT, CLASSIC)),
        ("application/openmetrics-text;q=0, */*;q=0.1", (TEXT, CLASSIC)),
        ("application/openmetrics-text;q=bad", (TEXT, CLASSIC)),
        ("application/openmetrics-text;version=2.0.0", (TEXT, CLASSIC)),
        ("Application/OpenMetrics-Text", (OPENMETRICS, f"{OM}; escaping=underscores")),
        (
            "application/openmetrics-text; version=0.0.1",
            (OPENMETRICS, OM.replace("1.0.0", "0.0.1") + "; escaping=underscores"),
        ),
        (
            "application/openmetrics-text;version=1.0.0;escaping=dots",
            (OPENMETRICS, f"{OM}; escaping=underscores"),  # `dots` would rename every `_`
        ),
        (
            "text/plain;version=1.0.0;escaping=allow-utf-8",
            (TEXT, "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8"),
        ),
        ("text/plain;q=0.9, application/openmetrics-text;q=0.5", (TEXT, CLASSIC)),
        ("text/plain, application/openmetrics-text", (TEXT, CLASSIC)),  # first among equals
        (
            "*/*;q=0.9, application/openmetrics-text;q=1",
            (OPENMETRICS, f"{OM}; escaping=underscores"),
        ),
    ],
)
def test_negotiate(accept: str, answer: tuple[str, str]) -> None:
    assert negotiate(accept) == answer
    assert negotiate(accept) == answer  # the kept answer is the same


def test_what_is_kept_of_negotiations_is_bounded() -> None:
    """Answers are kept per header value (a scraper repeats its headers): a client that sends
    a new one each time must not grow what the agent holds."""
    for n in range(NEGOTIATED * 4):
        assert negotiate(f"application/openmetrics-text;q=0.{n + 1}")[0] == OPENMETRICS
        assert accepts_gzip(f"gzip;q=0.{n + 1}")
    assert negotiate.cache_info().currsize <= NEGOTIATED
    assert accepts_gzip.cache_info().currsize <= NEGOTIATED
    assert NEGOTIATED <= 256
    assert negotiate(PROMETHEUS_3) == (OPENMETRICS, f"{OM}; escaping=allow-utf-8")
    assert not accepts_gzip("gzip;q=0")


@pytest.fixture
async def exporter(host: FakeHost, clock: FakeClock) -> AsyncIterator[PrometheusExporter]:
    exp = make(host.telemetry, clock, metric_expiration="1h")
    await exp.start(host)
    yield exp
    await exp.shutdown()


async def get(
    exp: PrometheusExporter, accept: str | None, encoding: str = "identity"
) -> tuple[str, bytes]:
    headers = {"Accept-Encoding": encoding}
    if accept is not None:
        headers["Accept"] = accept
    url = f"http://127.0.0.1:{exp.port}/metrics"
    async with (
        aiohttp.ClientSession(auto_decompress=False, skip_auto_headers=["Accept"]) as session,
        session.get(url, headers=headers) as r,
    ):
        assert r.status == 200
        return r.headers["Content-Type"], await r.read()


async def test_prometheus_3_gets_openmetrics_plain_and_gzip(exporter: PrometheusExporter) -> None:
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    content_type, plain = await get(exporter, PROMETHEUS_3)
    assert content_type == f"{OM}; escaping=allow-utf-8"
    families = {f.name: f for f in parse_om(plain.decode())}
    assert families["hw_energy_joules"].type == "counter"
    assert families["hw_energy_joules"].samples[0].name == "hw_energy_joules_total"
    _, zipped = await get(exporter, PROMETHEUS_3, "gzip")
    assert gzip.decompress(zipped) == plain
    content_type, classic = await get(exporter, None)
    assert content_type == CLASSIC and classic == exporter.body.plain
    assert b"# TYPE hw_energy_joules_total counter" in classic and b"# EOF" not in classic


async def test_scrapes_are_counted_by_format(exporter: PrometheusExporter) -> None:
    await get(exporter, PROMETHEUS_2)
    await get(exporter, "*/*")
    await get(exporter, "*/*")
    await exporter.refresh()
    body = exporter.body.plain
    assert b'scrapes_total{code="200",exporter="prometheus",format="openmetrics"} 1\n' in body
    assert b'scrapes_total{code="200",exporter="prometheus",format="text"} 2\n' in body


async def test_openmetrics_is_prerendered_only_while_asked_for(
    exporter: PrometheusExporter, clock: FakeClock
) -> None:
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    assert not exporter.exposition.converted  # nobody asked: one body held
    await get(exporter, "*/*")
    await exporter.refresh()
    assert not exporter.exposition.converted
    # The first OpenMetrics scrape converts the body it finds, once, and keeps it.
    first = exporter.exposition
    _, plain = await get(exporter, PROMETHEUS_3)
    assert exporter.exposition is first and first.converted
    assert first.openmetrics().plain == plain
    # From then on each new body is converted by the exporter before it is published.
    await exporter.consume(batch(gpu(0), gpu(1)))
    await exporter.refresh()
    second = exporter.exposition
    assert second is not first and second.converted
    assert b"hw_power_watts{" in second.openmetrics().plain
    await exporter.refresh()
    assert exporter.exposition is second  # nothing changed: no new body
    # Quiet for longer than FORMAT_WANTED: new bodies are classic only again.
    clock.now += FORMAT_WANTED + 1
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    assert exporter.exposition is not second and not exporter.exposition.converted


@pytest.mark.parametrize(
    ("accept_encoding", "gzip"),
    [
        ("gzip", True),
        ("*", True),
        ("br, GZIP;q=0.5", True),
        ("gzip;q=0", False),
        ("gzip;q=high", True),  # a weight that is no number is no refusal
        ("identity", False),
        ("br, deflate", False),
        ("", False),
    ],
)
def test_gzip_is_sent_only_when_the_scraper_accepts_it(accept_encoding: str, gzip: bool) -> None:
    assert accepts_gzip(accept_encoding) is gzip
