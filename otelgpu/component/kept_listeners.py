"""Listening servers that outlive one service, so a valid reload does not close their ports.

A reload stops the old service and starts the new one; a component that bound a port in
`start` and closed it in `shutdown` left a gap in which scrapes and kubelet probes were refused.
Instead, a component created with `Settings.listeners` parks its running server here on
shutdown, under its port and a `setup` value saying everything the socket was bound with
(address, TLS). The next service's component asking for the same port and setup takes the
server back in `start` and points it at itself: the port never closes. What nobody took back is
closed by the agent once the new service runs (a port that moved, a TLS change, a removed
component), and everything is closed at the final stop.

Port 0 ("any port") is never kept: the new component binds a fresh one.

A component without a listener may keep a memory the same way (`keep`, `adopt`): the OTLP
exporter's record of the series it sent, so that the next service's exporter closes those
that end across the reload. What nobody adopted is dropped with the unclaimed servers.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")

_log = logging.getLogger("otelgpu.listeners")


class Stoppable(Protocol):
    """A running server the registry may hold and, when nobody takes it back, stop."""

    async def stop(self) -> None:
        """Closes the listening socket and its connections; idempotent."""


S = TypeVar("S", bound=Stoppable)


@dataclass
class _Parked:
    host: str
    setup: Hashable
    server: Stoppable


class KeptListeners:
    """Running servers parked between two services, keyed by port. The agent owns it."""

    def __init__(self) -> None:
        self._parked: dict[int, _Parked] = {}
        self._memories: dict[Hashable, object] = {}

    def keep(self, key: Hashable, memory: object) -> None:
        """Holds `memory` for the next service's component that asks for `key`."""
        self._memories[key] = memory

    def adopt(self, key: Hashable, kind: type[T]) -> T | None:
        """The memory kept under `key` if it is a `kind` (taken: nobody else gets it)."""
        memory = self._memories.pop(key, None)
        return memory if isinstance(memory, kind) else None

    @property
    def ports(self) -> list[int]:
        """The ports of the servers parked now."""
        return sorted(self._parked)

    def park(self, host: str, port: int, setup: Hashable, server: Stoppable) -> bool:
        """Holds `server` (bound to `host:port` with `setup`) for the next service; False
        when it cannot be kept (port 0), and the caller stops it itself."""
        if port == 0:
            return False
        self._parked[port] = _Parked(host, setup, server)
        return True

    async def take(self, host: str, port: int, setup: Hashable, kind: type[S]) -> S | None:
        """The server parked on `port` if it is a `kind` bound to `host` with `setup`. Anything
        else parked on that port is stopped first, so that the caller can bind it."""
        parked = self._parked.pop(port, None)
        if parked is None:
            return None
        server = parked.server
        if isinstance(server, kind) and parked.host == host and parked.setup == setup:
            return server
        _log.info("port %d: listener settings changed, binding it again", port)
        await _stop(server)
        return None

    async def close_all(self) -> None:
        """Stops every parked server (those the new service did not take back) and drops the
        memories nobody adopted."""
        self._memories.clear()
        parked, self._parked = self._parked, {}
        for entry in parked.values():
            await _stop(entry.server)


async def _stop(server: Stoppable) -> None:
    try:
        await server.stop()
    except Exception:  # one server that fails to close must not keep the others open
        _log.exception("closing a listener failed")
