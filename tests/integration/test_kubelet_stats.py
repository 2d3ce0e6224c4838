"""The kubelet_stats receiver against an HTTPS kubelet summary server checking bearer tokens.

The server (tests/peers/kubelet_stats_server.py) speaks real TLS with a self-signed
certificate and answers 401 to a wrong token, as the kubelet's authenticator does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from otelgpu.component.component import Kind
from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config import load_config
from otelgpu.receivers.kubelet_stats.client import HttpKubeletClient, KubeletError
from otelgpu.receivers.kubelet_stats.config import KubeletStatsReceiverConfig
from otelgpu.receivers.kubelet_stats.receiver import KubeletStatsReceiver, make_client
from otelgpu.service.builtins import builtin_registry
from otelgpu.service.service import Service
from tests.conftest import make_settings
from tests.fakes import Sink
from tests.peers.kubelet import FakeKubelet, container, pod
from tests.peers.kubelet import kubelet as pod_resources
from tests.peers.kubelet_stats_server import NODE, TOKEN, KubeletStatsServer, busy_node_summary
from tests.peers.prometheus import free_port

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["pod_resources"]  # the pytest fixture (the kubelet's pod-resources server)

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def kubelet(tmp_path: Path, **options: Any) -> AsyncIterator[KubeletStatsServer]:
    server = KubeletStatsServer(tmp_path, **options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def receiver_for(telemetry: SelfTelemetry, sink: Sink, **config: Any) -> KubeletStatsReceiver:
    # The tests call scrape() themselves (no loop), on the production HTTP client.
    parsed = KubeletStatsReceiverConfig.model_validate(config)
    settings = make_settings("kubelet_stats", Kind.RECEIVER, telemetry)
    client = make_client(parsed, {"K8S_NODE_NAME": "unused"})
    return KubeletStatsReceiver(settings, parsed, sink, client=client)


def token_file(tmp_path: Path, token: str = TOKEN) -> str:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    return str(path)


def errors(telemetry: SelfTelemetry) -> dict[str, float]:
    for metric in telemetry.collect().metrics:
        if metric.name == "otelgpu_kubelet_errors_total":
            return {str(p.attributes["reason"]): p.value for p in metric.points}
    return {}


async def test_https_with_token_and_ca_reads_the_summary(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink
) -> None:
    async with kubelet(tmp_path) as server:
        receiver = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(server.ca_file),
            token_file=token_file(tmp_path),
            metric_groups=["node", "pod", "container", "volume"],
        )
        batch = await receiver.scrape()
        await receiver.shutdown()
    assert (server.requests, server.refused) == (1, 0)
    resources = [dict(rm.resource) for rm in batch]
    assert {"k8s.node.name": NODE, "host.name": NODE} in resources
    containers = {r.get("k8s.container.name") for r in resources} - {None}
    assert containers == {"trainer", "log-shipper"}
    names = {m.name for rm in batch for m in rm.metrics}
    assert {"k8s.node.cpu.time", "container.memory.working_set", "k8s.pod.volume.capacity"} <= names
    assert telemetry.sources["kubelet"].up


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
async def test_a_summary_arriving_in_many_pieces_is_read_whole(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink, chunked: bool
) -> None:
    """A 110-pod node's summary (~300 KB) sent in 4 KiB pieces, as a real kubelet's reaches a
    client over TCP: every pod and container is read, nothing counted as bad JSON."""
    async with kubelet(tmp_path) as server:
        server.summary = busy_node_summary(110)
        server.piece_size, server.chunked = 4096, chunked
        receiver = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(server.ca_file),
            token_file=token_file(tmp_path),
        )
        batch = await receiver.scrape()
        await receiver.shutdown()
    assert errors(telemetry) == {}
    containers = {
        (rm.resource["k8s.pod.name"], rm.resource["k8s.container.name"])
        for rm in batch
        if "k8s.container.name" in rm.resource
    }
    assert len(containers) == 220
    assert telemetry.sources["kubelet"].up


def _client(server: KubeletStatsServer, max_bytes: int) -> HttpKubeletClient:
    return HttpKubeletClient(
        server.url + "/stats/summary",
        token=None,
        ca_file=None,
        verify=True,
        timeout=5.0,
        max_bytes=max_bytes,
    )


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
async def test_the_body_limit_holds_whatever_the_framing(tmp_path: Path, chunked: bool) -> None:
    """A body of exactly the limit is read whole; one byte more is `too_large`, whether the
    size is declared up front (refused before reading) or only found while reading chunks."""
    async with kubelet(tmp_path, tls=False, token=None) as server:
        server.body = json.dumps(busy_node_summary(5)).encode()
        server.piece_size, server.chunked = 1000, chunked
        size = len(server.body)
        at_limit = _client(server, size)
        assert await at_limit.summary() == server.body
        await at_limit.close()
        below = _client(server, size - 1)
        with pytest.raises(KubeletError) as err:
            await below.summary()
        await below.close()
    assert err.value.reason == "too_large"
    assert f"more than {size - 1} bytes" in str(err.value)


async def test_the_limit_bounds_a_compressed_body_once_decompressed(tmp_path: Path) -> None:
    """aiohttp decompresses a gzip answer by itself: the limit counts what it decompresses, so
    a small compressed body cannot make the agent hold more than the limit."""
    summary = json.dumps(busy_node_summary(5)).encode()
    async with kubelet(tmp_path, tls=False, token=None) as server:
        server.body, server.content_encoding = gzip.compress(summary), "gzip"
        assert len(server.body) < len(summary) // 4
        fits = _client(server, len(summary))
        assert await fits.summary() == summary
        await fits.close()
        bomb = _client(server, len(summary) // 2)  # above the compressed size, below the whole
        with pytest.raises(KubeletError) as err:
            await bomb.summary()
        await bomb.close()
    assert err.value.reason == "too_large"


async def test_a_body_cut_short_is_incomplete_not_bad_json() -> None:
    """A kubelet that closes the connection before the Content-Length it declared."""

    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b'{"pods": [' * 10)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut_short, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HttpKubeletClient(
        f"http://127.0.0.1:{port}/stats/summary", token=None, ca_file=None, verify=True, timeout=5
    )
    with pytest.raises(KubeletError) as err:
        await client.summary()
    await client.close()
    server.close()
    await server.wait_closed()
    assert err.value.reason == "incomplete"


async def test_the_kubelets_error_text_is_kept_bounded_on_one_line(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink
) -> None:
    async with kubelet(tmp_path) as server:
        server.status = 500
        server.error_text = "Internal Error: failed to get imageFs stats\n" + "x" * 5000
        receiver = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(server.ca_file),
            token_file=token_file(tmp_path),
        )
        await receiver.scrape()
        await receiver.shutdown()
    error = telemetry.sources["kubelet"].last_error
    assert "HTTP 500: Internal Error: failed to get imageFs stats xxx" in error
    assert "\n" not in error and error.count("x") < 600


async def test_wrong_token_is_401_source_down_then_a_rotated_token_recovers(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    path = token_file(tmp_path, "stale-token-0000")
    async with kubelet(tmp_path) as server:
        receiver = receiver_for(
            telemetry, sink, endpoint=server.url, ca_file=str(server.ca_file), token_file=path
        )
        assert await receiver.scrape() == ()
        assert await receiver.scrape() == ()
        assert server.refused == 2
        assert not telemetry.sources["kubelet"].up
        assert "401" in telemetry.sources["kubelet"].last_error
        Path(path).write_text(TOKEN)  # the kubelet rotated the projected token
        assert await receiver.scrape() != ()
        await receiver.shutdown()
    assert errors(telemetry) == {"unauthorized": 2}
    assert telemetry.sources["kubelet"].up
    assert "stale-token-0000" not in caplog.text and TOKEN not in caplog.text


async def test_a_rotated_serving_certificate_is_trusted_once_the_ca_file_has_it(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink
) -> None:
    """The kubelet's certificate is rotated to one the mounted CA bundle does not hold yet
    (tls errors, the token never sent), then the bundle is updated in place: the next read
    trusts it, without a restart of the agent."""
    ca_bundle = tmp_path / "ca.crt"
    async with kubelet(tmp_path) as server:
        assert server.ca_file is not None
        ca_bundle.write_bytes(server.ca_file.read_bytes())
        receiver = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(ca_bundle),
            token_file=token_file(tmp_path),
        )
        assert await receiver.scrape() != ()
        await server.rotate_certificate()
        assert await receiver.scrape() == ()
        assert server.requests == 1  # nothing reached the unverified server
        assert server.ca_file is not None
        ca_bundle.write_bytes(server.ca_file.read_bytes())  # the bundle's new content
        assert await receiver.scrape() != ()
        await receiver.shutdown()
    assert errors(telemetry) == {"tls": 1}
    assert telemetry.sources["kubelet"].up


async def test_kubelet_down_then_back(tmp_path: Path, telemetry: SelfTelemetry, sink: Sink) -> None:
    async with kubelet(tmp_path) as server:
        receiver = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(server.ca_file),
            token_file=token_file(tmp_path),
        )
        assert await receiver.scrape() != ()
        await server.stop()
        assert await receiver.scrape() == ()
        assert not telemetry.sources["kubelet"].up
        await server.start()
        assert await receiver.scrape() != ()
        await receiver.shutdown()
    assert errors(telemetry) == {"connect": 1}
    assert telemetry.sources["kubelet"].up


@pytest.mark.parametrize(
    ("script", "reason"),
    [({"body": b'{"node": {"nodeName": '}, "bad_json"), ({"status": 500}, "http_status")],
)
async def test_bad_answers_are_counted(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink, script: dict[str, Any], reason: str
) -> None:
    async with kubelet(tmp_path) as server:
        for key, value in script.items():
            setattr(server, key, value)
        receiver = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(server.ca_file),
            token_file=token_file(tmp_path),
        )
        assert await receiver.scrape() == ()
        await receiver.shutdown()
    assert errors(telemetry) == {reason: 1}
    assert not telemetry.sources["kubelet"].up


async def test_slow_kubelet_times_out(tmp_path: Path, telemetry: SelfTelemetry, sink: Sink) -> None:
    async with kubelet(tmp_path) as server:
        server.delay = 5.0
        receiver = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(server.ca_file),
            token_file=token_file(tmp_path),
            timeout="200ms",
        )
        assert await receiver.scrape() == ()
        await receiver.shutdown()
    assert errors(telemetry) == {"timeout": 1}
    assert "did not answer in time" in telemetry.sources["kubelet"].last_error


async def test_unknown_certificate_is_refused_unless_verification_is_off(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink
) -> None:
    other_ca = tmp_path / "other"
    other_ca.mkdir()
    async with kubelet(tmp_path) as server, kubelet(other_ca) as other:
        strict = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            ca_file=str(other.ca_file),  # a CA that did not sign this kubelet's certificate
            token_file=token_file(tmp_path),
        )
        assert await strict.scrape() == ()
        await strict.shutdown()
        assert server.requests == 0  # the token never reached an unverified server
        lax = receiver_for(
            telemetry,
            sink,
            endpoint=server.url,
            insecure_skip_verify=True,
            token_file=token_file(tmp_path),
        )
        assert await lax.scrape() != ()
        await lax.shutdown()
    assert errors(telemetry) == {"tls": 1}


async def test_read_only_port_is_plain_http_without_a_token(
    tmp_path: Path, telemetry: SelfTelemetry, sink: Sink
) -> None:
    async with kubelet(tmp_path, tls=False, token=None) as server:
        host_port = server.url.removeprefix("http://")
        receiver = receiver_for(telemetry, sink, endpoint=host_port, read_only_port=True)
        batch = await receiver.scrape()
        await receiver.shutdown()
    assert any(rm.resource.get("k8s.pod.name") == "trainer-0" for rm in batch)


@contextlib.asynccontextmanager
async def k8s_node_agent(
    tmp_path: Path,
    server: KubeletStatsServer,
    naming: str = "otel",
    pod_resources: Path | None = None,
) -> AsyncIterator[str]:
    """pipelines/k8s-node.yaml through the real service, with local ports and peers (the
    pod-resources socket `pod_resources`, or none there); yields its /metrics URL."""
    port, missing = free_port(), tmp_path / "missing"
    socket = pod_resources or missing / "kubelet.sock"
    overlay = tmp_path / "local.yaml"
    overlay.write_text(
        json.dumps(
            {
                "receivers": {
                    "nvml": {
                        "collection_interval": "1s",
                        "backend": "simulated",
                        "simulated": {"gpus": 1},
                    },
                    "kubelet_stats": {
                        "collection_interval": "1s",
                        "endpoint": server.url,
                        "insecure_skip_verify": False,
                        "ca_file": str(server.ca_file),
                        "token_file": token_file(tmp_path),
                    },
                },
                "processors": {
                    "k8s_attributes": {
                        "pod_resources_socket": str(socket),
                        "refresh_interval": "1s",
                    },
                    "container_env": {
                        "containerd": {"socket": str(missing / "containerd.sock")},
                        "docker": {"socket": str(missing / "docker.sock")},
                    },
                },
                "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{port}", "naming": naming}},
                "extensions": {"health_check": {"endpoint": "127.0.0.1:0"}},
                # the agent's own metrics beside the series, where the tests read them (the
                # file serves them on 8888, a port of their own)
                "service": {"telemetry": {"metrics": {"readers": []}}},
            }
        )
    )
    registry = builtin_registry()
    config = load_config(
        [str(ROOT / "pipelines" / "k8s-node.yaml"), str(overlay)],
        registry,
        environ={"K8S_NODE_NAME": NODE},
    )
    service = Service(config, registry, SelfTelemetry())
    await service.start()
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        await service.shutdown()


async def test_the_k8s_node_pipeline_serves_kubelet_series_beside_gpu_series(
    tmp_path: Path,
) -> None:
    async with kubelet(tmp_path) as server, k8s_node_agent(tmp_path, server) as url:
        body = await _metrics_until(url, WANTED)
    missing_series = [w for w in WANTED if w not in body]
    assert missing_series == [], body[:3000]


async def test_pods_pod_resources_lists_that_the_summary_misses_are_counted(
    tmp_path: Path, pod_resources: FakeKubelet
) -> None:
    """The cAdvisor failure's silent gap made visible: a GPU pod the kubelet's pod-resources
    API lists and its summary does not (no container CPU or memory series for it) is counted
    as `not_in_summary`; a pod the summary names without any stats yet as `no_stats_yet`; a
    pod both list fully is not counted. Through pipelines/k8s-node.yaml, where k8s_attributes
    shares what pod-resources lists with kubelet_stats."""
    pod_resources.set_pods(
        pod("ml", "trainer-0", container("trainer", {"nvidia.com/gpu": ["GPU-1"]})),
        pod("ml", "pending-1", container("main")),
        pod("ml", "ghost-gpu", container("cuda", {"nvidia.com/gpu": ["GPU-2"]})),
    )
    missed = 'otelgpu_kubelet_missed_pods_total{reason="%s",receiver="kubelet_stats"}'
    async with (
        kubelet(tmp_path) as server,
        k8s_node_agent(tmp_path, server, pod_resources=pod_resources.socket) as url,
    ):
        body = await _metrics_until(url, (missed % "not_in_summary", missed % "no_stats_yet"))
    lines = [line for line in body.splitlines() if line.startswith("otelgpu_kubelet_missed")]
    counts = {name: float(value) for name, value in (line.split(" ") for line in lines)}
    assert counts.keys() == {missed % "not_in_summary", missed % "no_stats_yet"}, body[:3000]
    # one pod each, per judged read: trainer-0, in both, is never counted
    assert counts[missed % "not_in_summary"] == counts[missed % "no_stats_yet"] >= 1


async def test_a_recreated_pod_is_one_set_of_series_in_metrics_at_once(tmp_path: Path) -> None:
    """A StatefulSet pod recreated under its name (new uid): the first /metrics body with the
    new pod's series holds none of the old one's, through the shipped pipeline's processors
    (gone markers pass k8s_attributes and container_env) and the Prometheus exporter."""
    old_uid = "6f1e2d3c-0000-4a5b-8c7d-1"
    async with kubelet(tmp_path) as server, k8s_node_agent(tmp_path, server) as url:
        before = await _metrics_until(url, (old_uid, "\ncontainer_memory_working_set"))
        server.summary["pods"][0]["podRef"]["uid"] = "0b0b0b0b-new"
        after = await _metrics_until(url, ("0b0b0b0b-new",))
        server.summary["pods"].pop(0)  # then the pod is deleted for good
        gone = await _metrics_until(url, (), absent=("trainer-0",))
    assert old_uid in before
    assert "0b0b0b0b-new" in after and old_uid not in after
    assert 'k8s_pod_name="trainer-0"' not in gone and "\nk8s_node_cpu_usage" in gone


@pytest.mark.parametrize(
    ("naming", "gpu_series", "node_label"),
    [
        ("otel", "\nhw_gpu_utilization_ratio{", "k8s_node_name"),
        ("dcgm", "\nDCGM_FI_DEV_GPU_UTIL{", "Hostname"),
    ],
)
async def test_gpu_and_kubelet_series_share_one_node_label(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    naming: str,
    gpu_series: str,
    node_label: str,
) -> None:
    """Node-level joins (`on (LABEL)`) of GPU series with the kubelet's: in both namings both
    carry the node under one label name, with the downward API's node name as its value."""
    monkeypatch.setenv("K8S_NODE_NAME", NODE)  # as the DaemonSet sets it
    async with kubelet(tmp_path) as server, k8s_node_agent(tmp_path, server, naming) as url:
        body = await _metrics_until(url, (gpu_series, "\nk8s_node_cpu_usage"))
    wanted = f'{node_label}="{NODE}"'
    gpu_lines = [line for line in body.splitlines() if line.startswith(gpu_series[1:])]
    node_lines = [line for line in body.splitlines() if line.startswith("k8s_node_cpu_usage")]
    pod_lines = [line for line in body.splitlines() if line.startswith("k8s_pod_cpu_usage")]
    assert gpu_lines and node_lines and pod_lines, body[:3000]
    for line in gpu_lines + node_lines + pod_lines:
        assert wanted in line, line


WANTED = (
    "\nk8s_pod_cpu_usage",
    'k8s_pod_name="trainer-0"',
    'k8s_container_name="log-shipper"',
    "\ncontainer_memory_working_set",
    "\nhw_gpu_utilization",
    'otelgpu_source_up{source="kubelet"} 1',
)


async def _metrics_until(
    url: str, wanted: tuple[str, ...], limit: float = 20.0, absent: tuple[str, ...] = ()
) -> str:
    """The /metrics body once it holds every wanted text and none of `absent` (or the last
    body at the limit)."""
    body = ""
    deadline = asyncio.get_running_loop().time() + limit
    async with aiohttp.ClientSession() as session:
        while asyncio.get_running_loop().time() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as response:
                    body = "\n" + await response.text()
            if (
                len(body) > 1
                and all(w in body for w in wanted)
                and not any(a in body for a in absent)
            ):
                break
            await asyncio.sleep(0.2)
    return body
