"""The `prometheus` exporter: keeps the latest point of every series and serves `/metrics`.

`consume` translates a batch into the series store and marks the body stale; a background
task re-renders the body (plain and gzip) whenever it is stale. Every few seconds it also
expires old series and reads the agent's self-telemetry, and renders again only when one of
them changed the body: an idle agent does not re-render 10k series for nothing.

Scrapes are served from the server's own thread and only ever read the last published `Body`
(one immutable object, replaced by reference): pipeline work on the service's loop cannot
delay them. Only one body is kept: the text is dropped as soon as it is encoded, and the old
body as soon as the new one is published (a scrape still sending it keeps it until done).

Formats (`openmetrics.py`): each new body is rendered, here and off the scrape path, in the
formats scrapers asked for within the last `FORMAT_WANTED` seconds, and only those: the
OpenMetrics body (from the same chunks) when some scraper asked for it, the classic one when
some scraper asked for classic text or none asked for OpenMetrics (at start, the classic body
alone). Prometheus 2 and 3 ask for OpenMetrics, so an agent they scrape holds and gzips that
body alone. A scrape of a format the current body version lacks converts it once from the
held one (on the server's thread: an inflate and a gzip of the body, whose families' heads are
swapped without parsing it) and the next scrapes of that version reuse it; from the next
render on that format is rendered too, for `FORMAT_WANTED` seconds after its last scrape. A
reload's new instance goes on rendering OpenMetrics when the body it takes over had it.

On a reload (Settings.listeners set) the old instance parks its running server instead of
closing it, and the new one, when endpoint and TLS are unchanged, takes it over together with
the last body, which it keeps serving until its own store holds series (at most
`metric_expiration`): the port never closes and `/metrics` never restarts empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import ssl
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from otelgpu.component.component import Host, Settings
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.config.types import split_endpoint
from otelgpu.exporters.prometheus import dcgm
from otelgpu.exporters.prometheus.auth import BasicAuthenticator, server_ssl_context
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig, TLSServerConfig
from otelgpu.exporters.prometheus.demand import PLAIN, Demand, Formats
from otelgpu.exporters.prometheus.openmetrics import (
    Exposition,
    Layout,
    layout_of,
    render_openmetrics,
)
from otelgpu.exporters.prometheus.render import (
    EMPTY,
    Body,
    Rendered,
    body_of_chunks,
    render_chunks,
    render_text,
)
from otelgpu.exporters.prometheus.series import Family, SeriesStore
from otelgpu.exporters.prometheus.server import OPENMETRICS, MetricsServer
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.pdata.model import Batch

_MAX_REFRESH_INTERVAL = 5.0  # seconds between expiry / self-telemetry checks
# How much lower the render thread's CPU priority (nice) is than the agent's: the gzip of a 10k
# body is tens of milliseconds of CPU that no one waits for, while a scrape is waited for; on a
# busy node (or a container with little CPU) the scheduler should run the scrape first.
RENDER_NICE = 10

SCRAPES = "otelgpu_prometheus_scrapes_total"
SERIES = "otelgpu_prometheus_series"
EXPIRED = "otelgpu_prometheus_expired_series_total"
RELABELLED = "otelgpu_prometheus_relabelled_series_total"
TRUNCATED = "otelgpu_prometheus_truncated_label_values_total"


class PrometheusExporter:
    """Pull exporter: `consume` stores, a background task renders, a thread serves."""

    def __init__(
        self,
        settings: Settings,
        config: PrometheusExporterConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._settings = settings
        self._config = config
        self._id = str(settings.id)
        self._clock = clock
        self._sleep = sleep
        self._translator = Translator(
            config.naming,
            config.const_labels,
            config.shared_gpu_series,
            dcgm.label_names(config.dcgm_labels.hostname, pod_uid=config.dcgm_labels.pod_uid),
            config.namespace,
            names=settings.naming,  # the receivers' metrics in dcgm-exporter's names
            dra_labels=config.dcgm_labels.dra,
            info_series=config.device_info,
        )
        self._store = SeriesStore()
        self._exposition = Exposition(EMPTY, layout=Layout())
        self._demand = Demand()  # when scrapers last asked for each format
        self._stale = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._server: MetricsServer | None = None  # set once it listens (taken over or started)
        self._setup: Hashable = None
        self._inherited_until: float | None = None  # serving the previous instance's body until
        self._authenticator: BasicAuthenticator | None = None
        # Our own thread for gzip: a component that parks the default executor's threads on a
        # hung socket must not delay the next body.
        self._executor: ThreadPoolExecutor | None = None
        self._host: Host | None = None
        self._rendered: int | None = None  # the store's batch number the last body was made at
        self._own_text: str | None = None  # self-telemetry as the last body rendered it
        self._rotated = clock()
        # Renders often enough that a series outlives `metric_expiration` by at most half of it.
        self.refresh_interval = min(_MAX_REFRESH_INTERVAL, config.metric_expiration / 2)

    @property
    def port(self) -> int:
        """The port `/metrics` listens on (the bound one when the endpoint asked for 0)."""
        return self._server.port if self._server else split_endpoint(self._config.endpoint)[1]

    @property
    def body(self) -> Body:
        """The classic body scrapes get right now."""
        return self._exposition.classic

    @property
    def exposition(self) -> Exposition:
        """The body version scrapes get right now, in the formats it holds."""
        return self._exposition

    async def start(self, host: Host) -> None:
        self._host = host
        self._executor = ThreadPoolExecutor(
            1, thread_name_prefix=f"{self._id} render", initializer=_lower_priority
        )
        authenticator = None
        if self._config.basic_auth is not None:
            authenticator = self._authenticator = BasicAuthenticator(self._config.basic_auth)
            await authenticator.prepare()
        tls = self._config.tls
        ssl_context = server_ssl_context(tls) if tls else None
        self._setup = await asyncio.to_thread(_bind_setup, tls)
        kept = await self._listen(ssl_context, authenticator)
        self._tasks = [
            asyncio.create_task(self._render_loop(), name=f"{self._id} render"),
            asyncio.create_task(self._timer(), name=f"{self._id} timer"),
        ]
        scheme = "https" if ssl_context else "http"
        endpoint, naming = self._config.endpoint, self._config.naming
        how = " (listener kept through the reload)" if kept else ""
        self._settings.logger.info(
            "serving %s://%s/metrics (%s naming)%s", scheme, endpoint, naming, how
        )

    async def _listen(
        self, ssl_context: ssl.SSLContext | None, authenticator: BasicAuthenticator | None
    ) -> bool:
        """Takes over the server the previous instance parked (same endpoint and TLS), with the
        body it serves, or binds a new one. True when taken over. The server owns the
        authenticator from here on (and closes it)."""
        address, port = split_endpoint(self._config.endpoint)
        listeners = self._settings.listeners
        kept = None
        if listeners is not None:
            kept = await listeners.take(address, port, self._setup, MetricsServer)
        if kept is not None:
            self._server = kept  # first: if anything below fails, parked again
            self._exposition = kept.current()
            self._inherited_until = self._clock() + self._config.metric_expiration
            if self._exposition.converted:  # a scraper wanted OpenMetrics: render it for it
                self._demand.asked(OPENMETRICS, self._clock())
            self._authenticator = None
            await kept.serve(lambda: self._exposition, self.scraped, authenticator)
            await self.refresh()
            return True
        await self.refresh()  # before binding: the first scrape gets a body
        self._authenticator = None
        server = MetricsServer(
            host=address,
            port=port,
            current=lambda: self._exposition,
            on_scrape=self.scraped,
            ssl_context=ssl_context,
            authenticator=authenticator,
        )
        try:
            await server.start()
        except BaseException:  # not listening: nothing to park, the authenticator closed
            await server.stop()
            raise
        self._server = server
        return False

    async def shutdown(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(*tasks)
        server, self._server = self._server, None
        listeners = self._settings.listeners
        if server is not None:
            address, port = split_endpoint(self._config.endpoint)
            # Parked, it goes on answering with our last body until the next instance takes it.
            if listeners is None or not listeners.park(address, port, self._setup, server):
                await server.stop()
        # Both threads are gone when shutdown returns (a render or bcrypt check in progress is
        # waited for, off the event loop: each takes milliseconds).
        authenticator, self._authenticator = self._authenticator, None
        if authenticator is not None:
            await asyncio.to_thread(authenticator.close)
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    async def consume(self, batch: Batch) -> None:
        store = self._store
        before = store.replaced
        stored, dropped = self._translator.ingest(store, batch, self._clock())
        telemetry = self._settings.telemetry
        telemetry.exporter_result(self._id, stored, dropped)
        if store.replaced != before:
            telemetry.count(
                RELABELLED,
                store.replaced - before,
                exporter=self._id,
            )
        self._stale.set()  # the store's batch number moved: the body is stale

    async def refresh(self) -> None:
        """Expires old series and, when the body would differ from the last one, renders and
        publishes a new one (the background task calls this)."""
        now = self._clock()
        expired = self._store.expire(now, self._config.metric_expiration)
        if now - self._rotated >= self._config.metric_expiration:
            self._translator.labels.rotate()  # forget label sets of long-gone series
            self._store.rotate()  # and the identities that stopped reporting
            self._rotated = now
        telemetry = self._settings.telemetry
        telemetry.count(EXPIRED, expired, exporter=self._id)
        cut = self._translator.labels.take_truncated()
        telemetry.count(TRUNCATED, cut, exporter=self._id)
        telemetry.set_gauge(SERIES, float(self._store.series_count()), exporter=self._id)
        own = self._own_families(now)
        own_text = render_text(own)[0]  # ~100 lines: cheap next to the 10k it may spare
        inheriting = self._inherited_until is not None  # `_publish` decides when that ends
        batch = self._store.batch  # a batch consumed while this renders moves it again
        changed = batch != self._rendered
        if not (changed or expired or inheriting or own_text != self._own_text):
            return  # the body would be the same bytes
        if self._exposition.inflated():
            self._demand.asked(PLAIN, now)  # someone scrapes without gzip: keep plain bodies
        formats, plain = self._demand.formats(now), self._demand.plain(now)
        # Should it raise, `_rendered` keeps the last body's number: the next check renders.
        exposition = await self._render(own, formats, plain)
        self._rendered, self._own_text = batch, own_text
        self._publish(exposition, now)

    async def _render(self, own: list[Family], formats: Formats, plain: bool) -> Exposition:
        # In small chunks on this loop (no long hold of the GIL), gzipped in the render thread
        rendered = render_chunks([*self._store.families.values(), *own])
        text, openmetrics = formats.text, formats.openmetrics
        if self._executor is None:
            return _encode(rendered, text, openmetrics, plain)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, _encode, rendered, text, openmetrics, plain
        )

    def _own_families(self, now: float) -> list[Family]:
        if self._host is None:
            return []
        own = self._translator.families(self._host.telemetry.collect(), now)
        # A pipeline that also routes self-telemetry here must not yield a family twice.
        return [f for f in own if f.name not in self._store.families]

    def _publish(self, exposition: Exposition, now: float) -> None:
        if self._inherited_until is not None:
            # After a reload: the previous instance's last body is better than one without
            # the series the new pipeline has not delivered yet.
            if self._store.series_count() == 0 and now < self._inherited_until:
                return
            self._inherited_until = None
        self._exposition = exposition

    async def _render_loop(self) -> None:
        failing = False  # in a streak of failed renders (logged once per streak)
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                await self.refresh()
            except Exception:  # never let rendering die: log once per failing streak
                if not failing:
                    self._settings.logger.exception("rendering /metrics failed")
                failing = True
            else:
                failing = False

    async def _timer(self) -> None:
        while True:
            await self._sleep(self.refresh_interval)
            self._stale.set()

    def scraped(self, status: int, format_: str) -> None:
        """What the server reports after each answer to `/metrics`: its status and the format
        negotiated. Counted; a served one makes the bodies of the next `FORMAT_WANTED` seconds
        be rendered in its format. Called from the server's thread (`Demand.asked` is one
        dict store, atomic; telemetry is locked)."""
        if status == 200:
            self._demand.asked(format_, self._clock())
        self._settings.telemetry.count(
            SCRAPES,
            1,
            exporter=self._id,
            code=str(status),
            format=format_,
        )


def _encode(rendered: Rendered, text: bool, openmetrics: bool, plain: bool) -> Exposition:
    """The bodies of the rendered chunks (emptied: each chunk is freed once compressed; the
    gzip lets go of the GIL) in the formats asked for: the OpenMetrics one when `openmetrics`
    (first, from the same chunks), the classic one when `text`; gzipped, and their plain bytes
    too when `plain`. With the render's `Layout`, to convert to the other format if a scrape
    asks for it."""
    layout = layout_of(rendered)
    converted = None
    if openmetrics:
        converted = render_openmetrics(rendered, plain, layout, drain=not text)
    classic = body_of_chunks(rendered.chunks, rendered.series, plain) if text else None
    return Exposition(classic, converted, layout)


def _lower_priority() -> None:
    """Runs first in the render thread: lowers its own priority by `RENDER_NICE` (allowed
    without privileges; on Linux the nice value belongs to the thread, not the process)."""
    if sys.platform != "linux":  # elsewhere PRIO_PROCESS would name the whole process
        return
    tid = threading.get_native_id()
    with contextlib.suppress(OSError):  # best effort: rendering works at any priority
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + RENDER_NICE)


def _bind_setup(tls: TLSServerConfig | None) -> Hashable:
    """What a listening socket was bound with besides its address: the TLS settings and the
    bytes of their files (a renewed certificate at the same path must be served, so a kept
    listener with the old one does not match)."""
    if tls is None:
        return None
    digest = hashlib.sha256()
    for path in (tls.cert_file, tls.key_file, tls.client_ca_file):
        if path:
            with open(path, "rb") as file:
                digest.update(hashlib.sha256(file.read()).digest())
    return tls.model_dump_json(), digest.hexdigest()
