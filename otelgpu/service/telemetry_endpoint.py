"""Pull readers of the service (`service::telemetry::metrics::readers`): the agent's own
`otelgpu_*` metrics at `/metrics` on an address of their own, as the Collector serves its own
telemetry apart from its pipelines.

Each reader is one `Listener` (its own thread and loop, with the bounds of every endpoint of
the agent). A scrape reads the self-telemetry there and then (a lock per instrument, about a
hundred series) and answers in the Prometheus text format, named and labelled as the
prometheus exporter names and labels them (without its `const_labels` or `namespace`, which
belong to the pipelines' series). While a reader is configured the prometheus exporters leave
these series out of their own `/metrics` (`SelfTelemetry.pulled_apart`), so nothing is scraped
twice under two jobs.

On a reload the stopping service parks each server in the agent's `KeptListeners`; the next
service with a reader on the same host and port takes it back, so the port never closes.
"""

from __future__ import annotations

import logging

from otelgpu.component.errors import StartError
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.telemetry_readers import MetricReaderConfig
from otelgpu.confighttp.listener import Listener, Request, Response

_log = logging.getLogger("otelgpu.service")

_TEXT = (("Content-Type", "text/plain; charset=utf-8"),)
_EXPOSITION = (("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),)
_NOT_FOUND = Response(404, b"404: Not Found\n", _TEXT)
_NOT_ALLOWED = Response(405, b"405: Method Not Allowed\n", (*_TEXT, ("Allow", "GET, HEAD")))


def exposition(telemetry: SelfTelemetry) -> bytes:
    """The agent's own metrics in the Prometheus text format (0.0.4)."""
    # Imported here, at the first scrape: an agent without a reader (or without a prometheus
    # exporter) does not load the exporter's modules (see service/builtins.py).
    from otelgpu.exporters.prometheus.render import render_text
    from otelgpu.exporters.prometheus.translate import Translator

    # A translator per scrape: it keeps nothing between two, and it costs microseconds.
    families = Translator("otel", {}).families(telemetry.collect(reader=True), 0.0)
    return render_text(families)[0].encode()


class TelemetryServer:
    """Answers `GET /metrics` with `exposition(telemetry)` on `host:port`."""

    def __init__(self, host: str, port: int, telemetry: SelfTelemetry) -> None:
        self._telemetry = telemetry
        self._listener = Listener(self._handle, host, port, name=f"otelgpu telemetry :{port}")
        self.port = port

    async def start(self) -> None:
        """Binds and listens; raises OSError when the address is taken."""
        await self._listener.start()
        self.port = self._listener.port

    async def stop(self) -> None:
        """Closes the listener, its connections and its thread; idempotent."""
        await self._listener.stop()

    def serve(self, telemetry: SelfTelemetry) -> None:
        """Answers from `telemetry` from now on (the next service taking the server over)."""
        self._telemetry = telemetry

    def _handle(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _NOT_ALLOWED
        if request.path != "/metrics":
            return _NOT_FOUND
        return Response(200, exposition(self._telemetry), _EXPOSITION)


class PullReaders:
    """The service's pull readers: started before its components, stopped (or parked for the
    next service) after them."""

    def __init__(
        self,
        readers: list[MetricReaderConfig],
        telemetry: SelfTelemetry,
        listeners: KeptListeners | None,
    ) -> None:
        self._addresses = [reader.pull.exporter.prometheus.address for reader in readers]
        self._telemetry = telemetry
        self._listeners = listeners
        self._servers: list[tuple[str, int, TelemetryServer]] = []

    @property
    def ports(self) -> list[int]:
        """The ports served now (the bound ones where the configuration asked for 0)."""
        return [server.port for _, _, server in self._servers]

    async def start(self) -> None:
        """Takes back the servers a previous service parked on the same addresses, binds the
        others; raises StartError naming the reader that could not listen."""
        for i, (host, port) in enumerate(self._addresses):
            kept = None
            if self._listeners is not None:
                kept = await self._listeners.take(host, port, None, TelemetryServer)
            try:
                server = kept or await _bound(host, port, self._telemetry)
            except OSError as exc:
                reader = f"service::telemetry::metrics::readers::{i}"
                raise StartError(reader, "telemetry reader", exc) from exc
            server.serve(self._telemetry)
            self._servers.append((host, port, server))
            how = " (listener kept through the reload)" if kept else ""
            _log.info(
                "serving the agent's own metrics on http://%s/metrics%s",
                _shown(host, server.port),
                how,
            )

    async def shutdown(self) -> None:
        """Parks every server for the next service (or stops it: port 0, no registry);
        idempotent."""
        servers, self._servers = self._servers, []
        for host, port, server in servers:
            if not (self._listeners is not None and self._listeners.park(host, port, None, server)):
                await server.stop()


async def _bound(host: str, port: int, telemetry: SelfTelemetry) -> TelemetryServer:
    server = TelemetryServer(host, port, telemetry)
    await server.start()
    return server


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
