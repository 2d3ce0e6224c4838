"""The Helm chart: rendered by Helm's own engine (tests/deploy/helm.py), valid against the
Kubernetes schemas, carrying the repository's pipeline, rules and dashboard unchanged, and
as locked down as the kustomize bundle on every security-relevant field."""

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
    "secured": {
        "metricsTLS": {"secretName": "otelgpu-tls", "clientCA": True},
        "metricsBasicAuth": {"secretName": "otelgpu-auth"},
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
    assert checked >= 5


def test_pipeline_configmap_is_the_daemonset_pipeline() -> None:
    docs = render()
    configmap = by_name(docs, "ConfigMap", "-pipeline")
    assert configmap["data"] == {"pipeline.yaml": sync.PIPELINE.read_text()}
    (volume,) = [v for v in pod_spec(docs)["volumes"] if v["name"] == "pipeline"]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]


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


def test_prometheusrule_is_the_rules_file() -> None:
    rule = one(render(), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(sync.RULES.read_text())
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
    assert agent(render())["image"] == f"otelgpu:{app_version}"
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
    assert helm_side == kustomize_side
    assert helm_side["all mounts read-only but /tmp"] == ["/tmp"]
    assert helm_side["container.securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert helm_side["pod.automountServiceAccountToken"] is False


def test_kubelet_stats_switch_agrees_with_its_overlay() -> None:
    docs = render(kubeletStats={"enabled": True})
    overlay = rendered("kubelet-stats")
    assert _security(docs) == _security(overlay)
    assert by_name(docs, "ConfigMap", "-pipeline")["data"] == {
        "pipeline.yaml": NODE_PIPELINE.read_text()
    }
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
        Exception, match=r"runtime must be containerd, docker or none \(got \"crio\"\)"
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
    monitor = one(render(), "ServiceMonitor")
    service = one(render(), "Service")
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert service["metadata"]["labels"]["app.kubernetes.io/name"] == "otelgpu"
    assert 'up{job="otelgpu"}' in sync.RULES.read_text()
    (endpoint,) = monitor["spec"]["endpoints"]
    kustomize_endpoint = one(rendered("containerd"), "ServiceMonitor")["spec"]["endpoints"][0]
    for key in ("port", "path", "honorLabels", "relabelings", "interval"):
        assert endpoint[key] == kustomize_endpoint[key], key
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        one(render(), "DaemonSet")["spec"]["template"]["metadata"]["labels"].items()
    )
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


def test_chart_files_are_links_to_their_sources() -> None:
    """Links, not copies: the rules, dashboard and pipelines the chart ships cannot drift."""
    files = helm.CHART / "files"
    expected = {
        "pipeline.yaml": sync.PIPELINE,
        "pipeline-kubelet-stats.yaml": NODE_PIPELINE,
        "otelgpu-rules.yaml": sync.RULES,
        "otelgpu-gpus.json": DASHBOARD,
    }
    assert sorted(p.name for p in files.iterdir()) == sorted(expected)
    for name, source in expected.items():
        assert (files / name).is_symlink(), name
        assert (files / name).resolve() == source.resolve(), name


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
