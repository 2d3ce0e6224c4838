"""`host.name` (dcgm naming's `Hostname`) is the Kubernetes node name, not the pod's hostname."""

from __future__ import annotations

import socket

import pytest

from tests.unit.receivers.nvml.conftest import MakeReceiver, by_id


@pytest.mark.parametrize("variable", ["K8S_NODE_NAME", "NODE_NAME"])
async def test_host_name_is_the_node_name_from_the_downward_api(
    make_receiver: MakeReceiver, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.delenv("K8S_NODE_NAME", raising=False)
    monkeypatch.delenv("NODE_NAME", raising=False)
    monkeypatch.setenv(variable, "node-a")
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a"}]})
    gpu = by_id(await receiver.scrape())["GPU-a"]
    assert gpu.resource["host.name"] == "node-a"
    assert socket.gethostname() != "node-a"  # the test proves something


async def test_host_name_is_the_hostname_outside_kubernetes(
    make_receiver: MakeReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("K8S_NODE_NAME", raising=False)
    monkeypatch.setenv("NODE_NAME", "  ")  # blank: not set
    receiver = make_receiver(simulated={"gpus": [{"uuid": "GPU-a"}]})
    gpu = by_id(await receiver.scrape())["GPU-a"]
    assert gpu.resource["host.name"] == socket.gethostname()
