"""The pipeline the chart runs, written out by hand from a repository pipeline file: what the
chart's values do to it, for the tests to hold the rendered ConfigMap to."""

from __future__ import annotations

import copy
from typing import Any

Doc = dict[str, Any]
HEALTH = ["nvidia.gpu.up", "hw.status"]


def gpu_status_apart(source: Doc, port: int = 9401) -> Doc:
    """`source` (a pipeline file of the repository) as the chart runs it with the GPU status
    on `port`: what values.yaml's gpuStatus says, written out by hand."""
    p = copy.deepcopy(source)
    p["processors"]["filter/gpu_status"] = {"metrics": {"include": HEALTH}}
    p["processors"]["filter/not_gpu_status"] = {"metrics": {"exclude": HEALTH}}
    status = {**p["exporters"]["prometheus"], "endpoint": f"0.0.0.0:{port}"}
    p["exporters"]["prometheus"]["device_info"] = False
    p["exporters"]["prometheus/gpu_status"] = status
    nvml = [r for r in p["receivers"] if r == "nvml" or r.startswith("nvml/")]
    pipelines = p["service"]["pipelines"]
    for each in pipelines.values():
        if "prometheus" in each["exporters"]:
            each["processors"] = ["filter/not_gpu_status", *each.get("processors", [])]
    otlp = ["otlp"] if "otlp" in p["exporters"] else []
    pipelines["metrics/gpu_status"] = {
        "receivers": nvml,
        "processors": ["filter/gpu_status"],
        "exporters": ["prometheus/gpu_status", *otlp],
    }
    return p
