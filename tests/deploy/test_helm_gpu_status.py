"""The chart serves the GPU status (each GPU's health, `nvidia_gpu_up` / `hw_status`, and its
static facts, `hw_gpu_info`) on a port of its own by default: the GPU endpoint's `/metrics`
then holds only series that carry the holder of a held GPU, as dcgm-exporter's e2e check
expects of every series there. The Service and the ServiceMonitor carry the status port as the
metrics port (same scheme, TLS, basic auth, job and relabelings), so the health alerts and the
dashboard read the same series as before."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from otelgpu.component.component import Kind
from otelgpu.config import load_config
from otelgpu.service.builtins import builtin_registry
from tests.deploy import helm, sync
from tests.deploy.chart_pipeline import gpu_status_apart
from tests.deploy.conftest import SIMULATED_GPU0
from tests.deploy.test_helm import by_name, pipeline, render
from tests.deploy.test_helm_telemetry import overrides, ports
from tests.deploy.test_manifests import one
from tests.integration.agent_process import AgentProcess, scrape_until
from tests.peers.kubelet import FakeKubelet
from tests.peers.ports import free_port

Doc = dict[str, Any]
STATUS_FAMILIES = ("nvidia_gpu_up", "hw_gpu_info")


def exporters(config: Any) -> dict[str, Any]:
    """Each exporter's validated config, by ID."""
    return {str(cid): model for cid, model in config.components[Kind.EXPORTER].items()}


def loaded(docs: tuple[Doc, ...], tmp_path: Path) -> Any:
    path = tmp_path / "pipeline.yaml"
    path.write_text(by_name(docs, "ConfigMap", "-pipeline")["data"]["pipeline.yaml"])
    environ = {"K8S_NODE_NAME": "gpu-node-1", "OTELGPU_METRICS_USERNAME": "p"}
    environ["OTELGPU_METRICS_PASSWORD_HASH"] = "$2b$10$" + "a" * 53
    return load_config([str(path)], builtin_registry(), overrides(docs), environ)


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_by_default_health_and_info_leave_the_gpu_endpoint(naming: str, tmp_path: Path) -> None:
    docs = render(naming=naming, otlp={"enabled": True})
    source = yaml.safe_load(sync.PIPELINE.read_text())
    source["exporters"]["prometheus"]["naming"] = naming
    assert pipeline(docs) == gpu_status_apart(source)
    config = loaded(docs, tmp_path)  # the agent takes it: the filters, both exporters
    status = exporters(config)["prometheus/gpu_status"]
    assert (status.endpoint, status.naming, status.device_info) == ("0.0.0.0:9401", naming, True)
    assert exporters(config)["prometheus"].device_info is False
    assert ports(docs) == {"metrics": 9400, "telemetry": 8888, "gpu-status": 9401, "health": 13133}
    service = {p["name"]: p for p in one(docs, "Service")["spec"]["ports"]}
    assert (service["gpu-status"]["port"], service["gpu-status"]["targetPort"]) == (
        9401,
        "gpu-status",
    )


def test_the_servicemonitor_scrapes_the_status_port_as_the_metrics_port() -> None:
    secured = {
        "prometheus": {"tls": {"secretName": "tls"}, "basicAuth": {"secretName": "auth"}},
        "serviceMonitor": {
            "tlsConfig": {"insecureSkipVerify": True},
            "basicAuth": {"username": {"name": "a", "key": "u"}},
            "relabelings": [{"action": "labeldrop", "regex": "x"}],
        },
    }
    endpoints = one(render(**secured), "ServiceMonitor")["spec"]["endpoints"]
    by_port = {e["port"]: e for e in endpoints}
    assert list(by_port) == ["metrics", "gpu-status", "telemetry"]
    assert {**by_port["gpu-status"], "port": "metrics"} == by_port["metrics"]
    assert by_port["gpu-status"]["scheme"] == "https"


def test_the_status_endpoint_gets_the_metrics_endpoints_tls_and_basic_auth(
    tmp_path: Path,
) -> None:
    secured = {"tls": {"secretName": "tls", "clientCA": True}, "basicAuth": {"secretName": "a"}}
    found = exporters(loaded(render(prometheus=secured), tmp_path))
    gpu, status = found["prometheus"], found["prometheus/gpu_status"]
    assert status.tls == gpu.tls and status.tls is not None
    assert status.tls.client_ca_file == "/etc/otelgpu-tls/ca.crt"
    assert status.basic_auth == gpu.basic_auth and status.basic_auth is not None


def test_own_port_off_keeps_them_beside_the_gpu_series() -> None:
    docs = render(gpuStatus={"ownPort": False})
    source = yaml.safe_load(sync.PIPELINE.read_text())
    del source["exporters"]["otlp"]
    source["service"]["pipelines"]["metrics/gpu"]["exporters"].remove("otlp")
    assert pipeline(docs) == source
    assert "gpu-status" not in ports(docs)
    assert "gpu-status" not in [p["name"] for p in one(docs, "Service")["spec"]["ports"]]
    assert "gpu-status" not in [e["port"] for e in one(docs, "ServiceMonitor")["spec"]["endpoints"]]


