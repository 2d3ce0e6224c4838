"""docs/deploy.md, walked as a newcomer would without a cluster: it opens with `helm install`
from the chart repository the release workflow pushes to, every Helm command it shows renders
(with Helm's engine; the chart repository's chart of this version is this checkout's chart) to
valid objects, the kustomize overlay it tells you to write renders, the names it tells you to
look for are the names rendered, and every repository path it mentions exists."""

from __future__ import annotations

import json
import os
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import otelgpu
from tests.deploy import helm, workflow
from tests.deploy.names import known_labels, metrics_in, self_telemetry_names, served
from tests.deploy.test_manifests import K8S_VERSIONS, agent, one, render
from tests.deploy.tools import ROOT

DOC = ROOT / "docs" / "deploy.md"
TEXT = DOC.read_text()
# Where the chart is: the repository the release workflow pushes to, or a checkout.
CHARTS = (f"{workflow.env()['CHART_REPOSITORY']}/otelgpu", "deploy/helm/otelgpu")
_FLAGS_WITH_VALUES = {"-n", "--namespace", "--set", "--set-file", "-f", "--values", "--version"}


MIGRATING = (ROOT / "docs" / "migrating-from-dcgm-exporter.md").read_text()


def _shell_commands(text: str = TEXT) -> list[list[str]]:
    """Every `helm ...` command in a doc: sh blocks (continuations joined) and inline."""
    commands = [shlex.split(c) for c in re.findall(r"`(helm [a-z]+ [^`]*)`", text)]
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("helm "):
                commands.append(shlex.split(line))
    return commands


def _heredoc(name: str) -> str:
    for text in (TEXT, MIGRATING):
        found = re.search(rf"cat > {re.escape(name)} <<'YAML'\n(.*?)\n *YAML\n", text, re.S)
        if found:
            return textwrap.dedent(found.group(1))
    raise AssertionError(f"the docs write no {name}")


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


def _positional(command: list[str]) -> list[str]:
    """The arguments of a helm command line that are not flags or their values."""
    out, args = [], iter(command[2:])
    for arg in args:
        if arg in _FLAGS_WITH_VALUES:
            next(args)
        elif not arg.startswith("-"):
            out.append(arg)
    return out


def test_the_doc_shows_install_upgrade_and_template() -> None:
    verbs = {c[1] for c in _shell_commands()}
    assert {"install", "upgrade", "template", "package"} <= verbs, verbs


def test_the_doc_opens_with_helm_install_from_the_chart_repository() -> None:
    first_block = re.search(r"```sh\n(.*?)```", TEXT, re.S)
    assert first_block and TEXT.index(first_block.group(0)) < TEXT.index("\n## ")
    first = first_block.group(1).replace("\\\n", " ").splitlines()[0]
    command = shlex.split(first)
    assert command[:2] == ["helm", "install"]
    assert _positional(command) == ["otelgpu", CHARTS[0]]


@pytest.mark.parametrize(
    "command",
    [c for c in _shell_commands() if c[1] in {"install", "upgrade", "template"}],
    ids=lambda c: " ".join(c)[:60],
)
def test_every_helm_command_in_the_doc_renders_valid_objects(command: list[str]) -> None:
    assert _positional(command) in (["otelgpu", chart] for chart in CHARTS), command
    assert "-n" in command and command[command.index("-n") + 1] == "otelgpu"
    if "--version" in command:
        assert command[command.index("--version") + 1] in (otelgpu.__version__, "X.Y.Z")
    docs = helm.render(_values(command))
    for doc in docs:
        if doc["apiVersion"] != "monitoring.coreos.com/v1":
            kubernetes_validate.validate(doc, K8S_VERSIONS[-1], strict=True)
    assert agent(docs)["image"] == f"ghcr.io/otelgpu/otelgpu:{otelgpu.__version__}"


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


def test_the_kustomize_overlay_the_doc_shows_renders(tmp_path: Path) -> None:
    match = re.search(r"```yaml\n# my-cluster/kustomization.yaml\n(.*?)```", TEXT, re.S)
    assert match, "docs/deploy.md shows no my-cluster/kustomization.yaml"
    cluster = tmp_path / "my-cluster"
    cluster.mkdir()
    (cluster / "kustomization.yaml").write_text(match.group(1))
    (cluster / "pipeline.yaml").write_text((ROOT / "pipelines" / "k8s-daemonset.yaml").read_text())
    os.symlink(ROOT / "deploy", tmp_path / "deploy")
    docs = render(cluster)
    assert agent(docs)["image"] == f"registry.example.com/otelgpu:{otelgpu.__version__}"
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


