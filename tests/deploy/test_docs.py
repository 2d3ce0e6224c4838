"""docs/deploy.md, walked as a newcomer would without a cluster: every Helm command it shows
renders (with Helm's engine) to valid objects, the kustomize overlay it tells you to write
renders, the names it tells you to look for are the names rendered, and every repository
path it mentions exists."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy import helm
from tests.deploy.test_manifests import K8S_VERSIONS, agent, one, render
from tests.deploy.tools import ROOT

DOC = ROOT / "docs" / "deploy.md"
TEXT = DOC.read_text()


def _shell_commands() -> list[list[str]]:
    """Every `helm ...` command in the doc: sh blocks (continuations joined) and inline."""
    commands = [shlex.split(c) for c in re.findall(r"`(helm [a-z]+ [^`]*)`", TEXT)]
    for block in re.findall(r"```sh\n(.*?)```", TEXT, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("helm "):
                commands.append(shlex.split(line))
    return commands


def _heredoc(name: str) -> str:
    match = re.search(rf"cat > {re.escape(name)} <<'YAML'\n(.*?)\nYAML\n", TEXT, re.S)
    assert match, f"docs/deploy.md writes no {name}"
    return match.group(1)


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def _values(command: list[str]) -> dict[str, Any]:
    """The values a `helm install|upgrade|template` command line passes."""
    values: dict[str, Any] = {}
    args = iter(command)
    for arg in args:
        if arg == "--set":
            _merge(values, helm.engine().parse_set_string(next(args)))
        elif arg == "-f":
            _merge(values, yaml.safe_load(_heredoc(next(args))))
        elif arg == "--set-file":
            key, _path = next(args).split("=", 1)
            _merge(values, helm.engine().parse_set_string(f"{key}=receivers: {{}}"))
    return values


def test_the_doc_shows_install_upgrade_and_template() -> None:
    verbs = {c[1] for c in _shell_commands()}
    assert {"install", "upgrade", "template", "package"} <= verbs, verbs


@pytest.mark.parametrize(
    "command",
    [c for c in _shell_commands() if c[1] in {"install", "upgrade", "template"}],
    ids=lambda c: " ".join(c)[:60],
)
def test_every_helm_command_in_the_doc_renders_valid_objects(command: list[str]) -> None:
    assert command[2:4] == ["otelgpu", "deploy/helm/otelgpu"], command
    assert "-n" in command and command[command.index("-n") + 1] == "otelgpu"
    docs = helm.render(_values(command))
    for doc in docs:
        if doc["apiVersion"] != "monitoring.coreos.com/v1":
            kubernetes_validate.validate(doc, K8S_VERSIONS[-1], strict=True)
    assert agent(docs)["image"].startswith(("registry.example.com/otelgpu:", "otelgpu:"))


def test_the_quick_start_finds_what_it_names() -> None:
    (install,) = [c for c in _shell_commands() if c[1] == "install"]
    docs = helm.render(_values(install))
    monitor = one(docs, "ServiceMonitor")
    target = f"serviceMonitor/{monitor['metadata']['namespace']}/{monitor['metadata']['name']}/0"
    assert f"`{target}`" in TEXT
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert one(docs, "PrometheusRule")["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    dashboards = [d for d in docs if d["metadata"]["name"] == "otelgpu-dashboard"]
    assert dashboards and dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "ConfigMap `otelgpu-dashboard`" in TEXT
    assert agent(docs)["image"].startswith("registry.example.com/otelgpu:")


def test_the_kustomize_overlay_the_doc_shows_renders(tmp_path: Path) -> None:
    match = re.search(r"```yaml\n# my-cluster/kustomization.yaml\n(.*?)```", TEXT, re.S)
    assert match, "docs/deploy.md shows no my-cluster/kustomization.yaml"
    cluster = tmp_path / "my-cluster"
    cluster.mkdir()
    (cluster / "kustomization.yaml").write_text(match.group(1))
    (cluster / "pipeline.yaml").write_text((ROOT / "pipelines" / "k8s-daemonset.yaml").read_text())
    os.symlink(ROOT / "deploy", tmp_path / "deploy")
    docs = render(cluster)
    assert agent(docs)["image"] == "registry.example.com/otelgpu:0.1.0"
    assert one(docs, "ServiceMonitor")["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_every_repository_path_the_doc_names_exists() -> None:
    paths = set(
        re.findall(
            r"`((?:deploy|pipelines|docs|tests|otelgpu|bench|scripts)/[\w./-]*\w)",
            TEXT,
        )
    )
    paths |= {p.removeprefix("../") for p in re.findall(r"\]\((\.\./[\w./-]+)\)", TEXT)}
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p.split(" ")[0]).exists() and "*" not in p)
    assert missing == []
