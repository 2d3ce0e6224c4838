"""The chart takes dcgm-exporter's counters CSV (as text, or an existing ConfigMap) and
per-metric switches without a pipeline of the user's; the agent accepts what it makes, and the
chart accepts the values `otelgpu migrate dcgm-exporter` writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from otelgpu.migrate import dcgm_exporter
from tests.deploy import helm
from tests.deploy.test_helm import by_name, pipeline, pod_spec, render
from tests.deploy.test_manifests import one
from tests.deploy.tools import ROOT

DEFAULT_CSV = ROOT / "tests/unit/receivers/nvml/testdata/default-counters.csv"
MOUNTED = "/etc/otelgpu-counters/counters.csv"


def mounts(docs: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = pod_spec(docs)
    (volume,) = [v for v in spec["volumes"] if v["name"] == "counters"]
    (container,) = spec["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "counters"]
    return volume, mount


def validate(pipeline_text: str, csv_text: str, tmp_path: Path) -> str:
    """`otelgpu validate` of a chart pipeline, its counters file where this machine has it."""
    csv = tmp_path / "counters.csv"
    csv.write_text(csv_text)
    path = tmp_path / "pipeline.yaml"
    path.write_text(pipeline_text.replace(MOUNTED, str(csv)))
    env = {**os.environ, "K8S_NODE_NAME": "gpu-node-1"}
    env.pop("OTLP_ENDPOINT", None)
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "validate", "-c", str(path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_counters_text_becomes_a_mounted_configmap_the_chart_pipeline_reads(
    tmp_path: Path,
) -> None:
    csv = DEFAULT_CSV.read_text()
    docs = render(
        counters=csv, naming="dcgm", collectionInterval="30s",
        otlp={"endpoint": "http://gw:4317"}, containerEnv={"podLabels": ["team"]},
        metrics={"nvidia.gpu.up": {"enabled": True}},
    )  # fmt: skip
    assert by_name(docs, "ConfigMap", "-counters")["data"] == {"counters.csv": csv}
    volume, mount = mounts(docs)
    assert volume["configMap"] == {
        "name": "otelgpu-counters",
        "items": [{"key": "counters.csv", "path": "counters.csv"}],
    }
    assert mount == {"name": "counters", "mountPath": "/etc/otelgpu-counters", "readOnly": True}
    nvml = pipeline(docs)["receivers"]["nvml"]
    assert nvml["counters_csv"] == MOUNTED and "metric_set" not in nvml
    assert nvml["metrics"] == {"nvidia.gpu.up": {"enabled": True}}
    assert nvml["collection_interval"] == "30s"
    annotations = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert "checksum/counters" in annotations  # a new CSV rolls the agents
    text = by_name(docs, "ConfigMap", "-pipeline")["data"]["pipeline.yaml"]
    assert "26 of 26 fields served" in validate(text, csv, tmp_path)


def test_an_existing_configmap_is_mounted_by_its_key() -> None:
    docs = render(countersConfigMap={"name": "exporter-metrics-config-map"})
    assert not [d for d in docs if d["metadata"]["name"].endswith("-counters")]
    volume, _ = mounts(docs)
    assert volume["configMap"] == {
        "name": "exporter-metrics-config-map",
        "items": [{"key": "metrics", "path": "counters.csv"}],
    }
    assert pipeline(docs)["receivers"]["nvml"]["counters_csv"] == MOUNTED


def test_without_a_csv_nothing_is_mounted_and_metric_switches_still_reach_the_receiver() -> None:
    docs = render(metrics={"hw.gpu.memory.limit": {"enabled": True}})
    assert not [v for v in pod_spec(docs)["volumes"] if v["name"] == "counters"]
    nvml = pipeline(docs)["receivers"]["nvml"]
    assert nvml["metric_set"] == "default"
    assert nvml["metrics"] == {"hw.gpu.memory.limit": {"enabled": True}}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"counters": "x", "metricSet": "all"}, 'metricSet "all" and a counters CSV both choose'),
        ({"counters": "x", "countersConfigMap": {"name": "cm"}}, "counters and countersConfigMap"),
        (
            {
                "metrics": {"hw.status": {"enabled": True}},
                "pipeline": {"config": "receivers: {}\n"},
            },
            "metrics: these values shape the chart's own pipeline",
        ),
    ],
)
def test_conflicting_values_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.engine().HelmRenderError, match=message):
        helm.render(values)


def test_the_schema_refuses_a_misspelt_switch() -> None:
    with pytest.raises(helm.engine().HelmValuesError, match="enable"):
        helm.render({"metrics": {"nvidia.gpu.up": {"enable": True}}})


@pytest.mark.parametrize(
    "argv",
    [["-f", str(DEFAULT_CSV)], ["-f", str(DEFAULT_CSV), "-d", "g:0", "-n"]],
    ids=["chart-values", "pipeline-config"],
)
def test_the_chart_takes_what_migrate_writes(argv: list[str], tmp_path: Path) -> None:
    migration = dcgm_exporter.migrate(argv, {"DCGM_EXPORTER_KUBERNETES": "true"})
    _, chart_text = dcgm_exporter.render(migration)
    values = yaml.safe_load(chart_text)
    docs = tuple(helm.render(values))
    text = by_name(docs, "ConfigMap", "-pipeline")["data"]["pipeline.yaml"]
    assert "26 of 26 fields served" in validate(text, DEFAULT_CSV.read_text(), tmp_path)
    assert pipeline(docs)["exporters"]["prometheus"]["naming"] == "dcgm"