def test_the_status_port_follows_its_value_and_refuses_a_taken_one() -> None:
    docs = render(gpuStatus={"port": 19401})
    assert pipeline(docs)["exporters"]["prometheus/gpu_status"]["endpoint"] == "0.0.0.0:19401"
    assert ports(docs)["gpu-status"] == 19401
    for taken in (9400, 13133, 8888):
        with pytest.raises(helm.engine().HelmRenderError, match=rf"gpuStatus\.port {taken} is"):
            helm.render({"gpuStatus": {"port": taken}})


def test_with_kubelet_stats_the_nvml_readings_alone_feed_the_status_endpoint() -> None:
    docs = render(kubeletStats={"enabled": True})
    source = yaml.safe_load(sync.NODE_PIPELINE.read_text())
    assert pipeline(docs) == gpu_status_apart(source)
    assert pipeline(docs)["service"]["pipelines"]["metrics/gpu_status"]["receivers"] == ["nvml"]


def test_a_counters_csv_without_a_health_metric_keeps_the_info_on_the_gpu_endpoint() -> None:
    """Nothing would carry the devices to the status endpoint: the chart does not split, and
    says so in values.yaml; with nvidia.gpu.up switched on it does."""
    csv = "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
    plain = pipeline(render(counters=csv))
    assert "prometheus/gpu_status" not in plain["exporters"]
    assert "device_info" not in plain["exporters"]["prometheus"]
    assert "gpu-status" not in ports(render(counters=csv))
    switched = render(counters=csv, metrics={"nvidia.gpu.up": {"enabled": True}})
    assert "prometheus/gpu_status" in pipeline(switched)["exporters"]
    assert ports(switched)["gpu-status"] == 9401
    off = render(metrics={"nvidia.gpu.up": {"enabled": False}})
    assert "prometheus/gpu_status" not in pipeline(off)["exporters"]


def test_a_pipeline_of_your_own_is_run_as_given() -> None:
    own = yaml.safe_load(sync.PIPELINE.read_text())
    docs = render(pipeline={"config": yaml.safe_dump(own)})
    assert "gpu-status" not in ports(docs)
    assert "gpu-status" not in [e["port"] for e in one(docs, "ServiceMonitor")["spec"]["endpoints"]]


@pytest.mark.integration
async def test_every_family_on_the_gpu_endpoint_carries_the_holding_pod(
    kubelet: FakeKubelet, tmp_path: Path
) -> None:
    """dcgm-exporter's tests/e2e/e2e_verify_default_configuration_test.go "should verify
    metrics": with a workload on the GPU, every series of the scraped endpoint carries non-empty
    pod, namespace and container. The real agent runs the chart's pipeline (naming dcgm) and
    overrides on a simulated GPU the kubelet stand-in says a pod holds: every series of its GPU
    endpoint carries them; the health and info series are on the status endpoint."""
    gpu, status, own = free_port(), free_port(), free_port()
    docs = render(naming="dcgm", gpuStatus={"port": status}, telemetry={"port": own})
    chart_pipeline = tmp_path / "pipeline.yaml"
    chart_pipeline.write_text(by_name(docs, "ConfigMap", "-pipeline")["data"]["pipeline.yaml"])
    missing = tmp_path / "missing"
    local = {
        "receivers": {"nvml": {
            "collection_interval": "1s", "host_proc": "/proc", "backend": "simulated",
            "simulated": {"gpus": 1},
        }},
        "processors": {
            "k8s_attributes": {"pod_resources_socket": str(kubelet.socket)},
            "container_env": {
                "containerd": {"socket": str(missing / "containerd.sock")},
                "docker": {"socket": str(missing / "docker.sock")},
            },
        },
        "exporters": {
            "prometheus": {"endpoint": f"127.0.0.1:{gpu}"},
            "prometheus/gpu_status": {"endpoint": f"127.0.0.1:{status}"},
        },
        "extensions": {"health_check": {"endpoint": f"127.0.0.1:{free_port()}"}},
    }  # fmt: skip
    overlay = tmp_path / "local.yaml"
    overlay.write_text(json.dumps(local))
    sets = [arg for o in overrides(docs) for arg in ("--set", o)]
    process = AgentProcess(
        "run", "-c", str(chart_pipeline), "-c", str(overlay), *sets,
        env={**os.environ, "K8S_NODE_NAME": "gpu-node-1"},
    )  # fmt: skip
    try:
        await asyncio.to_thread(process.wait_for, r"started \d+ pipelines")
        body = await asyncio.to_thread(scrape_until, gpu, "nvidia_gpu_allocation_ratio{")
        body = await asyncio.to_thread(scrape_until, gpu, 'pod="train-0"')
        series = [line for line in body.splitlines() if line and not line.startswith("#")]
        families = {re.split(r"[{ ]", line, maxsplit=1)[0] for line in series}
        assert len(families) >= 10 and not families & set(STATUS_FAMILIES), families
        for line in series:
            labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', line))
            held = (labels.get("pod"), labels.get("namespace"), labels.get("container"))
            assert held == ("train-0", "ml", "trainer"), line
        apart = await asyncio.to_thread(scrape_until, status, "hw_gpu_info{")
        apart = await asyncio.to_thread(scrape_until, status, "nvidia_gpu_up{")
        served = {
            re.split(r"[{ ]", line, maxsplit=1)[0]
            for line in apart.splitlines()
            if line and not line.startswith("#")
        }
        assert served == set(STATUS_FAMILIES) and f'UUID="{SIMULATED_GPU0}"' in apart
        assert process.stop() == 0
    finally:
        process.kill()
