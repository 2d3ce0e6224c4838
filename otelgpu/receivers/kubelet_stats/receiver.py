"""The `kubelet_stats` receiver: reads the kubelet's stats summary every interval.

Node, pod, container and volume usage become one ResourceMetrics each, carrying the
`k8s.*` resource attributes that `container_env` matches on, so kubelet series get the
same business labels as GPU series. A kubelet that is down, refuses the token or answers
something that is not a summary is counted, reported as the `kubelet` source being down
(logged once per change of state or of cause), and tried again next interval.

Each successful read is the whole truth about the node: what an earlier read reported and this
one does not (a pod deleted, or recreated under its name with a new uid; a container or volume
gone) is said to be gone at once (`ResourceMetrics` without metrics), so exporters drop its
series instead of serving them until they expire. After `stale_after_failed_reads` failed reads
in a row everything reported is said to be gone the same way: an outage never serves frozen
values.

Where the agent's `k8s_attributes` shares what the kubelet's pod-resources API lists, each
successful read is checked against it, and the pods the summary misses are counted
(`missed_pods`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Hashable, Mapping
from typing import Any

from otelgpu.component.clock import Clock
from otelgpu.component.component import Host, MetricsConsumer, Settings
from otelgpu.component.log_limits import capped
from otelgpu.pdata.model import Attributes, Batch, ResourceMetrics
from otelgpu.receivers.kubelet_stats.client import (
    HttpKubeletClient,
    KubeletClient,
    KubeletError,
    TokenFile,
)
from otelgpu.receivers.kubelet_stats.config import AuthType, KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.metrics import Group
from otelgpu.receivers.kubelet_stats.missed_pods import MissedPods
from otelgpu.receivers.kubelet_stats.summary import SCOPE, Gap, Reading, SummaryReader
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
        self._reader = SummaryReader(config.enabled_metrics(), config.metric_names)
        self._controller: ScrapeController | None = None
        self._reported: dict[Hashable, Attributes] = {}  # identity → resource, last read
        self._failed_reads = 0  # in a row
        self._cause = ""  # the reason of the last failure ("" after a success)
        self._gaps_logged: set[tuple[Group, Gap]] = set()
        self._missed = MissedPods(settings, judges_stats=self._reader.reads_pods)

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
        """One summary read: its series and the gone markers of what left, or, when it fails,
        nothing (the gone markers of everything once the failures reach the bound)."""
        assert self.client is not None, "start() first"
        bound = self._config.stale_after_failed_reads
        if self._failed_reads >= bound and self._reported:
            # The last reads ended without a word (cut off by the scrape controller's bound):
            # this interval says the series are stale instead of trying once more.
            return self._stale()
        self._missed.judge()  # the reads before this one, once pod-resources answered since
        # Counted before reading: a read the controller cancels counts as failed too.
        self._failed_reads += 1
        mark = self._missed.began()
        try:
            body = await self.client.summary()
            # Parsing and converting a large node's summary takes long enough to stall the
            # event loop (and every scrape of /metrics): it runs in a worker thread.
            reading = await asyncio.to_thread(self._convert, body)
        except KubeletError as exc:
            self._failed(exc)
            return self._stale() if self._failed_reads >= bound else ()
        self._failed_reads, self._cause = 0, ""
        self._count_gaps(reading)
        self._missed.ended(mark, reading.pods)
        self._settings.telemetry.source_ok(SOURCE)
        return (*reading.resources, *self._replace_set(reading.resources))

    def _convert(self, body: bytes) -> Reading:
        return self._reader.read(_decode(body), time.time_ns())

    def _replace_set(self, resources: list[ResourceMetrics]) -> list[ResourceMetrics]:
        """Makes `resources` the reported set; the gone markers of what it no longer holds."""
        before = self._reported
        self._reported = {rm.identity: rm.resource for rm in resources}
        return [_gone(i, r) for i, r in before.items() if i not in self._reported]

    def _stale(self) -> Batch:
        """The gone markers of everything reported: the kubelet has not answered for
        `stale_after_failed_reads` reads, so its last values are no longer the node's."""
        reported, self._reported = self._reported, {}
        if reported:
            self._settings.logger.warning(
                "%d failed reads of the kubelet in a row: its %d series sets are stale, "
                "dropped until it answers again",
                self._failed_reads,
                len(reported),
            )
        return tuple(_gone(i, r) for i, r in reported.items())

    def _count_gaps(self, reading: Reading) -> None:
        receiver = str(self._settings.id)
        for (group, gap), n in reading.gaps.items():
            self._settings.telemetry.count(
                "otelgpu_kubelet_gaps_total",
                n,
                receiver=receiver,
                entity=group.value,
                reason=gap.value,
            )
            if (group, gap) not in self._gaps_logged:  # once per entity and reason
                self._gaps_logged.add((group, gap))
                level = logging.INFO if gap is Gap.NO_STATS_YET else logging.WARNING
                self._settings.logger.log(
                    level,
                    "kubelet summary gap %s (%s), first seen: %s%s",
                    gap.value,
                    group.value,
                    reading.examples[(group, gap)],
                    _GAP_MEANS[gap],
                )

    def _failed(self, exc: KubeletError) -> None:
        self._settings.telemetry.count(
            "otelgpu_kubelet_errors_total",
            1,
            receiver=str(self._settings.id),
            reason=exc.reason,
        )
        if self._cause and exc.reason != self._cause:  # still down, for another cause
            self._settings.logger.warning(
                "the kubelet still fails, now for another cause (%s, was %s): %s",
                exc.reason,
                self._cause,
                capped(str(exc)),
            )
        self._cause = exc.reason
        self._settings.telemetry.source_failed(SOURCE, str(exc))

    async def shutdown(self) -> None:
        """Stops the loop and closes connections; idempotent."""
        controller, self._controller = self._controller, None
        if controller is not None:
            await controller.shutdown()
        if self.client is not None:
            await self.client.close()


_GAP_MEANS = {
    Gap.EMPTY_NAME: "; skipped (logged once)",
    Gap.NO_STATS_YET: "; no series until the kubelet has a sample (logged once)",
    Gap.NO_NODE_NAME: "; series without k8s.node.name (logged once)",
    Gap.NO_UID: "; the pod is told apart by namespace and name (logged once)",
    Gap.DUPLICATE_POD: "; the pod that started last is reported (logged once)",
}


def _gone(identity: Hashable, resource: Attributes) -> ResourceMetrics:
    return ResourceMetrics(resource=resource, metrics=(), scope=SCOPE, identity=identity)


def _decode(body: bytes) -> Mapping[str, Any]:
    try:
        summary = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise KubeletError("bad_json", f"the summary is not JSON: {exc}") from None
    if not isinstance(summary, dict):
        raise KubeletError("bad_json", "the summary is not a JSON object")
    return summary
