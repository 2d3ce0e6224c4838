"""Log lines and readiness reasons that carry a peer's error text are capped in length: a
peer (kubelet, runtime, OTLP endpoint) chooses that text and must not flood the log with it."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.component import Kind
from otelgpu.component.log_limits import PEER_TEXT_LIMIT
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.pdata.model import Batch
from otelgpu.scraperhelper.scraper import ScrapeController
from tests.conftest import make_settings
from tests.fakes import Sink

HUGE = "x" * 70_000
MAX_LINE = PEER_TEXT_LIMIT + 200


def test_a_source_error_is_capped_in_the_log_and_in_readiness(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        telemetry.source_failed("kubelet", f"HTTP 500: {HUGE}")
    assert caplog.records and all(len(r.getMessage()) < MAX_LINE for r in caplog.records)
    assert "more characters" in caplog.records[0].getMessage()
    assert all(len(reason) < MAX_LINE for reason in telemetry.sources_not_ready())


async def test_a_scrape_error_is_capped_in_the_log(
    telemetry: SelfTelemetry, caplog: pytest.LogCaptureFixture
) -> None:
    async def scrape() -> Batch:
        raise RuntimeError(HUGE)

    controller = ScrapeController(
        settings=make_settings("nvml", Kind.RECEIVER, telemetry),
        scrape=scrape,
        next=Sink(),
        interval=1.0,
    )
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        await controller.scrape_once()
    assert caplog.records and all(len(r.getMessage()) < MAX_LINE for r in caplog.records)
