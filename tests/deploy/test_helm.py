"""The Helm chart: rendered by Helm's own engine (tests/deploy/helm.py), valid against the
Kubernetes schemas, carrying the repository's pipeline (with the chart's values applied),
rules and dashboard for the chosen naming, and as locked down as the kustomize bundle on
every security-relevant field. The values for the common cases and the schema that refuses
unknown keys are in tests/deploy/test_helm_values.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy import helm, sync
from tests.deploy.chart_pipeline import gpu_status_apart
from tests.deploy.test_manifests import (
    CRDS,
    K8S_VERSIONS,
    agent,
    image_allocator_env,
    mounts,
    one,
    rendered,
)
from tests.deploy.tools import ROOT

Doc = dict[str, Any]
RUNTIMES = {
    "containerd": "/run/containerd/containerd.sock",
    "docker": "/var/run/docker.sock",
}
DASHBOARD = ROOT / "deploy" / "dashboards" / "otelgpu-gpus.json"
DCGM_DASHBOARD = ROOT / "deploy" / "dashboards" / "otelgpu-gpus-dcgm.json"
NODE_PIPELINE = ROOT / "pipelines" / "k8s-node.yaml"


@cache
def chart(values_json: str = "{}") -> tuple[Doc, ...]:
    return tuple(helm.render(json.loads(values_json)))


def render(**values: Any) -> tuple[Doc, ...]:
    return chart(json.dumps(values, sort_keys=True))


def pod_spec(docs: tuple[Doc, ...]) -> Doc:
    spec: Doc = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    return spec


def by_name(docs: tuple[Doc, ...], kind: str, suffix: str) -> Doc:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    return found


def test_helm_lint_finds_no_error() -> None:
    result = helm.lint()
    assert result["errors"] == [], result
    assert all(m["severity"] < 2 for m in result["messages"]), result["messages"]


def test_default_render_is_the_whole_bundle() -> None:
    kinds = sorted(d["kind"] for d in render())
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ConfigMap",
            "ConfigMap",
            "Service",
            "DaemonSet",
            "ServiceMonitor",
            "PrometheusRule",
        ]
    )
    assert {d["metadata"]["namespace"] for d in render()} == {helm.NAMESPACE}


VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "docker": {"runtime": "docker"},
    "containerd-directory": {"containerdMount": "directory"},
    "kubelet-stats": {"kubeletStats": {"enabled": True, "nodesProxy": True}},
    "dcgm-otlp": {
        "naming": "dcgm",
        "otlp": {"endpoint": "https://gateway.example:4317"},
        "containerEnv": {"env": ["TEAM"], "podLabels": ["kueue.x-k8s.io/queue-name"]},
    },
    "overrides": {
        "nameOverride": "gpu-agent",
        "namespaceOverride": "monitoring",
        "serviceAccount": {"create": False, "name": "gpu-metrics"},
        "service": {"type": "NodePort", "annotations": {"example.com/owner": "ml"}},
    },
    "secured": {
        "prometheus": {
            "tls": {"secretName": "otelgpu-tls", "clientCA": True},
            "basicAuth": {"secretName": "otelgpu-auth"},
        },
        "extraEnv": [{"name": "TEAM_LABEL", "value": "x"}],
        "extraVolumes": [{"name": "extra", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "extra", "mountPath": "/extra", "readOnly": True}],
    },
}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_object_matches_the_kubernetes_schema(variant: str, version: str) -> None:
    checked = 0
    for doc in render(**VARIANTS[variant]):
        if doc["apiVersion"] in CRDS:
            continue  # no schema for the Prometheus Operator's CRDs here
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 4  # ConfigMaps, Service, DaemonSet (ServiceAccount unless given one)


def pipeline(docs: tuple[Doc, ...]) -> Doc:
    """The pipeline the chart's ConfigMap holds, as data."""
    data: Doc = yaml.safe_load(by_name(docs, "ConfigMap", "-pipeline")["data"]["pipeline.yaml"])
    return data


def test_pipeline_configmap_is_the_daemonset_pipeline_without_otlp() -> None:
    docs = render()
    configmap = by_name(docs, "ConfigMap", "-pipeline")
    (volume,) = [v for v in pod_spec(docs)["volumes"] if v["name"] == "pipeline"]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    source = yaml.safe_load(sync.PIPELINE.read_text())
    # OTLP is off without an endpoint; everything else is pipelines/k8s-daemonset.yaml with
    # the GPU status on its own port (tests/deploy/test_helm_gpu_status.py).
    del source["exporters"]["otlp"]
    source["service"]["pipelines"]["metrics/gpu"]["exporters"].remove("otlp")
    assert pipeline(docs) == gpu_status_apart(source)
    # With OTLP on at the pipeline's own address and the GPU status beside the GPU series, it
    # is the repository's file exactly.
    assert pipeline(render(otlp={"enabled": True}, gpuStatus={"ownPort": False})) == (
        yaml.safe_load(sync.PIPELINE.read_text())
    )


