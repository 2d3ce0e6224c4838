"""Fixtures shared by every test: telemetry, settings for a component, a host, a clock, a sink."""

from __future__ import annotations

import pytest

from otelgpu.component import ComponentID, Kind, Settings
from otelgpu.telemetry import SelfTelemetry
from tests.fakes import FakeClock, FakeHost, Sink


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
    """Settings for a component under test."""
    return Settings.for_component(ComponentID.parse(id), kind, telemetry)
