"""Fixtures shared by every test: telemetry, settings for a component, a host, a clock, a sink."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest

from otelgpu.component.component import ComponentID, Kind, Settings
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.nvml.dcgm_names import NAMING
from tests.fakes import FakeClock, FakeHost, Sink


@pytest.fixture(autouse=True)
def _otelgpu_logger_restored() -> Iterator[None]:
    """A test that runs the Agent in this process has `otelgpu.service.logs.configure` take over the
    `otelgpu` logger (its own handler, no propagation): put it back, so later tests' caplog
    still sees the records."""
    logger = logging.getLogger("otelgpu")
    saved = (list(logger.handlers), logger.propagate, logger.level)
    yield
    logger.handlers[:] = saved[0]
    logger.propagate, logger.level = saved[1], saved[2]


@pytest.fixture(autouse=True)
def _heap_thawed() -> Iterator[None]:
    """An Agent started in this process freezes the heap (otelgpu/service/heap.py); thaw it after the
    test so the test run's own garbage is still collected."""
    yield
    gc.unfreeze()


@pytest.fixture
def telemetry() -> SelfTelemetry:
    return SelfTelemetry()


@pytest.fixture
def host(telemetry: SelfTelemetry) -> FakeHost:
    return FakeHost(telemetry)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sink() -> Sink:
    return Sink()


def make_settings(id: str, kind: Kind, telemetry: SelfTelemetry) -> Settings:
    """Settings for a component under test, with the naming table the agent's graph hands over."""
    return Settings.for_component(ComponentID.parse(id), kind, telemetry, naming=NAMING)
