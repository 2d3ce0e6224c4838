"""The pipeline the secrets tests run the agent with: one simulated GPU, k8s_attributes on the
test's pod-resources server, container_env on a private containerd with the given include
filters and no cap that could hide a leak, and every exporter a canary could leave by."""

from __future__ import annotations

from typing import Any

from tests.peers.kubelet import FakeKubelet
from tests.peers.rotel import Rotel
from tests.peers.runtime import Containerd


def secrets_pipeline(
    *,
    gpu: str,
    containerd: Containerd,
    kubelet: FakeKubelet,
    otlp: Rotel,
    ports: list[int],
    node_name: str,
    filters: dict[str, Any],
    max_attributes: int,
    otlp_http: bool = False,
) -> dict[str, Any]:
    """Two Prometheus exporters (otel and dcgm naming) on `ports`, OTLP gRPC to `otlp` (and
    OTLP/HTTP too with `otlp_http`), debug logs; `filters` are container_env's sections."""
    exporters: dict[str, Any] = {
        "prometheus": {"endpoint": f"127.0.0.1:{ports[0]}"},
        "prometheus/dcgm": {"endpoint": f"127.0.0.1:{ports[1]}", "naming": "dcgm"},
        "otlp": {"endpoint": otlp.grpc_endpoint, "tls": {"insecure": True}},
    }
    if otlp_http:
        exporters["otlp_http"] = {"endpoint": otlp.http_endpoint}
    return {
        "receivers": {
            "nvml": {
                "collection_interval": "500ms",
                "backend": "simulated",
                "simulated": {"gpus": [{"uuid": gpu}]},
            }
        },
        "processors": {
            "k8s_attributes": {
                "pod_resources_socket": str(kubelet.socket),
                "refresh_interval": "500ms",
                "node_name": node_name,
            },
            "container_env": {
                "runtime": "containerd",
                "containerd": {"socket": str(containerd.socket)},
                "refresh_interval": "500ms",
                **filters,
                # No cap hides a leak: everything not refused is exported.
                "max_attributes": max_attributes,
                "max_value_length": 4096,
            },
        },
        "exporters": exporters,
        "service": {
            "telemetry": {"logs": {"level": "debug"}},
            "pipelines": {
                "metrics/gpu": {
                    "receivers": ["nvml"],
                    "processors": ["k8s_attributes", "container_env"],
                    "exporters": list(exporters),
                }
            },
        },
    }
