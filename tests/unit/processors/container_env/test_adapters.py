"""The runtime adapters without a daemon: spec decoding, listing shapes (creation times, the labels
kept), failures, read-only, and the docker client closed with the runtime."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests

from otelgpu.processors.container_env import containerd as containerd_mod
from otelgpu.processors.container_env.containerd import ContainerdRuntime
from otelgpu.processors.container_env.docker import DockerRuntime
from otelgpu.processors.container_env.runtime import RuntimeUnavailable, decode_oci_spec, env_pairs

pb = importlib.import_module("otelgpu.processors.container_env._proto.containers_pb2")
tasks_pb = importlib.import_module("otelgpu.processors.container_env._proto.tasks_pb2")


@pytest.mark.parametrize(
    ("raw", "env", "annotations", "valid"),
    [
        (
            b'{"process": {"env": ["A=1", "B"]}, "annotations": {"x": "y"}}',
            ["A=1", "B"],
            {"x": "y"},
            True,
        ),
        (b"{}", [], {}, True),
        (b"not json", [], {}, False),
        (b"[1, 2]", [], {}, False),
        (b'{"process": "x"}', [], {}, False),
        (b'{"process": {"env": {"A": "1"}}}', [], {}, False),
        (b'{"process": {"env": ["A=1", 2]}}', ["A=1"], {}, False),
        (b'{"annotations": {"x": 1, "y": "z"}}', [], {"y": "z"}, False),
        (b"\xff\xfe", [], {}, False),
        (b"[" * 100_000, [], {}, False),
    ],
)
def test_decode_oci_spec(
    raw: bytes, env: list[str], annotations: dict[str, str], valid: bool
) -> None:
    spec = decode_oci_spec(raw)
    assert (list(spec.env), dict(spec.annotations), spec.valid) == (env, annotations, valid)


def test_env_pairs_skips_entries_without_a_value() -> None:
    assert list(env_pairs(["A=1", "B", "=x", "C==d", "D="])) == [("A", "1"), ("C", "=d"), ("D", "")]


def test_containerd_record_decoding() -> None:
    container = pb.Container(id="abc", labels={"k": "v"}, sandbox="sb")
    container.spec.type_url = containerd_mod.OCI_SPEC_TYPE
    container.spec.value = b'{"process": {"env": ["A=1"]}}'
    container.created_at.seconds = 5
    container.updated_at.seconds, container.updated_at.nanos = 7, 3
    ref = containerd_mod._ref(pb.Container.FromString(container.SerializeToString()), running=True)
    assert (ref.id, dict(ref.labels), ref.sandbox_id, ref.created) == ("abc", {"k": "v"}, "sb", 5.0)
    assert ref.revision == "7.3"
    assert ref.raw_spec == b'{"process": {"env": ["A=1"]}}'
    container.spec.type_url = "types.example/other"
    assert containerd_mod._ref(container, running=True).raw_spec == b""


async def test_a_containerd_record_without_an_oci_spec_reads_as_malformed(tmp_path: Path) -> None:
    """A record whose spec is no OCI spec (another runtime's) carries nothing to read: it is
    counted as malformed, not taken for a container that is gone."""
    container = pb.Container(id="abc")
    container.spec.type_url = "types.example/other"
    ref = containerd_mod._ref(container, running=True)
    rt = ContainerdRuntime(str(tmp_path / "c.sock"), "k8s.io", 1.0)
    spec = await rt.container_spec(ref, env=True)
    assert spec is not None and not spec.valid


def _containerd_listing(
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
    rt = _containerd_listing(
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


async def test_containerd_missing_socket_is_unavailable(tmp_path: Path) -> None:
    socket = str(tmp_path / "none.sock")
    rt = ContainerdRuntime(socket, "k8s.io", 1.0)
    assert (rt.name, rt.endpoint) == ("containerd", socket)  # what the logs name
    with pytest.raises(RuntimeUnavailable) as unavailable:
        await rt.list_containers()
    assert str(unavailable.value) == f"socket {socket} does not exist"
    await rt.close()


async def test_containerd_client_refuses_every_write_method(tmp_path: Path) -> None:
    """S6: only read methods can be sent, whatever a caller asks for."""
    rt = ContainerdRuntime(str(tmp_path / "none.sock"), "k8s.io", 1.0)
    containers, tasks = containerd_mod.CONTAINERS, containerd_mod.TASKS
    assert {
        f"{containers}/ListStream",
        f"{containers}/Get",
        f"{tasks}/List",
    } == containerd_mod.READ_METHODS
    writes = [(containers, m) for m in ("Create", "Update", "Delete", "List")]
    writes += [(tasks, m) for m in ("Create", "Start", "Kill", "Delete", "Exec")]
    for service, method in writes:
        with pytest.raises(ValueError) as refused:
            await rt._call(service, method, b"")
        assert str(refused.value) == f"refusing to call {service}/{method}: not a read method"


async def test_containerd_dead_socket_is_unavailable(tmp_path: Path) -> None:
    sock = tmp_path / "dead.sock"
    sock.touch()  # a socket file left behind by a crashed daemon
    rt = ContainerdRuntime(str(sock), "k8s.io", 1.0)
    with pytest.raises(RuntimeUnavailable, match=r"^Containers/ListStream: UNAVAILABLE \S"):
        await rt.list_containers()
    await rt.close()


class FakeDockerClient:
    """The two Engine API calls the adapter makes, scripted."""

    def __init__(self, containers: Any, inspect: dict[str, Any], fail: Exception | None = None):
        self._containers = containers
        self._inspect = inspect
        self.fail = fail
        self.closed = False

    def containers(self) -> Any:
        if self.fail:
            raise self.fail
        return self._containers

    def inspect_container(self, cid: str) -> Any:
        if cid not in self._inspect:
            raise docker.errors.NotFound("gone")
        return self._inspect[cid]

    def close(self) -> None:
        self.closed = True


def _docker(tmp_path: Path, client: FakeDockerClient) -> DockerRuntime:
    sock = tmp_path / "docker.sock"
    sock.touch()
    return DockerRuntime(str(sock), 1.0, lambda url, timeout: client)


def _docker_opening(
    tmp_path: Path, listing: list[dict[str, Any]], opened: list[FakeDockerClient]
) -> DockerRuntime:
    """A runtime on an existing socket path whose every new client answers `listing`."""
    sock = tmp_path / "docker.sock"
    sock.touch()

    def factory(url: str, timeout: float) -> FakeDockerClient:
        client = FakeDockerClient(listing, {})
        opened.append(client)
        return client

    return DockerRuntime(str(sock), 1.0, factory)


async def test_docker_listing_and_dockershim_annotations(tmp_path: Path) -> None:
    listing = [
        {
            "Id": "s1",
            "Created": 10,
            "Labels": {
                "io.kubernetes.docker.type": "podsandbox",
                "team": "a",
                "annotation.owner": "alice",
            },
        },
        {"Id": "p1", "Labels": {"annotation.kept": "as-is"}},
        {"Id": "", "Labels": {}},
        "junk",
        {"Id": "p2", "Labels": None, "Created": "yesterday"},
    ]
    rt = _docker(tmp_path, FakeDockerClient(listing, {}))
    refs = await rt.list_containers()
    assert [r.id for r in refs] == ["s1", "p1", "p2"]
    assert dict(refs[0].labels) == {"io.kubernetes.docker.type": "podsandbox", "team": "a"}
    assert dict(refs[0].annotations) == {"owner": "alice"} and refs[0].created == 10.0
    assert dict(refs[1].labels) == {"annotation.kept": "as-is"}  # not a kubelet container
    assert refs[2].created == 0.0  # a creation time that is no number: unknown, the oldest
    # docker lists no sandbox: the record takes it from dockershim's label
    assert [r.sandbox_id for r in refs] == ["", "", ""]
    spec = await rt.container_spec(refs[0], env=False)
    assert spec is not None and dict(spec.annotations) == {"owner": "alice"}
    assert spec.valid and list(spec.env) == []  # no env asked, none read: nothing is wrong


async def test_labels_that_are_not_string_pairs_are_left_out_of_a_listed_container(
    tmp_path: Path,
) -> None:
    labels: dict[Any, Any] = {"team": "vision", "gpus": 2, "owner": None, 7: "seven"}
    rt = _docker(tmp_path, FakeDockerClient([{"Id": "c1", "Labels": labels}], {}))
    (ref,) = await rt.list_containers()
    assert dict(ref.labels) == {"team": "vision"}
    await rt.close()


async def test_docker_env_from_inspect(tmp_path: Path) -> None:
    inspect = {
        "p1": {"Config": {"Env": ["TEAM=ml", "PATH=/bin"]}},
        "p2": {"Config": {"Env": None}},
        "p3": {"Config": {"Env": ["A=1", 5]}},
    }
    listing = [{"Id": i} for i in ("p1", "p2", "p3", "gone")]
    rt = _docker(tmp_path, FakeDockerClient(listing, inspect))
    refs = {r.id: r for r in await rt.list_containers()}
    spec = await rt.container_spec(refs["p1"], env=True)
    assert spec is not None and list(spec.env) == ["TEAM=ml", "PATH=/bin"] and spec.valid
    spec = await rt.container_spec(refs["p2"], env=True)
    assert spec is not None and list(spec.env) == [] and spec.valid
    spec = await rt.container_spec(refs["p3"], env=True)
    assert spec is not None and list(spec.env) == ["A=1"] and not spec.valid
    assert await rt.container_spec(refs["gone"], env=True) is None


@pytest.mark.parametrize(
    "error",
    [
        requests.exceptions.ConnectionError("refused"),
        requests.exceptions.ReadTimeout("slow"),
        docker.errors.DockerException("Error while fetching server API version"),
        docker.errors.APIError("500 Server Error"),
    ],
)
async def test_docker_failures_are_unavailable_and_drop_the_client(
    tmp_path: Path, error: Exception
) -> None:
    client = FakeDockerClient([], {}, fail=error)
    rt = _docker(tmp_path, client)
    with pytest.raises(RuntimeUnavailable) as unavailable:
        await rt.list_containers()
    assert client.closed
    # the source's last error: what failed, and what it said
    assert str(unavailable.value) == f"{type(error).__name__}: {error}"


async def test_closing_the_runtime_closes_its_client_and_the_next_listing_opens_another(
    tmp_path: Path,
) -> None:
    opened: list[FakeDockerClient] = []
    rt = _docker_opening(tmp_path, [{"Id": "c1"}], opened)
    assert [ref.id for ref in await rt.list_containers()] == ["c1"]
    await rt.close()
    assert [client.closed for client in opened] == [True]

    assert [ref.id for ref in await rt.list_containers()] == ["c1"]
    assert [client.closed for client in opened] == [True, False]
    await rt.close()
    assert [client.closed for client in opened] == [True, True]


async def test_docker_unexpected_answer_is_unavailable(tmp_path: Path) -> None:
    rt = _docker(tmp_path, FakeDockerClient({"not": "a list"}, {}))
    with pytest.raises(RuntimeUnavailable, match="unexpected answer"):
        await rt.list_containers()


async def test_docker_missing_socket_is_unavailable(tmp_path: Path) -> None:
    socket = str(tmp_path / "none.sock")
    rt = DockerRuntime(socket, 1.0)
    assert rt.endpoint == socket  # what the logs name
    with pytest.raises(RuntimeUnavailable) as unavailable:
        await rt.list_containers()
    assert str(unavailable.value) == f"socket {socket} does not exist"
    await rt.close()


async def test_docker_running_is_the_listed_state(tmp_path: Path) -> None:
    """The default listing holds running containers only; its `State` (when present) is
    still read, so an exited one can never be taken for alive."""
    listing = [
        {"Id": "up", "State": "running"},
        {"Id": "paused", "State": "paused"},  # docker's State.Running is true while paused
        {"Id": "restarting", "State": "restarting"},
        {"Id": "exited", "State": "exited"},
        {"Id": "created", "State": "created"},
        {"Id": "dead", "State": "dead"},
        {"Id": "removing", "State": "removing"},
        {"Id": "no-state"},
    ]
    rt = _docker(tmp_path, FakeDockerClient(listing, {}))
    running = {r.id: r.running for r in await rt.list_containers()}
    assert running == {
        "up": True,
        "paused": True,
        "restarting": True,
        "exited": False,
        "created": False,
        "dead": False,
        "removing": False,
        "no-state": True,
    }


task_pb = importlib.import_module("otelgpu.processors.container_env._proto.task_pb2")


async def test_containerd_running_is_a_live_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records from Containers/List, liveness from Tasks/List (the task's `id` is its
    container's ID; some versions also fill `container_id`)."""
    containers = pb.ListContainersResponse(
        containers=[pb.Container(id=i) for i in ("run", "paused", "stopped", "created", "none")]
    )
    tasks = tasks_pb.ListTasksResponse(
        tasks=[
            task_pb.Process(id="run", status=task_pb.RUNNING),
            task_pb.Process(container_id="paused", id="paused", status=task_pb.PAUSED),
            task_pb.Process(id="stopped", status=task_pb.STOPPED),
            task_pb.Process(id="created", status=task_pb.CREATED),
        ]
    )
    answers = {
        containerd_mod.CONTAINERS: containers.SerializeToString(),
        containerd_mod.TASKS: tasks.SerializeToString(),
    }
    calls: list[str] = []

    async def call(service: str, method: str, request: bytes) -> bytes:
        calls.append(f"{service}/{method}")
        return answers[service]

    async def stream(service: str, method: str, request: bytes) -> AsyncIterator[bytes]:
        calls.append(f"{service}/{method}")
        for container in containers.containers:
            yield pb.ListContainerMessage(container=container).SerializeToString()

    rt = ContainerdRuntime(str(tmp_path / "c.sock"), "k8s.io", 1.0)
    monkeypatch.setattr(rt, "_call", call)
    monkeypatch.setattr(rt, "_stream", stream)
    running = {r.id: r.running for r in await rt.list_containers()}
    assert running == {
        "run": True,
        "paused": True,
        "stopped": False,
        "created": False,
        "none": False,
    }
    assert calls == [f"{containerd_mod.CONTAINERS}/ListStream", f"{containerd_mod.TASKS}/List"]
    assert set(calls) <= containerd_mod.READ_METHODS


async def test_containerd_undecodable_task_list_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def call(service: str, method: str, request: bytes) -> bytes:
        return b"\xff\xff\xff"

    async def stream(service: str, method: str, request: bytes) -> AsyncIterator[bytes]:
        yield pb.ListContainerMessage(container=pb.Container(id="c")).SerializeToString()

    rt = ContainerdRuntime(str(tmp_path / "c.sock"), "k8s.io", 1.0)
    monkeypatch.setattr(rt, "_call", call)
    monkeypatch.setattr(rt, "_stream", stream)
    with pytest.raises(RuntimeUnavailable, match=r"^Tasks/List: undecodable \(.+\)$"):
        await rt.list_containers()


async def test_containerd_undecodable_container_message_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def stream(service: str, method: str, request: bytes) -> AsyncIterator[bytes]:
        yield pb.ListContainerMessage(container=pb.Container(id="c")).SerializeToString()
        yield b"\xff\xff\xff"

    rt = ContainerdRuntime(str(tmp_path / "c.sock"), "k8s.io", 1.0)
    monkeypatch.setattr(rt, "_stream", stream)
    with pytest.raises(RuntimeUnavailable, match=r"^Containers/ListStream: undecodable \(.+\)$"):
        await rt.list_containers()