def test_pipeline_from_values_or_an_existing_configmap() -> None:
    custom = "receivers: {}\n"
    docs = render(pipeline={"config": custom})
    assert by_name(docs, "ConfigMap", "-pipeline")["data"] == {"pipeline.yaml": custom}
    default_sum = one(render(), "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    custom_sum = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert default_sum["checksum/pipeline"] != custom_sum["checksum/pipeline"]  # pods roll
    docs = render(pipeline={"existingConfigMap": "my-pipeline"})
    assert not [d for d in docs if d["metadata"]["name"].endswith("-pipeline")]
    (volume,) = [v for v in pod_spec(docs)["volumes"] if v["name"] == "pipeline"]
    assert volume["configMap"]["name"] == "my-pipeline"


def test_prometheusrule_is_the_rules_file_of_the_naming() -> None:
    rule = one(render(), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(sync.RULES.read_text())
    dcgm = one(render(naming="dcgm"), "PrometheusRule")
    assert dcgm["spec"] == yaml.safe_load(sync.DCGM_RULES.read_text())
    assert "DCGM_FI_DEV_GPU_TEMP" in json.dumps(dcgm["spec"])
    labelled = one(
        render(prometheusRule={"additionalLabels": {"release": "kps"}}), "PrometheusRule"
    )
    assert labelled["metadata"]["labels"]["release"] == "kps"
    assert not [
        d for d in render(prometheusRule={"enabled": False}) if d["kind"] == "PrometheusRule"
    ]


def test_dashboard_configmap_carries_the_sidecar_label_and_the_json() -> None:
    dashboard = by_name(render(), "ConfigMap", "-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = dashboard["data"].values()
    assert json.loads(text) == json.loads(DASHBOARD.read_text())
    dcgm = by_name(render(naming="dcgm"), "ConfigMap", "-dashboard")
    assert dcgm["data"] == {"otelgpu-gpus-dcgm.json": DCGM_DASHBOARD.read_text()}
    moved = by_name(
        render(dashboard={"namespace": "monitoring", "label": "my_label", "labelValue": "yes"}),
        "ConfigMap",
        "-dashboard",
    )
    assert moved["metadata"]["namespace"] == "monitoring"
    assert moved["metadata"]["labels"]["my_label"] == "yes"
    assert not [
        d for d in render(dashboard={"enabled": False}) if "dashboard" in str(d["metadata"])
    ]


def test_image_tag_defaults_to_the_app_version_and_a_digest_wins() -> None:
    app_version = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())["appVersion"]
    assert agent(render())["image"] == f"ghcr.io/otelgpu/otelgpu:{app_version}"
    image = {"repository": "registry.example/otelgpu", "tag": "9.9.9"}
    assert agent(render(image=image))["image"] == "registry.example/otelgpu:9.9.9"
    digest = "sha256:" + "ab" * 32
    assert agent(render(image={**image, "digest": digest}))["image"] == (
        f"registry.example/otelgpu@{digest}"
    )


def test_scheduling_defaults() -> None:
    pod = pod_spec(render())
    assert pod["priorityClassName"] == "system-node-critical"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    kustomize_terms = pod_spec(rendered("containerd"))["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    # The kustomize base's GPU-node labels, plus the GPU Operator's deploy label.
    for term in kustomize_terms["nodeSelectorTerms"]:
        assert term in terms["nodeSelectorTerms"]
    deploy_label = {
        "matchExpressions": [
            {"key": "nvidia.com/gpu.deploy.dcgm-exporter", "operator": "In", "values": ["true"]}
        ]
    }
    assert deploy_label in terms["nodeSelectorTerms"]
    assert "priorityClassName" not in pod_spec(render(priorityClassName=""))
    strategy = {"type": "OnDelete"}
    assert one(render(updateStrategy=strategy), "DaemonSet")["spec"]["updateStrategy"] == strategy


def test_resources_are_the_measured_ones() -> None:
    assert agent(render())["resources"] == agent(rendered("containerd"))["resources"]
    assert agent(render())["resources"]["limits"] == {"memory": "192Mi"}  # no CPU quota


def _security(docs: tuple[Doc, ...]) -> dict[str, Any]:
    """Every field the least-privilege promise rests on, in a form both renderers share."""
    pod = pod_spec(docs)
    container = agent(docs)
    rbac = sorted(
        d["kind"]
        for d in docs
        if d["kind"] in {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    )
    return {
        "pod.securityContext": pod["securityContext"],
        "pod.automountServiceAccountToken": pod["automountServiceAccountToken"],
        "serviceAccount.automountServiceAccountToken": one(docs, "ServiceAccount")[
            "automountServiceAccountToken"
        ],
        "host namespaces": {k: pod.get(k, False) for k in ("hostNetwork", "hostPID", "hostIPC")},
        "container.securityContext": container["securityContext"],
        "host mounts": mounts(docs),
        "all mounts read-only but /tmp": sorted(
            m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")
        ),
        "runtimeClassName": pod.get("runtimeClassName"),
        "rbac": rbac,
        "ports": container["ports"],
    }


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_helm_and_kustomize_agree_on_security(runtime: str) -> None:
    helm_side = _security(render(runtime=runtime))
    kustomize_side = _security(rendered(runtime))
    # The chart opens one port more: the GPU status apart (values.yaml, gpuStatus).
    status = {"name": "gpu-status", "containerPort": 9401, "protocol": "TCP"}
    assert helm_side["ports"] == [
        *kustomize_side["ports"][:2],
        status,
        *kustomize_side["ports"][2:],
    ]
    assert [p["name"] for p in kustomize_side["ports"]] == ["metrics", "telemetry", "health"]
    assert _security(render(runtime=runtime, gpuStatus={"ownPort": False})) == kustomize_side
    helm_side["ports"] = kustomize_side["ports"]
    assert helm_side == kustomize_side
    assert helm_side["all mounts read-only but /tmp"] == ["/tmp"]
    assert helm_side["container.securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert helm_side["pod.automountServiceAccountToken"] is False


def test_kubelet_stats_switch_agrees_with_its_overlay() -> None:
    docs = render(kubeletStats={"enabled": True})
    overlay = rendered("kubelet-stats")
    # The overlay serves the GPU status beside the GPU series, as gpuStatus.ownPort false does.
    assert _security(render(kubeletStats={"enabled": True}, gpuStatus={"ownPort": False})) == (
        _security(overlay)
    )
    assert pipeline(docs) == gpu_status_apart(yaml.safe_load(NODE_PIPELINE.read_text()))
    role = one(docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes/stats"], "verbs": ["get"]}]
    assert role["rules"] == one(overlay, "ClusterRole")["rules"]
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": helm.RELEASE, "namespace": helm.NAMESPACE}
    ]
    assert pod_spec(docs)["automountServiceAccountToken"] is True
    older = one(render(kubeletStats={"enabled": True, "nodesProxy": True}), "ClusterRole")
    assert older["rules"][0]["resources"] == ["nodes/stats", "nodes/proxy"]


def test_containerd_directory_mount() -> None:
    host = mounts(render(containerdMount="directory"))
    assert host["/run/containerd"] == ("/run/containerd", True, "Directory")
    assert "/run/containerd/containerd.sock" not in host
    assert not {"/run/containerd", "/run/containerd/containerd.sock"} & set(
        mounts(render(runtime="none"))
    )


def test_a_wrong_runtime_is_refused_by_name() -> None:
    with pytest.raises(
        Exception, match=r"at '/runtime': value must be one of 'containerd', 'docker', 'none'"
    ):
        helm.render({"runtime": "crio"})


def test_tls_and_basic_auth_wire_secrets_into_the_exporter() -> None:
    docs = render(**VARIANTS["secured"])
    container = agent(docs)
    args = container["args"]
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    assert sets == [
        "exporters.prometheus.tls.cert_file=/etc/otelgpu-tls/tls.crt",
        "exporters.prometheus.tls.key_file=/etc/otelgpu-tls/tls.key",
        "exporters.prometheus.tls.client_ca_file=/etc/otelgpu-tls/ca.crt",
        "exporters.prometheus.basic_auth.username=${env:OTELGPU_METRICS_USERNAME}",
        "exporters.prometheus.basic_auth.password_hash=${env:OTELGPU_METRICS_PASSWORD_HASH}",
        # the GPU status endpoint alike (values.yaml, gpuStatus)
        "exporters.prometheus/gpu_status.tls.cert_file=/etc/otelgpu-tls/tls.crt",
        "exporters.prometheus/gpu_status.tls.key_file=/etc/otelgpu-tls/tls.key",
        "exporters.prometheus/gpu_status.tls.client_ca_file=/etc/otelgpu-tls/ca.crt",
        "exporters.prometheus/gpu_status.basic_auth.username=${env:OTELGPU_METRICS_USERNAME}",
        "exporters.prometheus/gpu_status.basic_auth.password_hash=${env:OTELGPU_METRICS_PASSWORD_HASH}",
        'service.telemetry.metrics.readers=[{pull: {exporter: {prometheus: {host: "0.0.0.0",'
        " port: 8888}}}}]",
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["OTELGPU_METRICS_PASSWORD_HASH"]["valueFrom"] == {
        "secretKeyRef": {"name": "otelgpu-auth", "key": "password_hash"}
    }
    assert env["TEAM_LABEL"] == {"name": "TEAM_LABEL", "value": "x"}
    volumes = {v["name"]: v for v in pod_spec(docs)["volumes"]}
    assert volumes["metrics-tls"] == {
        "name": "metrics-tls",
        "secret": {"secretName": "otelgpu-tls"},
    }
    mounted = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounted["/etc/otelgpu-tls"]["readOnly"] is True
    assert mounted["/extra"]["readOnly"] is True


def test_servicemonitor_keeps_the_job_name_the_rules_use() -> None:
    for docs in (render(), render(nameOverride="gpu-agent"), render(fullnameOverride="x")):
        monitor = one(docs, "ServiceMonitor")
        service = one(docs, "Service")
        assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/part-of"
        assert service["metadata"]["labels"]["app.kubernetes.io/part-of"] == "otelgpu"
        assert monitor["spec"]["selector"]["matchLabels"].items() <= (
            one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"].items()
        )
    for rules in (sync.RULES, sync.DCGM_RULES):
        assert 'up{job="otelgpu"}' in rules.read_text()
    # The GPU endpoint; the agent's own metrics' endpoint: tests/deploy/test_helm_telemetry.py.
    endpoint = one(render(), "ServiceMonitor")["spec"]["endpoints"][0]
    kustomize_endpoint = one(rendered("containerd"), "ServiceMonitor")["spec"]["endpoints"][0]
    for key in ("port", "path", "honorLabels", "relabelings", "interval"):
        assert endpoint[key] == kustomize_endpoint[key], key
    secured = one(
        render(serviceMonitor={"scheme": "https", "tlsConfig": {"insecureSkipVerify": True}}),
        "ServiceMonitor",
    )["spec"]["endpoints"][0]
    assert secured["scheme"] == "https"
    assert secured["tlsConfig"] == {"insecureSkipVerify": True}


def test_the_agent_accepts_the_secured_args() -> None:
    """The chart's `--set` keys are the exporter's real ones: the agent validates them."""
    container = agent(render(**VARIANTS["secured"]))
    args = [a.replace("/etc/otelgpu/pipeline.yaml", str(sync.PIPELINE)) for a in container["args"]]
    assert args[0] == "run"
    env = {
        **os.environ,
        "K8S_NODE_NAME": "gpu-node-1",
        "OTELGPU_METRICS_USERNAME": "prometheus",
        "OTELGPU_METRICS_PASSWORD_HASH": "$2b$10$" + "a" * 53,
    }
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "validate", *args[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_chart_files_are_copies_of_their_sources_inside_the_chart() -> None:
    """Real files (a packaged chart carries nothing outside its folder), identical to the
    pipelines, rules and dashboards they copy (python -m tests.deploy.sync --write), and what
    each rule reads, written from the rules (tests/deploy/rule_metrics.py)."""
    assert sorted(p.name for p in sync.CHART_FILES.iterdir()) == sorted(
        [*sync.CHART_COPIES, sync.RULE_METRICS]
    )
    for name, source in sync.CHART_COPIES.items():
        copy = sync.CHART_FILES / name
        assert not copy.is_symlink() and copy.is_file(), name
        assert copy.read_bytes() == source.read_bytes(), (
            f"{name}: run python -m tests.deploy.sync --write"
        )
    links = [p for p in helm.CHART.rglob("*") if p.is_symlink()]
    assert links == []


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubelet_stats_overlay_matches_the_kubernetes_schema(version: str) -> None:
    checked = 0
    for doc in rendered("kubelet-stats"):
        if doc["apiVersion"] not in CRDS:
            kubernetes_validate.validate(doc, version, strict=True)
            checked += 1
    assert checked == 7  # Namespace, ServiceAccount, ConfigMap, Service, DaemonSet, RBAC x2


def test_the_chart_repeats_the_images_allocator_settings() -> None:
    wanted = image_allocator_env()
    env = {e["name"]: e.get("value") for e in agent(render())["env"]}
    assert wanted and {k: env.get(k) for k in wanted} == wanted
