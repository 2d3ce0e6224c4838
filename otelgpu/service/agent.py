"""The agent's run loop: one service at a time, signals, reload and graceful stop.

SIGTERM/SIGINT stop the service within `stop_timeout` seconds (queues flushed or counted).
SIGHUP reloads the files on a thread of its own; an invalid new config (or any failure while
loading it) is logged issue by issue and the running service is kept. A stop asked while the
files load does not wait for them: the load is abandoned (its thread never holds the exit),
so no file, however it misbehaves, can make the agent deaf to SIGTERM. A SIGHUP that came
before the loop handled signals (`otelgpu.service.early_signals`) reloads once at start.
Every rejected reload counts in `otelgpu_config_reload_failures_total` and sets
`otelgpu_config_last_reload_successful` to 0 (the OtelgpuConfigReloadFailed alert). A valid
one replaces it: the old service stops, the new one starts (if the new one cannot start, the
old config is started again so the node is not left unmonitored). The agent owns the `KeptListeners`
every service's components park their HTTP servers in: a port whose settings did not change
stays open through the reload, still answering with the old service's last body, and only
what the new service did not take back is closed once it runs.

Process-wide settings are the agent's alone, set once when `run` starts and put back when it
returns; no component changes them. There are two. The GIL switch interval, shortened to
`http_listener.SWITCH_INTERVAL` (0.1 ms; Python's default is 5 ms) unless it is already
shorter, so that the HTTP endpoints' threads, which take the GIL back after each system call,
wait at most that long for the pipeline's thread to hand it over (docs/prometheus.md). And the
cyclic garbage collector's full passes, made by the heap upkeep once a minute instead of by
the collector itself, as often as a cycle allocates (`heap.collector_settings`); with the
freezes of `heap.settle`, that is what keeps a cycle's cost per point flat as the node grows
(otelgpu/service/heap.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from otelgpu.component.errors import ConfigError, StartError
from otelgpu.component.kept_listeners import KeptListeners
from otelgpu.component.registry import Registry
from otelgpu.component.tasks import cancel_and_wait
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.schema import AgentConfig
from otelgpu.confighttp import listener as http_listener
from otelgpu.service import heap, logs
from otelgpu.service.early_signals import HeldSignals
from otelgpu.service.service import Service

_log = logging.getLogger("otelgpu.agent")

STOP_MARGIN = 2.0  # seconds of the stop deadline kept for counting and logging what is left


class Agent:
    """Runs the service for a config that `load` produces (and reproduces on SIGHUP)."""

    def __init__(
        self,
        load: Callable[[], AgentConfig],
        registry: Registry,
        *,
        stop_timeout: float = 25.0,
        held: HeldSignals | None = None,
    ) -> None:
        self._load = load
        self._held = held  # SIGHUP before the loop took signals over (the CLI's)
        self._registry = registry
        self._stop_timeout = stop_timeout
        self._telemetry: SelfTelemetry | None = None
        self._stop = asyncio.Event()
        self._reload = asyncio.Event()
        self._listeners = KeptListeners()
        self._upkeep: heap.Upkeep | None = None
        self.service: Service | None = None

    def request_stop(self) -> None:
        self._stop.set()

    def request_reload(self) -> None:
        self._reload.set()

    async def run(self, config: AgentConfig) -> None:
        """Starts `config`, then serves signals until asked to stop. Raises StartError. The
        process-wide settings (module docstring) hold while it runs."""
        with _process_settings():
            await self._run(config)

    async def _run(self, config: AgentConfig) -> None:
        self._telemetry = SelfTelemetry()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, self.request_reload)
        if self._held is not None and self._held.take_reload():
            _log.info("SIGHUP came while starting: reloading once started")
            self.request_reload()
        upkeep: asyncio.Task[None] | None = None
        try:
            self.service = await self._start(config)
            self._loaded(True)
            upkeep = asyncio.create_task(self._keep_heap(), name="heap-upkeep")
            while not self._stop.is_set():
                await self._wait_for_signal()
                if self._reload.is_set() and not self._stop.is_set():
                    self._reload.clear()
                    await self._reload_config()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            if self._held is not None:  # a SIGHUP while stopping must not kill the process
                self._held.install()
            await cancel_and_wait(upkeep)
            await self._stop_service()
            self._telemetry.shutdown()

    async def _keep_heap(self) -> None:
        """The running service's heap upkeep now and then: freed C-heap pages go back to the
        system, and what its first collection built leaves the collector's full passes
        (otelgpu/service/heap.py)."""
        while True:
            await asyncio.sleep(heap.TRIM_INTERVAL)
            if self._upkeep is not None:
                self._upkeep.tick()

    def _loaded(self, ok: bool) -> None:
        assert self._telemetry is not None
        self._telemetry.config_loaded(ok)

    async def _wait_for_signal(self) -> None:
        waiters = [asyncio.create_task(e.wait()) for e in (self._stop, self._reload)]
        _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()

    async def _start(self, config: AgentConfig) -> Service:
        assert self._telemetry is not None
        logs.configure(config.telemetry.logs.level, config.telemetry.logs.encoding)
        service = Service(config, self._registry, self._telemetry, self._listeners)
        await service.start()
        # Start-up objects leave the collector's full passes, what loading and starting freed
        # goes back to the system, and the upkeep takes over (otelgpu/service/heap.py).
        self._upkeep = heap.after_start(functools.partial(_points_collected, self._telemetry))
        # What this service did not take back from the previous one is not coming back. (When
        # it fails to start, they stay parked for the previous config started again.)
        await self._listeners.close_all()
        return service

    async def _reload_config(self) -> None:
        _log.info("SIGHUP: reloading the configuration")
        try:
            config = await self._load_unless_stopped()
        except ConfigError as exc:
            for issue in exc.issues:
                _log.error("reload rejected: %s", issue)
            _log.error(
                "keeping the running configuration (%d issues in the new one)", len(exc.issues)
            )
            self._loaded(False)
            return
        except Exception as exc:  # a loader bug must not take the running pipelines down
            _log.error(
                "reload rejected: loading the new configuration failed (%s: %s); "
                "keeping the running configuration",
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
            self._loaded(False)
            return
        if config is None:
            _log.warning("stop asked while the configuration was loading: the reload is abandoned")
            return
        old = self.service
        assert old is not None
        await old.shutdown()
        try:
            self.service = await self._start(config)
            _log.info("configuration reloaded")
            self._loaded(True)
        except StartError as exc:
            _log.error(
                "the new configuration failed to start (%s); restarting the previous one", exc
            )
            self._loaded(False)
            self.service = await self._start(old.config)

    async def _load_unless_stopped(self) -> AgentConfig | None:
        """The new configuration, loaded on a thread of its own (a large or hostile file must
        not stop the loop serving scrapes); None when a stop is asked first. The thread is a
        daemon, not the loop's executor, so one that never returns does not hold the exit."""
        loop = asyncio.get_running_loop()
        loaded: asyncio.Future[AgentConfig] = loop.create_future()

        def work() -> None:
            try:
                config = self._load()
            except Exception as exc:  # handed to the loop as it is
                _hand_over(loop, loaded, exc)
            else:
                _hand_over(loop, loaded, config)

        threading.Thread(target=work, name="otelgpu reload", daemon=True).start()
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait((loaded, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        return loaded.result() if loaded.done() else None

    async def _stop_service(self) -> None:
        service, self.service = self.service, None
        if service is None:
            await self._listeners.close_all()
            return
        _log.info("stopping (deadline %.0fs)", self._stop_timeout)
        # The service's own deadline comes first, with a margin in which the components it
        # cancels count and log what they could not send; the outer one only guards against a
        # component whose cancellation itself hangs.
        loop = asyncio.get_running_loop()
        margin = min(STOP_MARGIN, self._stop_timeout / 5)
        try:
            async with asyncio.timeout(self._stop_timeout):
                await service.shutdown(deadline=loop.time() + self._stop_timeout - margin)
                await self._listeners.close_all()
        except TimeoutError:
            _log.error("shutdown did not finish within %.0fs; exiting anyway", self._stop_timeout)


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[AgentConfig],
    outcome: AgentConfig | BaseException,
) -> None:
    """Settles `future` with a worker thread's result on its loop, if that loop still runs."""

    def settle() -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
        loop.call_soon_threadsafe(settle)


def _points_collected(telemetry: SelfTelemetry) -> float:
    """The points every receiver has collected so far (`otelgpu_receiver_points_total`): it
    grows with each collection."""
    for metric in telemetry.collect(reader=True).metrics:
        if metric.name == "otelgpu_receiver_points_total":
            return sum(point.value for point in metric.points)
    return 0.0


@contextlib.contextmanager
def _process_settings() -> Iterator[None]:
    """The agent's process-wide settings (module docstring), restored on the way out."""
    interval = sys.getswitchinterval()
    shorten = interval > http_listener.SWITCH_INTERVAL
    if shorten:
        sys.setswitchinterval(http_listener.SWITCH_INTERVAL)
    try:
        with heap.collector_settings():
            yield
    finally:
        if shorten:
            sys.setswitchinterval(interval)
