"""The kustomize bundle renders, validates against the Kubernetes schemas, and keeps the
least-privilege promises docs/deploy.md makes."""

from __future__ import annotations

import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy import sync
from tests.deploy.tools import ROOT, run

OVERLAYS = {
    "containerd": "/run/containerd/containerd.sock",
    "docker": "/var/run/docker.sock",
}
# The oldest Kubernetes the bundle is checked against, and the newest schema installed.
K8S_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())
CRDS = ("monitoring.coreos.com/v1",)

Doc = dict[str, Any]


def render(path: Path) -> list[Doc]:
    result = run("kubectl", "kustomize", str(path))
    assert result.returncode == 0, f"kubectl kustomize {path} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@cache
def rendered(overlay: str) -> tuple[Doc, ...]:
    return tuple(render(ROOT / "deploy" / "overlays" / overlay))


def one(docs: tuple[Doc, ...] | list[Doc], kind: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def agent(docs: tuple[Doc, ...] | list[Doc]) -> Doc:
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return container


def mounts(docs: tuple[Doc, ...] | list[Doc]) -> dict[str, tuple[str, bool, str]]:
    """mountPath → (host path, read-only, hostPath type) for every hostPath volume."""
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    host = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    return {
        m["mountPath"]: (host[m["name"]]["path"], m.get("readOnly", False), host[m["name"]]["type"])
        for m in agent(docs)["volumeMounts"]
        if m["name"] in host
    }


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_renders_the_whole_bundle(overlay: str) -> None:
    kinds = sorted(d["kind"] for d in rendered(overlay))
    assert kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ConfigMap",
            "Service",
            "DaemonSet",
            "ServiceMonitor",
            "PrometheusRule",
        ]
    )
    assert {
        d["metadata"].get("namespace") for d in rendered(overlay) if d["kind"] != "Namespace"
    } == {"otelgpu"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_core_objects_match_the_kubernetes_schema(overlay: str, version: str) -> None:
    checked = 0
    for doc in rendered(overlay):
        if doc["apiVersion"] in CRDS:
            continue  # no schema for CRDs here: checked structurally below
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked == 5


def test_schema_validation_catches_a_misspelt_field() -> None:
    """The validator is strict: a typo in the securityContext is an error, not ignored."""
    daemonset = yaml.safe_load(yaml.safe_dump(one(rendered("containerd"), "DaemonSet")))
    daemonset["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = (
        True
    )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, K8S_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_host_mounts_are_read_only_and_minimal(overlay: str) -> None:
    assert mounts(rendered(overlay)) == {
        "/var/lib/kubelet/pod-resources": ("/var/lib/kubelet/pod-resources", True, "Directory"),
        "/host/proc": ("/proc", True, "Directory"),
        OVERLAYS[overlay]: (OVERLAYS[overlay], True, "Socket"),
    }


def test_containerd_directory_variant_replaces_the_socket_mount(tmp_path: Path) -> None:
    """The documented alternative (runtime-dir.yaml) renders, valid, in place of the socket."""
    overlay = ROOT / "deploy" / "overlays" / "containerd"
    shutil.copy(overlay / "runtime-dir.yaml", tmp_path / "runtime-dir.yaml")
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{os.path.relpath(ROOT / 'deploy' / 'base', tmp_path)}]\n"
        "patches: [{path: runtime-dir.yaml}]\n"
    )
    docs = render(tmp_path)
    kubernetes_validate.validate(one(docs, "DaemonSet"), K8S_VERSIONS[-1], strict=True)
    assert mounts(docs)["/run/containerd"] == ("/run/containerd", True, "Directory")
    assert "/run/containerd/containerd.sock" not in mounts(docs)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_pod_runs_with_least_privilege(overlay: str) -> None:
    docs = rendered(overlay)
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    container = agent(docs)
    assert pod["automountServiceAccountToken"] is False
    assert one(docs, "ServiceAccount")["automountServiceAccountToken"] is False
    assert not any(
        d["kind"] in {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"} for d in docs
    )
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(key, False)
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in security["capabilities"]
    # NVML through the NVIDIA container runtime; no GPU taken from the scheduler.
    assert pod["runtimeClassName"] == "nvidia"
    env = {e["name"]: e for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert not any("nvidia.com" in k for k in container["resources"].get("limits", {}))


def test_node_name_probes_and_resources() -> None:
    container = agent(rendered("containerd"))
    env = {e["name"]: e for e in container["env"]}
    assert env["K8S_NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 9400, "telemetry": 8888, "health": 13133}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    # Memory is bounded; CPU is not: a CFS quota stalls every thread, the one serving /metrics
    # included, for the rest of each 100 ms period once the cycle's burst has used it up
    # (`python bench/p7_scrape_never_waits.py --cpu-limit 200m`: gzip p99 76 ms, not 2).
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "96Mi"},
        "limits": {"memory": "192Mi"},
    }
    assert container["args"] == ["run", "-c", "/etc/otelgpu/pipeline.yaml"]


def test_scheduled_on_gpu_nodes_only() -> None:
    pod = one(rendered("containerd"), "DaemonSet")["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    keys = {e["key"] for term in terms for e in term["matchExpressions"]}
    assert {
        "nvidia.com/gpu.present",
        "feature.node.kubernetes.io/pci-10de.present",
        "cloud.google.com/gke-accelerator",
    } <= keys
    assert all(len(term["matchExpressions"]) == 1 for term in terms)  # ORed, one label each
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]


def test_configmap_holds_exactly_the_daemonset_pipeline() -> None:
    docs = rendered("containerd")
    configmap = one(docs, "ConfigMap")
    assert configmap["data"] == {"pipeline.yaml": sync.PIPELINE.read_text()}
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "pipeline"]
    # The generated, content-hashed name: a changed pipeline rolls the pods.
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    assert configmap["metadata"]["name"].startswith("otelgpu-pipeline-")


