"""The `kubelet_stats` receiver: reads the kubelet's stats summary every interval.

Node, pod, container and volume usage become one ResourceMetrics each, carrying the
`k8s.*` resource attributes that `container_env` matches on, so kubelet series get the
same business labels as GPU series. A kubelet that is down, refuses the token or answers
something that is not a summary is counted, reported as the `kubelet` source being down
(logged once per change), and tried again next interval.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from otelgpu.component.clock import Clock
from otelgpu.component.component import Host, MetricsConsumer, Settings
from otelgpu.pdata.model import Batch
from otelgpu.receivers.kubelet_stats.client import (
    HttpKubeletClient,
    KubeletClient,
    KubeletError,
    TokenFile,
)
from otelgpu.receivers.kubelet_stats.config import AuthType, KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.summary import Reading, SummaryReader
from otelgpu.scraperhelper.scraper import ScrapeController

SOURCE = "kubelet"
# The controller's own bound sits above the request timeout, so a slow kubelet is reported
# by the client (as the source being down) rather than cancelled from outside.
TIMEOUT_MARGIN = 1.0


def make_client(config: KubeletStatsReceiverConfig, environ: Mapping[str, str]) -> KubeletClient:
    """The HTTP client for the configured endpoint; ValueError when no endpoint can be made."""
    token = None
    if config.effective_auth() is AuthType.SERVICE_ACCOUNT:
        token = TokenFile(config.token_file)
    return HttpKubeletClient(
        config.summary_url(environ),
        token=token,
        ca_file=config.effective_ca_file(),
        verify=not config.insecure_skip_verify,
        timeout=config.timeout,
    )


class KubeletStatsReceiver:
    """Polls `/stats/summary` and emits node, pod, container and volume usage."""

    def __init__(
        self,
        settings: Settings,
        config: KubeletStatsReceiverConfig,
        next: MetricsConsumer,
        *,
        client: KubeletClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._settings = settings
        self._config = config
        self._next = next
        self._clock = clock
        self.client = client
        self._reader = SummaryReader(config.enabled_metrics())
        self._controller: ScrapeController | None = None

    async def start(self, host: Host) -> None:
        """Resolves the endpoint (K8S_NODE_NAME) and starts the scrape loop."""
        if self.client is None:
            self.client = make_client(self._config, os.environ)
        self._settings.telemetry.register_source(SOURCE)
        self._controller = ScrapeController(
            settings=self._settings,
            scrape=self.scrape,
            next=self._next,
            interval=self._config.collection_interval,
            timeout=self._config.timeout + TIMEOUT_MARGIN,
            clock=self._clock,
        )
        await self._controller.start()

    async def scrape(self) -> Batch:
        """One summary read; empty (and the source reported down) when it fails."""
        assert self.client is not None, "start() first"
        try:
            body = await self.client.summary()
            # Parsing and converting a large node's summary takes long enough to stall the
            # event loop (and every scrape of /metrics): it runs in a worker thread.
            reading = await asyncio.to_thread(self._convert, body)
        except KubeletError as exc:
            self._failed(exc)
            return ()
        self._settings.telemetry.count(
            "otelgpu_kubelet_skipped_entries_total",
            reading.skipped,
            receiver=str(self._settings.id),
        )
        self._settings.telemetry.source_ok(SOURCE)
        return reading.batch

    def _convert(self, body: bytes) -> Reading:
        return self._reader.read(_decode(body), time.time_ns())

    def _failed(self, exc: KubeletError) -> None:
        self._settings.telemetry.count(
            "otelgpu_kubelet_errors_total",
            1,
            receiver=str(self._settings.id),
            reason=exc.reason,
        )
        self._settings.telemetry.source_failed(SOURCE, str(exc))

    async def shutdown(self) -> None:
        """Stops the loop and closes connections; idempotent."""
        controller, self._controller = self._controller, None
        if controller is not None:
            await controller.shutdown()
        if self.client is not None:
            await self.client.close()


def _decode(body: bytes) -> Mapping[str, Any]:
    try:
        summary = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise KubeletError("bad_json", f"the summary is not JSON: {exc}") from None
    if not isinstance(summary, dict):
        raise KubeletError("bad_json", "the summary is not a JSON object")
    return summary
