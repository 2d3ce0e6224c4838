"""The chart takes dcgm-exporter's counters CSV (as text, or an existing ConfigMap) and
per-metric switches without a pipeline of the user's; the agent accepts what it makes, and the
chart accepts the values `otelgpu migrate dcgm-exporter` writes."""

from __future__ import annotations

import asyncio
import os
import re
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


# A CSV that leaves out most of what the default alerts read (dcgm_memory_temp: a 1.x name).
SOME_FIELDS = """\
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
dcgm_memory_temp, gauge, Memory temperature (in C).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
# DCGM_FI_DEV_FB_USED, gauge, commented out: not selected
"""


def served_families(
    csv_text: str, naming: str, metrics: dict[str, Any], tmp_path: Path
) -> set[str]:
    """The series names the real nvml receiver and prometheus exporter serve with this CSV and
    these switches (a simulated GPU that has had an XID), plus the allocation series."""
    from otelgpu.component.component import Kind
    from otelgpu.component.telemetry import SelfTelemetry
    from otelgpu.exporters.prometheus.series import SeriesStore
    from otelgpu.receivers.nvml.config import NvmlReceiverConfig
    from otelgpu.receivers.nvml.receiver import NvmlReceiver
    from tests.fakes import Sink
    from tests.unit.exporters.prometheus.translators import make_translator, nvml_settings

    path = tmp_path / f"{naming}.csv"
    path.write_text(csv_text)
    config = NvmlReceiverConfig.model_validate(
        {
            "backend": "simulated",
            "counters_csv": str(path),
            "metrics": metrics,
            "simulated": {"gpus": [{"xid_errors": [{"code": 79, "after": "0s"}]}]},
        }
    )

    async def scrape() -> Any:
        telemetry = SelfTelemetry()
        receiver = NvmlReceiver(nvml_settings("nvml", Kind.RECEIVER, telemetry), config, Sink())
        try:
            await receiver.scrape()
            return await receiver.scrape()
        finally:
            await receiver.shutdown()

    store = SeriesStore()
    make_translator(naming).ingest(store, asyncio.run(scrape()), now=1.0)
    return set(store.families) | {"nvidia_gpu_allocation_ratio"}


def installed_rules(docs: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    groups = one(docs, "PrometheusRule")["spec"]["groups"]
    return [rule for group in groups for rule in group["rules"]]


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
@pytest.mark.parametrize("switched", [{}, {"nvidia.gpu.up": {"enabled": True}}])
def test_with_a_counters_csv_only_alerts_on_what_it_selects_are_installed(
    naming: str, switched: dict[str, Any], tmp_path: Path
) -> None:
    """An alert on a series the CSV leaves out could never fire: the chart leaves it out and
    names it in NOTES.txt; every rule it installs reads only series the agent then serves (the
    real receiver and exporter say which), the agent's own, kube-state-metrics' or recorded
    ones it installs too, or the GPU's own temperature limits, which the temperature alert
    falls back without."""
    from tests.deploy.names import EXTERNAL, OWN_LIMITS, metrics_in, self_telemetry_names

    values = {"counters": SOME_FIELDS, "naming": naming, "metrics": switched}
    docs = render(**values)
    served = served_families(SOME_FIELDS, naming, switched, tmp_path)
    rules = installed_rules(docs)
    recorded = {rule["record"] for rule in rules if "record" in rule}
    for rule in rules:
        read = metrics_in(rule["expr"]) - recorded - EXTERNAL - self_telemetry_names()
        read -= OWN_LIMITS  # read where served (the CSV lists them), never waited on
        assert read <= served, (rule.get("alert") or rule["record"], read - served)
    alerts = {rule["alert"] for rule in rules if "alert" in rule}
    assert {"OtelgpuGPUTemperatureHigh", "OtelgpuGPUMemoryTemperatureHigh"} <= alerts
    assert {"OtelgpuXidCritical", "OtelgpuSourceDown", "OtelgpuAgentDown"} <= alerts
    everything = {
        rule["alert"] for rule in installed_rules(render(naming=naming)) if "alert" in rule
    }
    left = sorted(everything - alerts)
    assert "OtelgpuGPUMemoryPressure" in left and "OtelgpuRowRemapFailure" in left
    assert ("OtelgpuGPULost" in left) == (not switched)
    notes = helm.render_files(values)["otelgpu/templates/NOTES.txt"]
    named = notes.split("could never fire", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"Otelgpu\w+", named)) == left


def test_a_metric_switched_off_takes_its_alerts_out_whatever_the_csv_lists() -> None:
    """`metrics` wins over the CSV in the receiver (a switched-off metric is not emitted), so it
    does for the alerts too."""
    values = {"counters": SOME_FIELDS, "metrics": {"hw.temperature": {"enabled": False}}}
    alerts = {rule.get("alert") for rule in installed_rules(render(**values))}
    assert not {"OtelgpuGPUTemperatureHigh", "OtelgpuGPUMemoryTemperatureHigh"} & alerts
    assert "OtelgpuXidCritical" in alerts


def test_with_a_counters_configmap_every_default_alert_stays_and_notes_say_why() -> None:
    values = {"countersConfigMap": {"name": "dcgm-metrics"}}
    alerts = {r.get("alert") for r in installed_rules(render(**values))}
    assert alerts == {r.get("alert") for r in installed_rules(render())}
    notes = helm.render_files(values)["otelgpu/templates/NOTES.txt"]
    assert "cannot read the counters CSV of\nConfigMap dcgm-metrics, so alerts" in notes


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
