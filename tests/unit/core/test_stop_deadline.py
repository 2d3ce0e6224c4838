"""SIGTERM with a stuck OTLP endpoint: every unsent point of every exporter is counted and
logged before the agent exits, whatever `timeout` and `drain_timeout` say (R9).

The defect: exporters were shut down one after the other, each draining up to its own
`drain_timeout`, and the agent's 25 s deadline cancelled the service half way: with four
exporters and `timeout: 60s`, only the first one's unsent points were ever counted.
Loopback only: the stuck endpoint accepts connections and never answers.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator

import pytest

from otelgpu.component.registry import Registry
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.loader import load
from otelgpu.config.schema import AgentConfig, validate
from otelgpu.service.agent import Agent
from otelgpu.service.builtins import builtin_factories
from otelgpu.service.service import Service
from tests.components import sample_factory

EXPORTERS = ["otlp/a", "otlp/b", "otlp_http/c", "otlp_http/d"]
PIPELINE = """\
receivers:
  sample: {{interval: 1h, series: 2}}
exporters:
  otlp/a: {{endpoint: "127.0.0.1:{port}", tls: {{insecure: true}}, timeout: 60s}}
  otlp/b: {{endpoint: "127.0.0.1:{port}", tls: {{insecure: true}}, timeout: 60s}}
  otlp_http/c: {{endpoint: "http://127.0.0.1:{port}", timeout: 60s}}
  otlp_http/d: {{endpoint: "http://127.0.0.1:{port}", timeout: 60s}}
service:
  pipelines:
    metrics:
      receivers: [sample]
      exporters: [otlp/a, otlp/b, otlp_http/c, otlp_http/d]
"""


class StuckEndpoint:
    """A TCP endpoint that accepts and reads but never answers; it tells when `n` connections
    have sent something (each exporter opens its one connection when it sends its first
    request: gRPC connects lazily, and one consumer holds one HTTP request in flight)."""

    def __init__(self) -> None:
        self.port = 0
        self.writers: list[asyncio.StreamWriter] = []
        self._talking = 0
        self._changed = asyncio.Event()

    async def hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        if await reader.read(65536):
            self._talking += 1
            self._changed.set()
        while await reader.read(65536):
            pass

    async def reached(self, connections: int) -> None:
        """Returns once `connections` connections have sent bytes (fails after 10 s)."""
        async with asyncio.timeout(10):  # a safety net: the event is what is waited on
            while self._talking < connections:
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def stuck() -> AsyncIterator[StuckEndpoint]:
    endpoint = StuckEndpoint()
    server = await asyncio.start_server(endpoint.hold, "127.0.0.1", 0)
    endpoint.port = server.sockets[0].getsockname()[1]
    yield endpoint
    server.close()
    for writer in endpoint.writers:
        writer.close()


def _registry() -> Registry:
    return Registry([*builtin_factories(), sample_factory])


def _config(port: int) -> AgentConfig:
    return validate(load([("p.yaml", PIPELINE.format(port=port))], environ={}), _registry())


async def _feed(service: Service, scrapes: int, stuck: StuckEndpoint) -> None:
    """`scrapes` more batches of 4 points to every exporter (one came at start), then waits
    until every exporter's first request has reached the stuck endpoint."""
    assert service.graph is not None
    receiver = next(iter(service.graph.receivers.values()))
    for _ in range(scrapes):
        await receiver.controller.scrape_once()  # type: ignore[attr-defined]
    await stuck.reached(len(EXPORTERS))


def _unsent_lines(records: list[logging.LogRecord]) -> dict[str, int]:
    found = {}
    for record in records:
        match = re.match(r"shutdown: (\d+) points could not be sent", record.getMessage())
        if match:
            found[record.name.removeprefix("otelgpu.exporter.")] = int(match[1])
    return found


def _failed(telemetry: SelfTelemetry) -> dict[str, float]:
    return {
        str(p.attributes["exporter"]): p.value
        for m in telemetry.collect().metrics
        if m.name == "otelgpu_exporter_failed_points_total"
        for p in m.points
    }


async def test_service_deadline_counts_every_exporters_unsent_points(
    stuck: StuckEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    telemetry = SelfTelemetry()
    service = Service(_config(stuck.port), _registry(), telemetry)
    await service.start()
    await _feed(service, 2, stuck)
    deadline = asyncio.get_running_loop().time() + 0.3
    with caplog.at_level(logging.WARNING, logger="otelgpu"):
        await service.shutdown(deadline=deadline)
    assert _failed(telemetry) == {e: 12 for e in EXPORTERS}
    assert _unsent_lines(caplog.records) == {e: 12 for e in EXPORTERS}


@pytest.fixture
def agent_logs() -> Iterator[list[logging.LogRecord]]:
    """The agent configures the `otelgpu` logger itself (no propagation): records are taken
    from a handler added after its start, and the logger is put back afterwards."""
    root = logging.getLogger("otelgpu")
    saved = (list(root.handlers), root.level, root.propagate)
    records: list[logging.LogRecord] = []
    yield records
    root.handlers[:], root.propagate = saved[0], saved[2]
    root.setLevel(saved[1])


class _Keep(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.WARNING)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_agent_stop_counts_and_logs_every_exporters_unsent_points(
    stuck: StuckEndpoint, agent_logs: list[logging.LogRecord]
) -> None:
    config = _config(stuck.port)
    agent = Agent(lambda: config, _registry(), stop_timeout=1.5)
    running = asyncio.create_task(agent.run(config))
    for _ in range(200):  # bounded: the service starts in well under a second
        if agent.service is not None:
            break
        await asyncio.sleep(0.01)
    assert agent.service is not None
    logging.getLogger("otelgpu").addHandler(_Keep(agent_logs))
    await _feed(agent.service, 2, stuck)
    agent.request_stop()
    await running
    assert _unsent_lines(agent_logs) == {e: 12 for e in EXPORTERS}
