"""The `prometheus` exporter: keeps the latest point of every series and serves `/metrics`.

`consume` translates a batch into the series store and marks the body stale; a background
task re-renders the body (plain and gzip) whenever it is stale, and at least every few seconds
so the agent's self-telemetry and series expiry stay current when no batch arrives. Scrapes only
ever read the last rendered body.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from otelgpu.component import Host, Settings
from otelgpu.config.types import split_endpoint
from otelgpu.exporters.prometheus.auth import BasicAuthenticator, server_ssl_context
from otelgpu.exporters.prometheus.config import PrometheusExporterConfig
from otelgpu.exporters.prometheus.render import EMPTY, Body, encode, render_text
from otelgpu.exporters.prometheus.series import SeriesStore
from otelgpu.exporters.prometheus.server import MetricsServer
from otelgpu.exporters.prometheus.translate import Translator
from otelgpu.model import Batch
from otelgpu.tasks import cancel_and_wait

_MAX_REFRESH_INTERVAL = 5.0  # seconds between renders when no batch arrives

SCRAPES = "otelgpu_prometheus_scrapes_total"
SERIES = "otelgpu_prometheus_series"
EXPIRED = "otelgpu_prometheus_expired_series_total"
RELABELLED = "otelgpu_prometheus_relabelled_series_total"
TRUNCATED = "otelgpu_prometheus_truncated_label_values_total"


class PrometheusExporter:
    """Pull exporter: `consume` stores, a background task renders, aiohttp serves."""

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
        self._translator = Translator(config.naming, config.const_labels, config.shared_gpu_series)
        self._store = SeriesStore()
        self._body = EMPTY
        self._stale = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._server: MetricsServer | None = None
        self._authenticator: BasicAuthenticator | None = None
        # Our own thread for gzip: a component that parks the default executor's threads on a
        # hung socket must not delay the next body.
        self._executor: ThreadPoolExecutor | None = None
        self._host: Host | None = None
        self._refresh_failing = False
        self._rotated = clock()
        # Renders often enough that a series outlives `metric_expiration` by at most half of it.
        self.refresh_interval = min(_MAX_REFRESH_INTERVAL, config.metric_expiration / 2)

    @property
    def port(self) -> int:
        """The port `/metrics` listens on (the bound one when the endpoint asked for 0)."""
        return self._server.port if self._server else split_endpoint(self._config.endpoint)[1]

    @property
    def body(self) -> Body:
        """The body scrapes get right now."""
        return self._body

    async def start(self, host: Host) -> None:
        self._host = host
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"{self._id} render")
        authenticator = None
        if self._config.basic_auth is not None:
            authenticator = self._authenticator = BasicAuthenticator(self._config.basic_auth)
            await authenticator.prepare()
        ssl_context = server_ssl_context(self._config.tls) if self._config.tls else None
        await self.refresh()
        address, port = split_endpoint(self._config.endpoint)
        server = MetricsServer(
            host=address,
            port=port,
            current=lambda: self._body,
            on_scrape=self._count_scrape,
            ssl_context=ssl_context,
            authenticator=authenticator,
        )
        await server.start()
        self._server = server
        self._tasks = [
            asyncio.create_task(self._render_loop(), name=f"{self._id} render"),
            asyncio.create_task(self._timer(), name=f"{self._id} timer"),
        ]
        scheme = "https" if ssl_context else "http"
        endpoint, naming = self._config.endpoint, self._config.naming
        self._settings.logger.info("serving %s://%s/metrics (%s naming)", scheme, endpoint, naming)

    async def shutdown(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(*tasks)
        server, self._server = self._server, None
        if server is not None:
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
                "Series removed at once because their device or process reported other labels",
                exporter=self._id,
            )
        self._stale.set()

    async def refresh(self) -> None:
        """Expires old series and renders a new body now (the background task calls this)."""
        now = self._clock()
        expired = self._store.expire(now, self._config.metric_expiration)
        if now - self._rotated >= self._config.metric_expiration:
            self._translator.labels.rotate()  # forget label sets of long-gone series
            self._store.rotate()  # and the identities that stopped reporting
            self._rotated = now
        telemetry = self._settings.telemetry
        telemetry.count(EXPIRED, expired, "Series dropped by metric_expiration", exporter=self._id)
        cut = self._translator.labels.take_truncated()
        telemetry.count(TRUNCATED, cut, "Label values cut to 1024 characters", exporter=self._id)
        telemetry.set_gauge(SERIES, float(self._store.series_count()), exporter=self._id)
        families = list(self._store.families.values())
        if self._host is not None:
            own = self._translator.families(self._host.telemetry.collect(), now)
            # A pipeline that also routes self-telemetry here must not yield a family twice.
            families += [f for f in own if f.name not in self._store.families]
        text, count = render_text(families)
        if self._executor is None:
            self._body = encode(text, count)
        else:
            loop = asyncio.get_running_loop()
            self._body = await loop.run_in_executor(self._executor, encode, text, count)

    async def _render_loop(self) -> None:
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                await self.refresh()
            except Exception:  # never let rendering die: log once per failing streak
                if not self._refresh_failing:
                    self._settings.logger.exception("rendering /metrics failed")
                self._refresh_failing = True
            else:
                self._refresh_failing = False

    async def _timer(self) -> None:
        while True:
            await self._sleep(self.refresh_interval)
            self._stale.set()

    def _count_scrape(self, status: int) -> None:
        self._settings.telemetry.count(
            SCRAPES, 1, "Requests to /metrics", exporter=self._id, code=str(status)
        )
