"""containerd listing details without a daemon: what the client makes of the record fields
that containerd answers on Containers/ListStream (Tasks/List scripted alongside)."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from otelgpu.processors.container_env import containerd as containerd_mod
from otelgpu.processors.container_env.containerd import ContainerdRuntime

pb = importlib.import_module("otelgpu.processors.container_env._proto.containers_pb2")
tasks_pb = importlib.import_module("otelgpu.processors.container_env._proto.tasks_pb2")


def _runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, containers: list[object]
) -> ContainerdRuntime:
    """A client whose Containers/ListStream answers `containers` and whose Tasks/List is
    empty."""

    async def call(service: str, method: str, request: bytes) -> bytes:
        assert service == containerd_mod.TASKS
        return tasks_pb.ListTasksResponse().SerializeToString()

    async def stream(service: str, method: str, request: bytes) -> AsyncIterator[bytes]:
        for container in containers:
            yield pb.ListContainerMessage(container=container).SerializeToString()

    rt = ContainerdRuntime(str(tmp_path / "c.sock"), "k8s.io", 1.0)
    monkeypatch.setattr(rt, "_call", call)
    monkeypatch.setattr(rt, "_stream", stream)
    return rt


def _container(cid: str, seconds: int, nanos: int) -> object:
    container = pb.Container(id=cid)
    container.created_at.seconds, container.created_at.nanos = seconds, nanos
    return container


async def test_creation_time_adds_the_nanoseconds_to_the_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = _runtime(
        tmp_path,
        monkeypatch,
        [
            _container("early", 1_700_000_000, 250_000_000),
            _container("late", 1_700_000_000, 750_000_000),
        ],
    )
    created = {r.id: r.created for r in await rt.list_containers()}
    assert created == {"early": 1_700_000_000.25, "late": 1_700_000_000.75}
    # the later of two records created within one second is the newer one
    assert created["late"] > created["early"]
