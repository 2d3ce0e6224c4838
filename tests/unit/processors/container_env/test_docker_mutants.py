"""docker client details against a stand-in Engine API client: which labels of a listed
container are kept, and that closing the runtime closes the client it opened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otelgpu.processors.container_env.docker import DockerRuntime


class ScriptedClient:
    """An Engine API client whose container listing is fixed; it records being closed."""

    def __init__(self, listing: list[dict[str, Any]]) -> None:
        self.listing = listing
        self.closed = False

    def containers(self) -> list[dict[str, Any]]:
        return self.listing

    def close(self) -> None:
        self.closed = True


def _runtime(
    tmp_path: Path, listing: list[dict[str, Any]], opened: list[ScriptedClient]
) -> DockerRuntime:
    """A runtime on an existing socket path whose every new client answers `listing`."""
    socket = tmp_path / "docker.sock"
    socket.touch()

    def factory(url: str, timeout: float) -> ScriptedClient:
        client = ScriptedClient(listing)
        opened.append(client)
        return client

    return DockerRuntime(str(socket), 1.0, factory)


async def test_labels_that_are_not_string_pairs_are_left_out_of_a_listed_container(
    tmp_path: Path,
) -> None:
    labels: dict[Any, Any] = {"team": "vision", "gpus": 2, "owner": None, 7: "seven"}
    rt = _runtime(tmp_path, [{"Id": "c1", "Labels": labels}], [])
    (ref,) = await rt.list_containers()
    assert dict(ref.labels) == {"team": "vision"}
    await rt.close()


async def test_closing_the_runtime_closes_its_client_and_the_next_listing_opens_another(
    tmp_path: Path,
) -> None:
    opened: list[ScriptedClient] = []
    rt = _runtime(tmp_path, [{"Id": "c1"}], opened)
    assert [ref.id for ref in await rt.list_containers()] == ["c1"]
    await rt.close()
    assert [client.closed for client in opened] == [True]

    assert [ref.id for ref in await rt.list_containers()] == ["c1"]
    assert [client.closed for client in opened] == [True, False]
    await rt.close()
    assert [client.closed for client in opened] == [True, True]