def test_the_gpu_operator_cutover_renders_what_its_table_says() -> None:
    """docs/migrating-from-dcgm-exporter.md, section 6: its otelgpu commands render, with the
    ServiceMonitor selector, job label and relabelings its table names."""
    commands = [c for c in _shell_commands(MIGRATING) if c[2:3] == ["otelgpu"] or "otelgpu" in c]
    ours = [c for c in commands if CHARTS[0] in c]
    assert [c[1] for c in ours] == ["install", "upgrade"]
    values = _values(ours[0])
    assert values["naming"] == "dcgm"
    _merge(values, _values(ours[1]))
    docs = helm.render(values)
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/part-of"
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "otelgpu",
        "app.kubernetes.io/instance": helm.RELEASE,
        "app.kubernetes.io/component": "agent",
    }
    # GPU series; GPU status (port 9401); the agent's own (port 8888)
    endpoint, status, own = monitor["spec"]["endpoints"]
    assert (status["port"], own["port"]) == ("gpu-status", "telemetry")
    assert status["metricRelabelings"] == endpoint["metricRelabelings"]
    assert (endpoint["port"], endpoint["path"], endpoint["honorLabels"]) == (
        "metrics",
        "/metrics",
        True,
    )
    copied = {r["targetLabel"]: r["sourceLabels"] for r in endpoint["metricRelabelings"]}
    assert copied == {
        "exported_pod": ["pod"],
        "exported_namespace": ["namespace"],
        "exported_container": ["container"],
    }
    for text in ("dcgmExporter.enabled=false", '"dcgmExporter": {"enabled": false}'):
        assert text in MIGRATING
    assert "DCGM_FI_DEV_GPU_TEMP" in json.dumps(one(docs, "PrometheusRule")["spec"])


# The README, read as a new user reads it.

README = (ROOT / "README.md").read_text()
_OPENING = (
    "pip install . && otelgpu run    # demo: simulated GPUs, no GPU or Kubernetes needed"
    " → http://localhost:9400/metrics\n"
    "scripts/test                    # installs everything (real peers via apt, pip test extra)"
    " and runs lint, types and the tests\n"
)


def test_the_readme_opens_with_the_two_commands() -> None:
    assert README.startswith("# otelgpu\n\n```sh\n" + _OPENING + "```\n")


def test_the_readmes_install_commands_render_the_image_they_name() -> None:
    """From a release: the chart repository at this version (this checkout's chart) pulls the
    release's image. From the checkout: the chart's folder pulls the image the README's
    `docker build` line tags."""
    commands = _shell_commands(README)
    installs = [c for c in commands if c[1] == "install"]
    assert [_positional(c) for c in installs] == [
        ["otelgpu", CHARTS[0]],
        ["otelgpu", CHARTS[1]],
    ]
    release, checkout = installs
    assert release[release.index("--version") + 1] == otelgpu.__version__
    assert agent(helm.render(_values(release)))["image"] == (
        f"{workflow.env()['IMAGE']}:{otelgpu.__version__}"
    )
    built = re.search(r"^docker build -t (\S+) \. && docker push (\S+)$", README, re.M)
    assert built and built.group(1) == built.group(2)
    assert agent(helm.render(_values(checkout)))["image"] == built.group(1)


def test_the_readme_names_only_paths_that_exist() -> None:
    paths = set(
        re.findall(r"`((?:deploy|pipelines|docs|tests|otelgpu|bench|scripts)/[\w./-]*\w)", README)
    )
    paths |= set(re.findall(r"\]\(((?:docs|deploy)/[\w./-]+)\)", README))
    paths |= {"CONTRIBUTING.md", "CHANGELOG.md"} & set(re.findall(r"[A-Z]+\.md", README))
    assert len(paths) > 5
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def test_the_readme_names_the_boards_recorded_in_docs_hardware() -> None:
    hardware = (ROOT / "docs" / "hardware" / "README.md").read_text()
    recorded = re.findall(r"^\| (NVIDIA [^(|]+?) \(.*?\| ([\d.]+) \|", hardware, re.M)
    assert recorded
    for board, driver in recorded:
        assert re.search(rf"^\| {re.escape(board)} \| {re.escape(driver)} \|", README, re.M), board


def test_benchmarks_and_developer_scripts_live_outside_the_readme() -> None:
    assert "bench/" not in README and "callgrind" not in README
    for script in ("gpu_check", "nvml_record", "property_soak", "mutation"):
        assert f"scripts/{script}" not in README
        assert f"scripts/{script}" in (ROOT / "CONTRIBUTING.md").read_text()


