"""The DaemonSet's pipeline, run for real on simulated GPUs, serves every metric and label
value the alert rules and the dashboard ask for, in both namings: the names are checked
against the running agent's /metrics, not only against the catalog. As shipped (the nvml
receiver's default metric set) it serves what the default rules and the dashboards use, and
none of what only the detail rules use; with `metric_set: all` it serves the detail rules'
metrics too."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.deploy.names import OWN_LIMITS, metrics_in, served
from tests.deploy.sync import DCGM_DETAIL_RULES, DCGM_RULES, DETAIL_RULES, PIPELINE, RULES
from tests.deploy.test_dashboard import queries
from tests.deploy.tools import ROOT
from tests.peers.kubelet import FakeKubelet
from tests.peers.ports import free_port as _free_port

pytestmark = pytest.mark.integration

# Rule matchers on label values that must exist on the wire: those of the default rules, and
# with `metric_set: all` those of the detail rules too.
WIRE_SERIES = {
    ("otel", "default"): (
        'hw_sensor_location="memory"',
        'hw_gpu_task="general"',
        'nvidia_gpu_memory_remapped_rows_total{error_type="uncorrected"',
        'nvidia_xid_code="79"',
        'k8s_node_name="gpu-node-1"',
    ),
    ("otel", "all"): (
        'hw_errors_total{error_type="uncorrected"',
        'nvidia_gpu_clock_violation_policy="thermal"',
        'nvidia_gpu_clock_event_reason="hw_slowdown"',
        'error_type="recovery"',
    ),
    # In naming dcgm a GPU series names its node by Hostname only; the rules' k8s_node_name is
    # the scrape target's label, which the ServiceMonitor sets from the pod's node.
    ("dcgm", "default"): (
        'err_code="79"',
        'Hostname="gpu-node-1"',
        'UUID="GPU-',
        'namespace="ml"',
    ),
    ("dcgm", "all"): ('nvidia_gpu_clock_event_reason="hw_slowdown"',),
}
SELF_TELEMETRY = (
    "otelgpu_source_up",
    "otelgpu_source_last_success_timestamp_seconds",
    "otelgpu_enrichment_unmatched_points_total",
)


def _rules_metrics(path: Path) -> set[str]:
    groups = yaml.safe_load(path.read_text())["groups"]
    return {name for g in groups for r in g["rules"] for name in metrics_in(r["expr"])}


def _default_gpu_metrics(naming: str) -> set[str]:
    """GPU metrics the default rules and the dashboard use (the GPU's own temperature limits
    aside: opt-in, read where served, never waited on)."""
    used = _rules_metrics(RULES if naming == "otel" else DCGM_RULES)
    for query in queries(naming):
        used |= metrics_in(query)
    return (used & served(naming)) - OWN_LIMITS


def _detail_gpu_metrics(naming: str) -> set[str]:
    """GPU metrics the detail rules use."""
    return _rules_metrics(DETAIL_RULES if naming == "otel" else DCGM_DETAIL_RULES) & served(naming)


@pytest.fixture(params=["otel", "dcgm"])
def naming(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["default", "all"])
def metric_set(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def metrics_url(
    tmp_path: Path, kubelet: FakeKubelet, naming: str, metric_set: str
) -> Iterator[tuple[str, str]]:
    """The agent running pipelines/k8s-daemonset.yaml with simulated GPUs and local ports
    (and the nvml receiver's `metric_set` as the test asks): the URLs of its GPU series and of
    its own metrics (the pipeline's pull reader)."""
    port, health, own = _free_port(), _free_port(), _free_port()
    reader = {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": own}}}}
    missing = tmp_path / "missing"
    overrides = {
        "receivers": {"nvml": {
            "collection_interval": "1s",
            "metric_set": metric_set,
            "host_proc": "/proc",
            "backend": "simulated",
            "simulated": {"gpus": [{
                "processes": [{"pid": os.getpid(), "used_memory": "1GiB"}],
                "xid_errors": [{"code": 79, "after": "0s"}],
            }]},
        }},
        "processors": {
            "k8s_attributes": {"pod_resources_socket": str(kubelet.socket)},
            "container_env": {
                "containerd": {"socket": str(missing / "containerd.sock")},
                "docker": {"socket": str(missing / "docker.sock")},
            },
        },
        "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{port}", "naming": naming}},
        "extensions": {"health_check": {"endpoint": f"127.0.0.1:{health}"}},
        "service": {"telemetry": {"metrics": {"readers": [reader]}}},
    }  # fmt: skip
    overlay = tmp_path / "local.yaml"
    overlay.write_text(json.dumps(overrides))
    env = {**os.environ, "K8S_NODE_NAME": "gpu-node-1", "OTLP_ENDPOINT": "http://127.0.0.1:9"}
    agent = subprocess.Popen(
        [sys.executable, "-m", "otelgpu", "run", "-c", str(PIPELINE), "-c", str(overlay)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}/metrics", f"http://127.0.0.1:{own}/metrics"
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()


def _scrape_until(url: str, wanted: list[str], limit: float = 30.0) -> str:
    """The /metrics body once it holds every wanted text (or the last body at the limit)."""
    body, deadline = "", time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                body = response.read().decode()
        except OSError:
            pass  # not listening yet
        if all(w in body for w in wanted):
            break
        time.sleep(0.2)
    return body


async def test_rules_and_dashboard_metrics_are_served(
    metrics_url: tuple[str, str], naming: str, metric_set: str
) -> None:
    gpu_url, own_url = metrics_url
    names = _default_gpu_metrics(naming)
    assert len(names) >= 10
    wire = list(WIRE_SERIES[naming, "default"])
    detail = _detail_gpu_metrics(naming) - names
    assert len(detail) >= 4
    if metric_set == "all":  # the detail rules, loaded beside the default ones
        names |= detail
        wire += WIRE_SERIES[naming, "all"]
    wanted = [f"\n{n}{{" for n in sorted(names)] + wire
    own = [f"\n{n}{{" for n in SELF_TELEMETRY]
    # Scraped from a thread: the kubelet stand-in answers on this test's event loop.
    body = "\n" + await asyncio.to_thread(_scrape_until, gpu_url, wanted)
    missing = [w.strip() for w in wanted if w not in body]
    assert missing == []
    # The agent's own metrics the rules read: on their own port, none beside the GPU series.
    apart = "\n" + await asyncio.to_thread(_scrape_until, own_url, own)
    assert [w.strip() for w in own if w not in apart] == []
    assert "\notelgpu_" not in body
    if metric_set == "default":  # lean as shipped: the detail rules' inputs are not served
        assert [n for n in sorted(detail) if f"\n{n}{{" in body] == []
        assert [n for n in sorted(OWN_LIMITS) if f"\n{n}{{" in body] == []  # opt-in too
