"""The Grafana dashboards, one per naming (tests/deploy/dashboards.py writes both): the
variables and rows docs/deploy.md promises, queries that are valid PromQL, and only metric
names the agent serves in that naming on its default metric set."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import dashboards
from tests.deploy.names import (
    EXTERNAL,
    catalog_names,
    dcgm_names,
    grafana_query,
    metrics_in,
    self_telemetry_names,
    served,
)
from tests.deploy.sync import DCGM_RULES, RULES
from tests.deploy.tools import ROOT, run

FOLDER = ROOT / "deploy" / "dashboards"
DASHBOARD = FOLDER / "otelgpu-gpus.json"
NAMINGS = {"otel": dashboards.OTEL, "dcgm": dashboards.DCGM}
# What Grafana substitutes before the query reaches Prometheus ($__range_s before $__range).
_SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__range_s": "86400",
    "$__range": "1d",
    "${datasource}": "prometheus",
}
ROWS = ["Fleet", "GPUs", "Health and throttling", "MIG", "Time-slicing", "Chargeback"]


def dashboard(naming: str = "otel") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FOLDER / dashboards.file_name(NAMINGS[naming])).read_text())
    return data


def panels(naming: str = "otel") -> list[dict[str, Any]]:
    return [p for p in dashboard(naming)["panels"] if p["type"] != "row"]


def rows(naming: str) -> dict[str, list[dict[str, Any]]]:
    """Each row's title and the panels under it."""
    out: dict[str, list[dict[str, Any]]] = {}
    current = ""
    for panel in dashboard(naming)["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
            out[current] = []
        else:
            out[current].append(panel)
    return out


def queries(naming: str = "otel") -> list[str]:
    """Every PromQL query: panel targets and the variables' label_values selectors."""
    found = [t["expr"] for p in panels(naming) for t in p["targets"]]
    for var in dashboard(naming)["templating"]["list"]:
        if var["type"] == "query":
            query = grafana_query(var["query"]["query"])
            if query:
                found.append(query)
    return found


def promql(query: str, naming: str = "otel") -> str:
    for variable, value in _SUBSTITUTIONS.items():
        query = query.replace(variable, value)
    query = query.replace("$env_label", NAMINGS[naming].env_default)
    return re.sub(r"\$\w+", ".*", query)


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_variables_for_namespace_pod_container_and_business_label(naming: str) -> None:
    variables = {v["name"]: v for v in dashboard(naming)["templating"]["list"]}
    assert {"datasource", "node", "namespace", "pod", "container", "env_label", "env_value"} <= set(
        variables
    )
    label = {"otel": "k8s_{}_name", "dcgm": "{}"}[naming]
    for name in ("namespace", "pod", "container"):
        assert variables[name]["query"]["query"].endswith(f", {label.format(name)})")
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    assert (
        variables["env_label"]["query"]
        == {"otel": "container_env_TEAM", "dcgm": "env_TEAM"}[naming]
    )
    assert "$env_label" in variables["env_value"]["query"]["query"]


def test_descriptions_say_which_naming() -> None:
    assert "naming: otel" in dashboard("otel")["description"]
    assert "naming: dcgm" in dashboard("dcgm")["description"]
    assert dashboard("otel")["uid"] != dashboard("dcgm")["uid"]


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_rows_for_fleet_mig_time_slicing_and_chargeback(naming: str) -> None:
    found = rows(naming)
    assert [r for r in found if not r.startswith("Agent health")] == ROWS
    for title in ROWS:
        assert found[title], title
    chargeback = {p["title"] for p in found["Chargeback"]}
    assert {
        "GPU-hours by namespace (time range)",
        "GPU-hours by business label (time range)",
        "Energy by namespace (time range)",
        "Energy by business label (time range)",
    } <= chargeback
    used = set().union(*(metrics_in(t["expr"]) for p in found["Chargeback"] for t in p["targets"]))
    assert {"otelgpu:gpu_hours:holder_1h", "otelgpu:hw_energy_joules:holder_1h"} <= used
    mig = " ".join(t["expr"] for p in found["MIG"] for t in p["targets"])
    assert NAMINGS[naming].mig in mig


def test_both_namings_have_the_same_panels() -> None:
    def shape(naming: str) -> list[tuple[str, str, dict[str, int]]]:
        return [(p["type"], p["title"], p["gridPos"]) for p in dashboard(naming)["panels"]]

    assert shape("otel") == shape("dcgm")


def test_otel_panels_cover_gpu_and_agent_health() -> None:
    used = set().union(*(metrics_in(q) for q in queries("otel")))
    assert {
        "hw_gpu_utilization_ratio",
        "hw_gpu_memory_usage_bytes",
        "nvidia_gpu_memory_free_bytes",
        "nvidia_gpu_memory_reserved_bytes",
        "hw_power_watts",
        "hw_temperature_celsius",
        "nvidia_gpu_xid_errors_total",
        "nvidia_gpu_up",  # with the health summary (hw_state)
        "nvidia_gpu_sm_clock_hertz",
        "nvidia_gpu_graphics_active_ratio",
        "otelgpu_source_up",
        "otelgpu_enrichment_unmatched_points_total",
        "otelgpu_exporter_queue_size",
    } <= used


def test_dcgm_panels_use_dcgm_names() -> None:
    used = set().union(*(metrics_in(q) for q in queries("dcgm")))
    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    } <= used
    assert not used & (catalog_names() - dcgm_names()), "otel names in the dcgm dashboard"
    text = json.dumps(dashboard("dcgm"))
    assert "k8s_pod_name" not in text and "k8s_namespace_name" not in text


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_workload_panels_filter_on_every_variable(naming: str) -> None:
    n = NAMINGS[naming]
    for title, row in rows(naming).items():
        for panel in row:
            for target in panel["targets"]:
                # Fleet and agent panels describe nodes: the node filter is theirs.
                wanted = ["$node"]
                if title in dashboards.WORKLOAD_ROWS:
                    wanted += [
                        f'{n.namespace}=~"$namespace"',
                        f'{n.pod}=~"$pod"',
                        f'{n.container}=~"$container"',
                        '$env_label=~"$env_value"',
                    ]
                for variable in wanted:
                    assert variable in target["expr"], (panel["title"], variable)


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_queries_use_only_metrics_the_default_set_serves(naming: str) -> None:
    """No panel stays empty on an agent that runs the default metric set."""
    rules = RULES if naming == "otel" else DCGM_RULES
    recorded = {
        r["record"]
        for g in yaml.safe_load(rules.read_text())["groups"]
        for r in g["rules"]
        if "record" in r
    }
    allowed = served(naming, default_only=True) | self_telemetry_names() | EXTERNAL | recorded
    used = set().union(*(metrics_in(q) for q in queries(naming)))
    assert used - allowed == set()


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_queries_are_valid_promql(naming: str, tmp_path: Path) -> None:
    """promtool parses every query (Grafana's variables substituted) as a recording rule."""
    rules = [
        {"record": f"dashboard:query:{i}", "expr": promql(q, naming)}
        for i, q in enumerate(queries(naming))
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run("promtool", "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("naming", sorted(NAMINGS))
def test_panel_ids_and_grid_are_sane(naming: str) -> None:
    ids = [p["id"] for p in dashboard(naming)["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard(naming)["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
    for panel in panels(naming):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]


def test_the_files_are_what_the_description_makes() -> None:
    for naming in NAMINGS.values():
        path = FOLDER / dashboards.file_name(naming)
        assert path.read_text() == dashboards.text(naming), (
            "run python -m tests.deploy.sync --write"
        )