def test_service_and_servicemonitor_scrape_every_agent() -> None:
    docs = rendered("containerd")
    service, monitor = one(docs, "Service"), one(docs, "ServiceMonitor")
    pod_labels = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= pod_labels.items()
    # the GPU series, and the agent's own on the pipeline's pull reader (pipeline.yaml)
    assert [p["name"] for p in service["spec"]["ports"]] == ["metrics", "telemetry"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    gpu, own = monitor["spec"]["endpoints"]
    assert (gpu["port"], own["port"]) == ("metrics", "telemetry")
    node = {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "k8s_node_name",
        "action": "replace",
    }
    for endpoint in (gpu, own):  # the agent alerts group otelgpu_* by k8s_node_name
        assert endpoint["path"] == "/metrics"
        assert endpoint["honorLabels"] is True
        assert node in endpoint["relabelings"]
    assert own["relabelings"] == gpu["relabelings"]
    readers = yaml.safe_load(sync.PIPELINE.read_text())["service"]["telemetry"]["metrics"]
    assert readers == {
        "readers": [{"pull": {"exporter": {"prometheus": {"host": "0.0.0.0", "port": 8888}}}}]
    }


def _check_rule_shape(rule: Doc) -> None:
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules"}
        for item in group["rules"]:
            assert set(item) <= {"alert", "record", "expr", "for", "labels", "annotations"}
            assert ("alert" in item) != ("record" in item)
            assert isinstance(item["expr"], str) and item["expr"].strip()


def test_prometheusrule_carries_the_plain_rules_file() -> None:
    rule = one(rendered("containerd"), "PrometheusRule")
    plain = yaml.safe_load(sync.RULES.read_text())
    assert rule["spec"] == {"groups": plain["groups"]}
    _check_rule_shape(rule)


def test_the_detail_component_adds_the_detail_rules(tmp_path: Path) -> None:
    """deploy/components/detail-rules, beside an overlay: a second PrometheusRule carrying
    otelgpu-rules-detail.yaml, in the bundle's namespace, the rest of the bundle unchanged."""
    overlay = os.path.relpath(ROOT / "deploy" / "overlays" / "containerd", tmp_path)
    component = os.path.relpath(sync.DETAIL_COMPONENT, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{overlay}]\ncomponents: [{component}]\n"
    )
    docs = render(tmp_path)
    rules = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PrometheusRule"}
    assert sorted(rules) == ["otelgpu", "otelgpu-detail"]
    detail = rules["otelgpu-detail"]
    assert detail["metadata"]["namespace"] == "otelgpu"
    assert detail["spec"] == {"groups": yaml.safe_load(sync.DETAIL_RULES.read_text())["groups"]}
    _check_rule_shape(detail)
    assert [d for d in docs if d["kind"] != "PrometheusRule"] == [
        d for d in rendered("containerd") if d["kind"] != "PrometheusRule"
    ]


def image_allocator_env() -> dict[str, str]:
    """The `MALLOC_*` settings of the Dockerfile's `ENV` lines."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    found = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for token in line[4:].split():
                key, _, value = token.partition("=")
                if key.startswith("MALLOC_"):
                    found[key] = value
    return found


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_daemonset_repeats_the_images_allocator_settings(overlay: str) -> None:
    wanted = image_allocator_env()
    assert "MALLOC_ARENA_MAX" in wanted
    env = {e["name"]: e.get("value") for e in agent(rendered(overlay))["env"]}
    assert {k: env.get(k) for k in wanted} == wanted
