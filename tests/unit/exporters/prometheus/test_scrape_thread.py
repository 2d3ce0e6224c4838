"""`/metrics` and `/health` are served from their own thread.

Served from the pipeline's event loop, scrapes would wait for any CPU the pipeline spends
(processors, ingest, OTLP encode). The body is rendered again only when something changed, and
`/health`, which dcgm-exporter's probes use on the same port, answers as dcgm-exporter does.

A blocked pipeline loop is simulated by a synchronous HTTP request made from the loop's own
thread: with the server on that loop it can never be answered (the client's timeout is only a
bound for the failing case).
"""

from __future__ import annotations

import gzip
import logging
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from email.message import Message

import pytest

from otelgpu.exporters.prometheus.demand import PLAIN_WANTED
from otelgpu.exporters.prometheus.exporter import RENDER_NICE, PrometheusExporter
from otelgpu.exporters.prometheus.render import Body
from otelgpu.exporters.prometheus.server import MetricsServer
from tests.fakes import FakeClock, FakeHost
from tests.peers.raw_http import raw
from tests.unit.exporters.prometheus.batches import batch, gpu
from tests.unit.exporters.prometheus.test_exporter import make

BOUND = 5.0  # seconds a request may take before the failing case gives up


def get(port: int, path: str, **headers: str) -> tuple[int, Message, bytes]:
    """A blocking GET: called from the test's event loop thread, it blocks that loop."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=BOUND) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.fixture
async def exporter(host: FakeHost, clock: FakeClock) -> AsyncIterator[PrometheusExporter]:
    exp = make(host.telemetry, clock, metric_expiration="1m")
    await exp.start(host)
    yield exp
    await exp.shutdown()


async def test_metrics_are_answered_while_the_pipeline_loop_is_blocked(
    exporter: PrometheusExporter,
) -> None:
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    status, headers, body = get(exporter.port, "/metrics")  # this loop is blocked meanwhile
    assert status == 200 and b"hw_gpu_utilization_ratio{" in body
    status, headers, zipped = get(exporter.port, "/metrics", **{"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(zipped) == body


async def test_health_is_answered_as_dcgm_exporter_does(exporter: PrometheusExporter) -> None:
    status, headers, body = get(exporter.port, "/health")
    assert (status, body) == (200, b"OK")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert get(exporter.port, "/nothing-here")[0] == 404


async def test_health_needs_no_password_metrics_does(host: FakeHost, clock: FakeClock) -> None:
    import bcrypt

    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    exp = make(host.telemetry, clock, basic_auth={"username": "u", "password_hash": hashed})
    await exp.start(host)
    try:
        assert get(exp.port, "/health")[:3:2] == (200, b"OK")
        assert get(exp.port, "/metrics")[0] == 401
    finally:
        await exp.shutdown()


async def test_nothing_changed_means_no_new_body(
    exporter: PrometheusExporter, clock: FakeClock
) -> None:
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    first = exporter.body
    await exporter.refresh()  # no batch, nothing expired, self-telemetry the same
    assert exporter.body is first
    await exporter.consume(batch(gpu(0), gpu(1)))
    await exporter.refresh()
    second = exporter.body
    assert second is not first and second.series > first.series
    await clock.advance(61)  # past metric_expiration: the GPUs' series go
    await exporter.refresh()
    assert b"hw_gpu_utilization_ratio{" not in exporter.body.plain


async def test_a_scrape_shows_in_the_next_body(exporter: PrometheusExporter) -> None:
    await exporter.refresh()
    get(exporter.port, "/metrics")
    await exporter.refresh()  # the scrape counter moved: a new body
    assert b'otelgpu_prometheus_scrapes_total{code="200"' in exporter.body.plain


async def test_the_render_thread_yields_the_cpu_to_scrapes(exporter: PrometheusExporter) -> None:
    """The gzip of a 10k body is tens of ms of CPU nobody waits for: its thread runs at a lower
    priority (nice) than the agent's, the thread serving scrapes at the agent's own."""
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()  # encodes on the render thread
    get(exporter.port, "/metrics")
    threads = {t.name.split(" :")[0]: t.native_id for t in threading.enumerate()}
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    render, serving = threads["prometheus render_0"], threads["otelgpu /metrics"]
    assert render is not None and serving is not None
    assert os.getpriority(os.PRIO_PROCESS, render) == min(19, own + RENDER_NICE)
    assert os.getpriority(os.PRIO_PROCESS, serving) == own


def _threads() -> set[str]:
    """Threads alive now but the test loop's default executor's (not the exporter's)."""
    return {t.name for t in threading.enumerate() if not t.name.startswith("asyncio_")}


async def test_shutdown_leaves_no_thread(host: FakeHost, clock: FakeClock) -> None:
    before = _threads()
    exp = make(host.telemetry, clock)
    await exp.start(host)
    assert any(name.startswith("otelgpu /metrics") for name in _threads() - before)
    await exp.shutdown()
    await exp.shutdown()
    assert _threads() <= before


BODY = Body(b"up 1\n", gzip.compress(b"up 1\n"), 1)


@pytest.fixture
async def server() -> AsyncIterator[MetricsServer]:
    srv = MetricsServer(host="127.0.0.1", port=0, current=lambda: BODY, on_scrape=lambda *_: None)
    await srv.start()
    yield srv
    await srv.stop()


async def test_head_other_methods_and_garbage(server: MetricsServer) -> None:
    head = raw(server.port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-length: 5" in head.lower()
    assert head.endswith(b"\r\n\r\n")  # no body after the head
    post = raw(
        server.port,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nab",
    )
    assert post.startswith(b"HTTP/1.1 405")
    assert b"\r\nallow: get, head\r\n" in post.lower()  # RFC 9110: a 405 names the methods
    assert raw(server.port, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400")
    endless_head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20000
    assert raw(server.port, endless_head).startswith(b"HTTP/1.1 431")
    big = b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"a" * 99999
    assert raw(server.port, big).startswith(b"HTTP/1.1 413")


async def test_keep_alive_serves_several_requests_on_one_connection(
    server: MetricsServer,
) -> None:
    one = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = raw(server.port, one + one + last)
    assert answer.count(b"HTTP/1.1 200") == 3 and answer.endswith(b"OK")


async def test_stop_with_open_connections_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    # The defect (found by tests/e2e SIGTERM): stopping cancelled the connection handlers, and
    # Python 3.11's start_server logs a cancelled handler as "Exception in callback" with a
    # traceback.
    srv = MetricsServer(host="127.0.0.1", port=0, current=lambda: BODY, on_scrape=lambda *_: None)
    await srv.start()
    idle = socket.create_connection(("127.0.0.1", srv.port), timeout=BOUND)
    kept = socket.create_connection(("127.0.0.1", srv.port), timeout=BOUND)
    kept.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while not answer.endswith(b"up 1\n"):  # the whole answer; the connection stays open
        answer += kept.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200")
    with caplog.at_level(logging.WARNING):
        await srv.stop()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert kept.recv(65536) == b"" and idle.recv(65536) == b""  # both closed by the stop
    idle.close()
    kept.close()


async def test_a_failed_render_is_retried_at_the_next_check(
    exporter: PrometheusExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otelgpu.exporters.prometheus import exporter as module

    real = module._encode
    monkeypatch.setattr(module, "_encode", lambda *_: 1 / 0)
    await exporter.consume(batch(gpu(0)))
    with pytest.raises(ZeroDivisionError):
        await exporter.refresh()
    monkeypatch.setattr(module, "_encode", real)
    await exporter.refresh()  # no new batch: still renders, the last one never got out
    assert b"hw_gpu_utilization_ratio{" in exporter.body.plain


async def test_plain_bytes_are_held_only_while_someone_scrapes_without_gzip(
    exporter: PrometheusExporter, clock: FakeClock
) -> None:
    """Prometheus always asks for gzip: at 10k series the plain body is 2.6 to 7 MB held for
    nothing. It is dropped until a plain scrape inflates one; then kept for PLAIN_WANTED."""
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    zipped = get(exporter.port, "/metrics", **{"Accept-Encoding": "gzip"})[2]
    assert not exporter.body.holds_plain  # gzip scrapes only: no plain bytes held
    status, _, plain = get(exporter.port, "/metrics")  # curl: inflated on demand
    assert status == 200 and plain == gzip.decompress(zipped)
    assert exporter.body.inflated
    await exporter.consume(batch(gpu(0), gpu(1)))
    await exporter.refresh()
    assert exporter.body.holds_plain and not exporter.body.inflated  # rendered with plain
    await clock.advance(PLAIN_WANTED + 1)
    await exporter.consume(batch(gpu(0)))
    await exporter.refresh()
    assert not exporter.body.holds_plain  # nobody asked for plain again: dropped again
    assert get(exporter.port, "/metrics")[2] == exporter.body.plain


def test_a_body_without_plain_bytes_inflates_them_once() -> None:
    text = b"".join(b'g{i="%d"} 1\n' % i for i in range(1000))
    body = Body(None, gzip.compress(text), 1000)
    assert not body.holds_plain and not body.inflated
    first = body.plain
    assert first == text and body.inflated and body.plain is first  # kept for its scrapes


def test_converting_to_openmetrics_is_not_taken_for_a_plain_scrape() -> None:
    """The first OpenMetrics scrape after a quiet period converts the classic body: that must
    not make the exporter hold plain classic bodies again for PLAIN_WANTED."""
    from otelgpu.exporters.prometheus.openmetrics import Exposition

    classic = Body(None, gzip.compress(b"# TYPE g gauge\ng 1\n"), 1)
    converted = Exposition(classic).openmetrics()
    assert converted.plain.endswith(b"# EOF\n")
    assert not classic.inflated and not classic.holds_plain
