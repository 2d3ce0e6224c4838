"""docker adapter: the Engine API over docker's unix socket (the `docker` package), read-only."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otelgpu.processors.container_env.records import DOCKERSHIM_TYPE
from otelgpu.processors.container_env.runtime import (
    ContainerRef,
    ContainerSpec,
    RuntimeUnavailable,
)

# dockershim stored a pod's annotations as labels with this prefix on its containers.
ANNOTATION_PREFIX = "annotation."

# The docker package is imported on first use only: on a node without a docker socket the
# agent never pays for it (about 7 MiB of resident memory).

ClientFactory = Callable[[str, float], Any]


def _api_client(base_url: str, timeout: float) -> Any:
    # "auto" takes the API version the daemon says it speaks, so no version is pinned
    # here and none is compared: an odd version string is the daemon's business.
    import docker

    return docker.APIClient(base_url=base_url, version="auto", timeout=timeout)


class DockerRuntime:
    """`ContainerRuntime` over the Engine API: running containers, `Config.Env`, labels.

    The listing is docker's default one, running containers only (`State.Running`: paused
    and restarting ones too): an exited container's record never reaches the snapshot.

    Works for plain docker hosts (containers matched by `container.id`) and for
    dockershim-era Kubernetes nodes (`io.kubernetes.*` labels, `podsandbox` containers).
    docker-py is blocking, so every request runs in a worker thread; the client is created
    on first use and dropped after a failure, so a restarted daemon is found again.
    """

    def __init__(
        self, socket: str, timeout: float, client_factory: ClientFactory = _api_client
    ) -> None:
        self._socket = socket
        self._timeout = timeout
        self._factory = client_factory
        self._client: Any = None

    @property
    def name(self) -> str:
        return "docker"

    @property
    def endpoint(self) -> str:
        return self._socket

    async def list_containers(self) -> Sequence[ContainerRef]:
        items = await asyncio.to_thread(self._request, lambda c: c.containers())
        if not isinstance(items, list):
            raise RuntimeUnavailable("containers: unexpected answer")
        return [ref for item in items if (ref := _ref(item)) is not None]

    async def container_spec(self, ref: ContainerRef, *, env: bool) -> ContainerSpec | None:
        if not env:
            return ContainerSpec(annotations=ref.annotations)
        try:
            info = await asyncio.to_thread(self._request, lambda c: c.inspect_container(ref.id))
        except _NotFound:
            return None
        config = info.get("Config") if isinstance(info, dict) else None
        env_raw = config.get("Env") if isinstance(config, dict) else None
        if env_raw is None:
            return ContainerSpec(annotations=ref.annotations, valid=isinstance(config, dict))
        env_list = [e for e in env_raw if isinstance(e, str)] if isinstance(env_raw, list) else []
        valid = isinstance(env_raw, list) and len(env_list) == len(env_raw)
        return ContainerSpec(env=env_list, annotations=ref.annotations, valid=valid)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)

    def _request(self, call: Callable[[Any], Any]) -> Any:
        """Runs one Engine API request in the calling (worker) thread."""
        if not os.path.exists(self._socket):
            raise RuntimeUnavailable(f"socket {self._socket} does not exist")
        import docker.errors

        # Failures of the Engine API: docker's own errors, requests' (OSError subclasses:
        # refused, reset, timed out) and ValueError for an answer docker-py cannot read.
        failures = (docker.errors.DockerException, OSError, ValueError)
        try:
            if self._client is None:
                self._client = self._factory(f"unix://{self._socket}", self._timeout)
            return call(self._client)
        except docker.errors.NotFound as exc:
            raise _NotFound from exc
        except failures as exc:
            client, self._client = self._client, None
            if client is not None:
                client.close()
            raise RuntimeUnavailable(f"{type(exc).__name__}: {exc}") from exc


class _NotFound(Exception):
    """The container went away between the listing and the inspection."""


def _ref(item: object) -> ContainerRef | None:
    """A listed container; None for an entry without an ID (nothing to match it by)."""
    if not isinstance(item, dict) or not isinstance(item.get("Id"), str) or not item["Id"]:
        return None
    labels = _strings(item.get("Labels"))
    annotations: dict[str, str] = {}
    if DOCKERSHIM_TYPE in labels:
        annotations = {
            k.removeprefix(ANNOTATION_PREFIX): v
            for k, v in labels.items()
            if k.startswith(ANNOTATION_PREFIX)
        }
        labels = {k: v for k, v in labels.items() if not k.startswith(ANNOTATION_PREFIX)}
    created = item.get("Created")
    return ContainerRef(
        id=item["Id"],
        labels=labels,
        # A container's config and labels never change in docker: its ID is its revision.
        revision=item["Id"],
        running=_running(item.get("State")),
        created=float(created) if isinstance(created, int | float) else 0.0,
        annotations=annotations,
    )


# The list states in which `State.Running` is false. The listing (no `all=true`) holds
# running containers only, paused and restarting ones included (both are `Running`), so
# these are a guard against a daemon that answers otherwise; no state at all reads running.
_NOT_RUNNING = frozenset({"created", "exited", "dead", "removing"})


def _running(state: object) -> bool:
    return not isinstance(state, str) or state not in _NOT_RUNNING


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
