"""The Grafana dashboard: the variables and panels docs/deploy.md promises, queries that are
valid PromQL, and only metric names the agent serves in `naming: otel`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.names import (
    EXTERNAL,
    catalog_names,
    grafana_query,
    metrics_in,
    self_telemetry_names,
)
from tests.deploy.sync import RULES
from tests.deploy.tools import ROOT, run

DASHBOARD = ROOT / "deploy" / "dashboards" / "otelgpu-gpus.json"
# What Grafana substitutes before the query reaches Prometheus.
_SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$env_label": "container_env_TEAM",
    "${datasource}": "prometheus",
}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> list[str]:
    """Every PromQL query: panel targets and the variables' label_values selectors."""
    found = [t["expr"] for p in panels() for t in p["targets"]]
    for var in dashboard()["templating"]["list"]:
        if var["type"] == "query":
            query = grafana_query(var["query"]["query"])
            if query:
                found.append(query)
    return found


def promql(query: str) -> str:
    for variable, value in _SUBSTITUTIONS.items():
        query = query.replace(variable, value)
    return re.sub(r"\$\w+", ".*", query)


def test_variables_for_namespace_pod_container_and_business_label() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert {"datasource", "node", "namespace", "pod", "container", "env_label", "env_value"} <= set(
        variables
    )
    for name in ("namespace", "pod", "container"):
        assert f"k8s_{name}_name" in variables[name]["query"]["query"]
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    assert variables["env_label"]["query"].startswith("container_env_")
    assert "$env_label" in variables["env_value"]["query"]["query"]


def test_description_says_naming_otel() -> None:
    assert "naming: otel" in dashboard()["description"]


def test_panels_cover_gpu_and_agent_health() -> None:
    used = set().union(*(metrics_in(q) for q in queries()))
    assert {
        "hw_gpu_utilization_ratio",
        "hw_gpu_memory_usage_bytes",
        "hw_gpu_memory_limit_bytes",
        "hw_power_watts",
        "hw_temperature_celsius",
        "nvidia_gpu_xid_errors_total",
        "otelgpu_source_up",
        "otelgpu_enrichment_unmatched_points_total",
    } <= used


def test_gpu_panels_filter_on_every_variable() -> None:
    for panel in panels():
        for target in panel["targets"]:
            if "otelgpu_" in target["expr"]:
                continue  # self-telemetry has no pod labels, only the node
            for variable in (
                "$node",
                "$namespace",
                "$pod",
                "$container",
                '$env_label=~"$env_value"',
            ):
                assert variable in target["expr"], (panel["title"], variable)


def test_queries_use_only_metrics_the_agent_serves() -> None:
    recorded = {
        r["record"]
        for g in yaml.safe_load(RULES.read_text())["groups"]
        for r in g["rules"]
        if "record" in r
    }
    allowed = catalog_names() | self_telemetry_names() | EXTERNAL | recorded
    used = set().union(*(metrics_in(q) for q in queries()))
    assert used - allowed == set()


def test_queries_are_valid_promql(tmp_path: Path) -> None:
    """promtool parses every query (Grafana's variables substituted) as a recording rule."""
    rules = [{"record": f"dashboard:query:{i}", "expr": promql(q)} for i, q in enumerate(queries())]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run("promtool", "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_panel_ids_and_grid_are_sane() -> None:
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
