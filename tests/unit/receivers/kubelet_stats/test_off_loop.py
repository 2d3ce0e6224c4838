"""The summary (up to 256 MiB of JSON) is parsed and converted off the event loop, so a large
node's kubelet answer never stalls `/metrics` or the other pipelines."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.receivers.kubelet_stats import receiver as receiver_module
from tests.fakes import FakeClock, Sink
from tests.unit.receivers.kubelet_stats.conftest import make_receiver


async def test_the_summary_is_decoded_off_the_event_loop(
    telemetry: SelfTelemetry, sink: Sink, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []
    real = receiver_module._decode

    def recording(body: bytes) -> Any:
        threads.append(threading.current_thread())
        return real(body)

    monkeypatch.setattr(receiver_module, "_decode", recording)
    receiver, _ = make_receiver(telemetry, sink, clock, endpoint="http://127.0.0.1:9")
    batch = await receiver.scrape()
    assert batch and threads and threads[0] is not threading.main_thread()