PERFORMANCE = (ROOT / "docs" / "performance.md").read_text()


def test_every_performance_figure_has_its_target_and_command() -> None:
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in PERFORMANCE.splitlines()
        if re.match(r"\| P\d ", line)
    ]
    assert [row[0] for row in rows] == [f"P{i}" for i in range(1, 10)]
    for name, _what, target, measured, command in rows:
        assert re.search(r"[<>]=", target) and measured, name
        script = re.search(r"`python (?:-m )?(bench[/.]\w+)", command)
        assert script, name
        assert (ROOT / (script.group(1).replace(".", "/") + ".py")).is_file(), command
    misses = PERFORMANCE.split("## Where the targets are missed", 1)[1].split("\n## ", 1)[0]
    for name in ("P7", "P8"):
        assert f"**{name}" in misses


_INTERNAL = re.compile(r"\bP[1-9]\b|callgrind|\bGIL\b|wmem_max")
USER_DOCS = [
    "docs/prometheus.md",
    "docs/deploy.md",
    "docs/troubleshooting.md",
    "docs/configuration.md",
    "docs/metrics.md",
    "docs/migrating-from-dcgm-exporter.md",
    "deploy/helm/otelgpu/values.yaml",
    "CHANGELOG.md",
    "README.md",
]


@pytest.mark.parametrize("path", USER_DOCS)
def test_user_docs_carry_no_internal_figures(path: str) -> None:
    text = (ROOT / path).read_text()
    assert [m.group(0) for m in _INTERNAL.finditer(text)] == []


def test_troubleshooting_answers_fit_a_table_cell() -> None:
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    cells = [c for line in text.splitlines() if line.startswith("|") for c in line.split("|")]
    assert max(len(c) for c in cells) <= 450


def _troubleshooting_tables() -> tuple[str, list[tuple[str, str]]]:
    """(the symptom table's text, the rows of the dcgm naming table: (otel query, dcgm form))."""
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    symptoms, _, rest = text.partition("\n## In `naming: dcgm`\n")
    rows = []
    for line in rest.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if line.startswith("| `") and len(cells) == 2:
            rows.append((cells[0], cells[1]))
    return symptoms, rows


def test_troubleshooting_gives_every_device_query_in_both_namings() -> None:
    """Most setups run `naming: dcgm` (a GPU is `UUID`, a MIG instance `GPU_I_ID` too): every
    query of the symptom table that picks a device by `hw_id` has its dcgm form, and those
    forms use only names and labels the agent serves in that naming."""
    symptoms, rows = _troubleshooting_tables()
    device_queries = {
        q for q in re.findall(r"`([^`]+)`", symptoms) if re.search(r"hw_id\s*=|on \(hw_id\)", q)
    }
    assert device_queries, "no device query in the symptom table"
    translated = {otel.strip("`") for otel, _ in rows}
    assert device_queries <= translated, device_queries - translated
    names = served("dcgm") | self_telemetry_names() | {"hw_gpu_info"}
    labels = known_labels("dcgm") | {"processor", "reason", "hw_id"}
    for _, dcgm_form in rows:
        for query in re.findall(r"`([^`]+)`", dcgm_form):
            label = re.fullmatch(r'(\w+)(="[^"]*")?', query)
            if label:  # a label (or one matcher) named in the prose
                assert label.group(1) in labels, query
                continue
            assert metrics_in(query) <= names, (query, metrics_in(query) - names)
            used = set(re.findall(r"(\w+)\s*(?:=~|!=|=)\s*\"", query))
            used |= {
                n
                for group in re.findall(r"\b(?:on|by|group_left|group_right)\s*\(([^)]*)\)", query)
                for n in group.split(",")
            }
            assert {n.strip() for n in used} - {""} <= labels, (query, used - labels)


def test_the_stability_levels_doc_lists_every_component_at_its_level() -> None:
    from otelgpu.service.builtins import builtin_registry

    text = (ROOT / "docs" / "stability.md").read_text()
    table = text.split("## Levels today", 1)[1]
    documented = set(re.findall(r"^\| `(\w+)` \| (\w+) \| (\w+) \|$", table, re.M))
    registered = {(f.type, f.kind.value, f.stability.value) for f in builtin_registry()}
    assert documented == registered
    for level in ("alpha", "beta", "stable"):
        assert f"| `{level}` |" in text
