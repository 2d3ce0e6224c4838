"""The chart's values for the common cases: naming, the metric set, OTLP, the collection
interval, the business-label include lists, TLS, the standard names and overrides; and values.schema.json,
which refuses a key the chart does not read. Rendered with Helm's own engine
(tests/deploy/helm.py); the pipelines the chart makes are validated by the agent itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import helm, sync
from tests.deploy.test_helm import by_name, pipeline, pod_spec, render
from tests.deploy.test_manifests import agent, one
from tests.deploy.tools import ROOT, run

SCHEMA = json.loads((helm.CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((helm.CHART / "values.yaml").read_text())
DEFAULT_OTLP = yaml.safe_load(sync.PIPELINE.read_text())["exporters"]["otlp"]


def _refused(values: dict[str, Any]) -> str:
    with pytest.raises(helm.engine().HelmValuesError) as raised:
        helm.render(values)
    return str(raised.value)


@pytest.mark.parametrize(
    ("values", "where", "key"),
    [
        ({"runtim": "docker"}, "''", "runtim"),
        ({"serviceMonitor": {"intervall": "30s"}}, "'/serviceMonitor'", "intervall"),
        ({"prometheus": {"tsl": {"secretName": "x"}}}, "'/prometheus'", "tsl"),
        ({"otlp": {"endpont": "http://gw:4317"}}, "'/otlp'", "endpont"),
        # the pipeline file's spelling is not the chart's
        ({"containerEnv": {"pod_labels": ["team"]}}, "'/containerEnv'", "pod_labels"),
        ({"image": {"registry": "ghcr.io"}}, "'/image'", "registry"),
    ],
)
def test_the_schema_refuses_a_key_the_chart_does_not_read(
    values: dict[str, Any], where: str, key: str
) -> None:
    message = _refused(values)
    assert f"at {where}: additional properties '{key}' not allowed" in message


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"naming": "prometheus"}, "/naming"),
        ({"metricSet": "lean"}, "/metricSet"),
        ({"collectionInterval": "10 seconds"}, "/collectionInterval"),
        ({"containerEnv": {"env": "TEAM"}}, "/containerEnv/env"),
        ({"otlp": {"enabled": "yes"}}, "/otlp/enabled"),
        ({"service": {"type": "ExternalName"}}, "/service/type"),
        ({"chargeback": {"gpuHourPrice": -1}}, "/chargeback/gpuHourPrice"),
    ],
)
def test_the_schema_refuses_a_wrong_type_or_choice(values: dict[str, Any], where: str) -> None:
    assert f"at '{where}'" in _refused(values)


def _strict_paths(schema: dict[str, Any], path: str = "") -> dict[str, set[str]]:
    """Every object the schema closes (additionalProperties false) and its keys."""
    found: dict[str, set[str]] = {}
    if schema.get("additionalProperties") is False:
        found[path] = set(schema["properties"])
    for key, sub in schema.get("properties", {}).items():
        found |= _strict_paths(sub, f"{path}.{key}" if path else key)
    return found


def test_the_schema_and_values_yaml_name_the_same_keys() -> None:
    # Documented in values.yaml as comments: set only to change the default behaviour.
    optional = {"": {"global"}, "otlp": {"enabled"}}
    closed = _strict_paths(SCHEMA)
    assert "" in closed and "serviceMonitor" in closed and "prometheus.tls" in closed
    for path, keys in closed.items():
        node = VALUES
        for part in filter(None, path.split(".")):
            node = node[part]
        assert set(node) == keys - optional.get(path, set()), path


def test_naming_dcgm_switches_the_exporter_the_rules_and_the_dashboard() -> None:
    docs = render(naming="dcgm", prometheus={"tls": {"secretName": "otelgpu-tls"}})
    assert pipeline(docs)["exporters"]["prometheus"]["naming"] == "dcgm"
    rules = json.dumps(one(docs, "PrometheusRule")["spec"])
    assert "DCGM_FI_DEV_GPU_TEMP" in rules and "DCGM_FI_DEV_XID_ERRORS" in rules
    assert "hw_temperature_celsius" not in rules and "nvidia_gpu_xid_errors_total" not in rules
    dashboard = by_name(docs, "ConfigMap", "-dashboard")["data"]["otelgpu-gpus-dcgm.json"]
    assert "DCGM_FI_DEV_GPU_UTIL" in dashboard and "hw_gpu_utilization_ratio" not in dashboard
    schemes = {e["port"]: e["scheme"] for e in one(docs, "ServiceMonitor")["spec"]["endpoints"]}
    # the telemetry port is plain; the GPU status port is served as the GPU series are
    assert schemes == {"metrics": "https", "gpu-status": "https", "telemetry": "http"}
    default = pipeline(render())["exporters"]["prometheus"]["naming"]
    assert default == "otel"


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_metric_set_all_reaches_the_receiver_and_adds_the_detail_rules(
    naming: str, tmp_path: Path
) -> None:
    rules, detail = {
        "otel": (sync.RULES, sync.DETAIL_RULES),
        "dcgm": (sync.DCGM_RULES, sync.DCGM_DETAIL_RULES),
    }[naming]
    lean = render(naming=naming)
    assert pipeline(lean)["receivers"]["nvml"]["metric_set"] == "default"
    assert one(lean, "PrometheusRule")["spec"] == yaml.safe_load(rules.read_text())
    docs = render(naming=naming, metricSet="all")
    assert pipeline(docs)["receivers"]["nvml"]["metric_set"] == "all"
    spec = one(docs, "PrometheusRule")["spec"]
    groups = (
        yaml.safe_load(rules.read_text())["groups"] + yaml.safe_load(detail.read_text())["groups"]
    )
    assert spec == {"groups": groups}
    assert "otelgpu.gpu_detail" in {g["name"] for g in spec["groups"]}
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(spec))
    checked = run("promtool", "check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The kubelet_stats pipeline's nvml receiver too, and the cost group still comes last.
    node = render(kubeletStats={"enabled": True}, metricSet="all", chargeback={"gpuHourPrice": 1})
    assert pipeline(node)["receivers"]["nvml"]["metric_set"] == "all"
    names = [g["name"] for g in one(node, "PrometheusRule")["spec"]["groups"]]
    assert names[-2:] == ["otelgpu.gpu_detail", "otelgpu.cost"]


def test_tls_makes_the_servicemonitor_scrape_https_unless_told_otherwise() -> None:
    def scheme(**values: Any) -> str:
        endpoint = one(render(**values), "ServiceMonitor")["spec"]["endpoints"][0]
        return str(endpoint["scheme"])

    tls = {"tls": {"secretName": "otelgpu-tls"}}
    assert scheme() == "http"
    assert scheme(prometheus=tls) == "https"
    assert scheme(prometheus=tls, serviceMonitor={"scheme": "http"}) == "http"
    assert scheme(prometheus={"basicAuth": {"secretName": "auth"}}) == "http"


def _exporters(docs: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], list[list[str]]]:
    """The exporters and each pipeline's exporter list, the GPU status's pipeline left out
    (tests/deploy/test_helm_gpu_status.py holds it)."""
    data = pipeline(docs)
    del data["service"]["pipelines"]["metrics/gpu_status"]
    lists = [p["exporters"] for p in data["service"]["pipelines"].values()]
    return data["exporters"], lists


def test_otlp_is_off_unless_an_endpoint_is_given() -> None:
    exporters, lists = _exporters(render())
    assert "otlp" not in exporters and lists == [["prometheus"]]
    exporters, lists = _exporters(render(otlp={"endpoint": "https://gw.example:4317"}))
    assert exporters["otlp"] == {**DEFAULT_OTLP, "endpoint": "https://gw.example:4317"}
    assert lists == [["prometheus", "otlp"]]
    exporters, lists = _exporters(render(otlp={"enabled": True}))
    assert exporters["otlp"] == DEFAULT_OTLP and lists == [["prometheus", "otlp"]]
    exporters, lists = _exporters(render(otlp={"enabled": False, "endpoint": "http://gw:4317"}))
    assert "otlp" not in exporters and lists == [["prometheus"]]
    # The kubelet_stats pipeline has no OTLP exporter of its own: the chart adds one.
    exporters, lists = _exporters(
        render(kubeletStats={"enabled": True}, otlp={"endpoint": "http://gw:4317"})
    )
    assert exporters["otlp"]["endpoint"] == "http://gw:4317"
    assert lists == [["prometheus", "otlp"]]
    assert "OTLP_ENDPOINT" not in {e["name"] for e in agent(render())["env"]}


def test_collection_interval_and_include_lists_reach_the_pipeline() -> None:
    includes = {
        "env": ["TEAM", "MLFLOW_RUN_*"],
        "labels": ["com.example/owner"],
        "podLabels": ["kueue.x-k8s.io/queue-name", "team"],
        "annotations": ["example.com/cost-center"],
    }
    data = pipeline(render(collectionInterval="30s", containerEnv=includes))
    assert data["receivers"]["nvml"]["collection_interval"] == "30s"
    env = data["processors"]["container_env"]
    assert env["env"] == {"include": ["TEAM", "MLFLOW_RUN_*"]}
    assert env["labels"] == {"include": ["com.example/owner"]}
    assert env["pod_labels"] == {"include": ["kueue.x-k8s.io/queue-name", "team"]}
    assert env["annotations"] == {"include": ["example.com/cost-center"]}
    assert env["runtime"] == "auto"
    # Empty lists leave the processor as the repository's pipeline has it.
    assert pipeline(render())["processors"]["container_env"] == {"runtime": "auto"}
    node = pipeline(render(kubeletStats={"enabled": True}, collectionInterval="20s"))
    assert {r["collection_interval"] for r in node["receivers"].values()} == {"20s"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"pipeline": {"config": "receivers: {}\n"}, "containerEnv": {"env": ["TEAM"]}},
            "containerEnv.env: these values shape the chart's own pipeline",
        ),
        (
            {"pipeline": {"existingConfigMap": "mine"}, "otlp": {"endpoint": "http://gw:4317"}},
            "otlp: these values shape the chart's own pipeline",
        ),
        (
            {"pipeline": {"config": "exporters: {prometheus: {naming: dcgm}}\n"}},
            'naming is "otel" but pipeline.config\'s prometheus exporter serves naming "dcgm"',
        ),
        (
            {"pipeline": {"config": "receivers: {nvml: {}}\n"}, "metricSet": "all"},
            'metricSet is "all" but pipeline.config\'s nvml receiver has metric_set "default"',
        ),
    ],
)
def test_values_for_the_chart_pipeline_refuse_a_pipeline_of_your_own(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.engine().HelmRenderError, match=message.replace(".", r"\.")):
        helm.render(values)


def test_a_pipeline_of_your_own_names_its_naming() -> None:
    config = "exporters: {prometheus: {naming: dcgm}}\n"
    docs = render(pipeline={"config": config}, naming="dcgm")
    assert by_name(docs, "ConfigMap", "-pipeline")["data"] == {"pipeline.yaml": config}
    assert "DCGM_FI_DEV_GPU_TEMP" in json.dumps(one(docs, "PrometheusRule")["spec"])


def test_a_pipeline_of_your_own_names_its_metric_set() -> None:
    config = "receivers: {nvml: {metric_set: all}}\n"
    docs = render(pipeline={"config": config}, metricSet="all")
    assert by_name(docs, "ConfigMap", "-pipeline")["data"] == {"pipeline.yaml": config}
    groups = {g["name"] for g in one(docs, "PrometheusRule")["spec"]["groups"]}
    assert "otelgpu.gpu_detail" in groups


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "naming": "dcgm",
            "metricSet": "all",
            "collectionInterval": "30s",
            "otlp": {"endpoint": "https://gateway.example:4317"},
            "containerEnv": {
                "env": ["TEAM"],
                "podLabels": ["kueue.x-k8s.io/queue-name", "jobset.sigs.k8s.io/jobset-name"],
                "annotations": ["example.com/cost-center"],
            },
        },
        {"kubeletStats": {"enabled": True}, "otlp": {"enabled": True}},
    ],
    ids=["default", "dcgm-otlp-includes", "kubelet-stats-otlp"],
)
def test_the_agent_accepts_the_pipelines_the_chart_makes(
    values: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(by_name(render(**values), "ConfigMap", "-pipeline")["data"]["pipeline.yaml"])
    env = {**os.environ, "K8S_NODE_NAME": "gpu-node-1"}
    env.pop("OTLP_ENDPOINT", None)
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "validate", "-c", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "not used by any pipeline" not in result.stderr


def test_name_overrides_name_every_object() -> None:
    docs = render(nameOverride="gpu-agent")
    named = {d["kind"]: d["metadata"]["name"] for d in docs if d["kind"] != "ConfigMap"}
    assert set(named.values()) == {"otelgpu-gpu-agent"}
    assert one(docs, "DaemonSet")["metadata"]["labels"]["app.kubernetes.io/name"] == "gpu-agent"
    docs = render(fullnameOverride="gpu")
    assert {d["metadata"]["name"] for d in docs} == {"gpu", "gpu-pipeline", "gpu-dashboard"}
    assert pod_spec(docs)["serviceAccountName"] == "gpu"


def test_namespace_override_moves_every_namespaced_object() -> None:
    docs = render(namespaceOverride="monitoring", kubeletStats={"enabled": True})
    namespaces = {
        d["metadata"].get("namespace") for d in docs if not d["kind"].startswith("Cluster")
    }
    assert namespaces == {"monitoring"}
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"][0]["namespace"] == "monitoring"


def test_service_account_of_your_own() -> None:
    docs = render(
        serviceAccount={"create": False, "name": "gpu-metrics"}, kubeletStats={"enabled": True}
    )
    assert not [d for d in docs if d["kind"] == "ServiceAccount"]
    assert pod_spec(docs)["serviceAccountName"] == "gpu-metrics"
    assert one(docs, "ClusterRoleBinding")["subjects"][0]["name"] == "gpu-metrics"
    annotated = one(
        render(serviceAccount={"annotations": {"example.com/role": "gpu"}}), "ServiceAccount"
    )
    assert annotated["metadata"]["annotations"] == {"example.com/role": "gpu"}
    assert pod_spec(render(serviceAccount={"create": False}))["serviceAccountName"] == "default"


def test_service_type_and_annotations() -> None:
    default = one(render(), "Service")["spec"]
    assert default["type"] == "ClusterIP" and default["clusterIP"] == "None"
    service = one(
        render(service={"type": "NodePort", "annotations": {"example.com/scrape": "no"}}),
        "Service",
    )
    assert service["spec"]["type"] == "NodePort" and "clusterIP" not in service["spec"]
    assert service["metadata"]["annotations"] == {"example.com/scrape": "no"}
    virtual = one(render(service={"clusterIP": ""}), "Service")["spec"]
    assert virtual["type"] == "ClusterIP" and "clusterIP" not in virtual


def test_servicemonitor_relabelings_are_added_after_the_charts_own() -> None:
    mine = [{"targetLabel": "cluster", "replacement": "gpu-east"}]
    dropped = [{"action": "drop", "sourceLabels": ["__name__"], "regex": "nvidia_gpu_pcie_.*"}]
    endpoints = one(
        render(serviceMonitor={"relabelings": mine, "metricRelabelings": dropped}),
        "ServiceMonitor",
    )["spec"]["endpoints"]
    defaults = one(render(), "ServiceMonitor")["spec"]["endpoints"]
    assert [e["port"] for e in endpoints] == ["metrics", "gpu-status", "telemetry"]
    for endpoint, default in zip(endpoints, defaults, strict=True):  # every port alike
        assert endpoint["relabelings"] == default["relabelings"] + mine
        assert endpoint["metricRelabelings"] == dropped
        assert "metricRelabelings" not in default


def test_probes_and_security_contexts_can_be_changed() -> None:
    """Helm merges what you give into the defaults; null removes a key (or a whole probe)."""
    probe = {"periodSeconds": 30, "initialDelaySeconds": None}
    non_root = {"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": True}
    docs = render(
        readinessProbe=probe,
        livenessProbe=None,
        podSecurityContext=non_root,
        securityContext={"readOnlyRootFilesystem": None},
    )
    readiness = {**VALUES["readinessProbe"], "periodSeconds": 30}
    del readiness["initialDelaySeconds"]
    assert agent(docs)["readinessProbe"] == readiness
    assert "livenessProbe" not in agent(docs)
    assert pod_spec(docs)["securityContext"] == {**VALUES["podSecurityContext"], **non_root}
    assert "readOnlyRootFilesystem" not in agent(docs)["securityContext"]
    assert agent(render())["securityContext"] == VALUES["securityContext"]
    assert agent(render())["livenessProbe"] == VALUES["livenessProbe"]


@pytest.mark.parametrize("naming", ["otel", "dcgm"])
def test_a_gpu_hour_price_adds_cost_rules(naming: str, tmp_path: Path) -> None:
    spec = one(render(naming=naming, chargeback={"gpuHourPrice": 2.5}), "PrometheusRule")["spec"]
    (cost,) = [g for g in spec["groups"] if g["name"] == "otelgpu.cost"]
    assert {r["record"]: r["expr"] for r in cost["rules"]} == {
        "otelgpu:gpu_cost:namespace_1h": "otelgpu:gpu_hours:namespace_1h * 2.5",
        "otelgpu:gpu_cost:team_1h": "otelgpu:gpu_hours:team_1h * 2.5",
    }
    free = one(render(naming=naming), "PrometheusRule")["spec"]
    assert "otelgpu.cost" not in {g["name"] for g in free["groups"]}
    # promtool accepts the rendered rules and prices an hour of a whole GPU.
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(spec))
    checked = run("promtool", "check", "rules", str(rules))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    namespace, team = ("k8s_namespace_name", "k8s_pod_label_team")
    whole = ""
    if naming == "dcgm":
        namespace, team = ("namespace", "team")
    series = f'nvidia_gpu_allocation_ratio{{{namespace}="ml",{team}="vision"{whole}}}'
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": "1x90"}],
                "promql_expr_test": [
                    {
                        "expr": "otelgpu:gpu_cost:namespace_1h",
                        "eval_time": "90m",
                        "exp_samples": [
                            {
                                "labels": f'otelgpu:gpu_cost:namespace_1h{{{namespace}="ml"}}',
                                "value": 2.5,
                            }
                        ],
                    },
                    {
                        "expr": "otelgpu:gpu_cost:team_1h",
                        "eval_time": "90m",
                        "exp_samples": [
                            {"labels": f'otelgpu:gpu_cost:team_1h{{{team}="vision"}}', "value": 2.5}
                        ],
                    },
                ],
            }
        ],
    }
    test_file = tmp_path / "cost_test.yaml"
    test_file.write_text(yaml.safe_dump(test))
    result = run("promtool", "test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr
