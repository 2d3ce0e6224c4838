"""Alert and recording rules: promtool accepts them, every alert has a passing unit test, and
every metric and label they use is one the agent (or the named outside source) produces."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.names import (
    EXTERNAL,
    catalog_names,
    known_labels,
    metrics_in,
    self_telemetry_names,
)
from tests.deploy.sync import RULES
from tests.deploy.tools import run

TESTS = sorted((RULES.parent / "tests").glob("*.yaml"))
# Labels from outside the GPU resources: scrape target labels, self-telemetry's data point
# labels (SPEC "Names on the wire"), kube-state-metrics' `node` and its `label_*` copies.
OTHER_LABELS = frozenset({"job", "instance", "source", "processor", "reason", "exporter", "node"})


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_promtool_check_rules_accepts_the_file() -> None:
    result = run("promtool", "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    assert TESTS, "no promtool tests in deploy/rules/tests"
    result = run("promtool", "test", "rules", *map(str, TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(TESTS)


def _tested(path: Path) -> tuple[set[str], set[str]]:
    """(alerts expected to fire somewhere, recorded series evaluated) in one test file."""
    fired: set[str] = set()
    evaluated: set[str] = set()
    for case in yaml.safe_load(path.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            if check.get("exp_alerts"):
                fired.add(check["alertname"])
        for check in case.get("promql_expr_test", []):
            evaluated |= metrics_in(check["expr"])
    return fired, evaluated


def test_every_rule_has_a_unit_test() -> None:
    fired: set[str] = set()
    evaluated: set[str] = set()
    for path in TESTS:
        f, e = _tested(path)
        fired |= f
        evaluated |= e
    alerts = {r["alert"] for r in rules() if "alert" in r}
    records = {r["record"] for r in rules() if "record" in r}
    assert alerts - fired == set(), "alerts no promtool test sees firing"
    assert records - evaluated == set(), "recording rules no promtool test evaluates"


def test_rules_use_only_metrics_the_agent_serves() -> None:
    recorded = {r["record"] for r in rules() if "record" in r}
    allowed = catalog_names() | self_telemetry_names() | EXTERNAL | recorded
    used = {name for r in rules() for name in metrics_in(r["expr"])}
    assert used - allowed == set()
    # The GPU, XID, thermal, ECC, memory and enrichment rules all have their inputs here.
    assert {"otelgpu_source_up", "otelgpu_enrichment_unmatched_points_total"} <= used
    assert {"nvidia_gpu_xid_errors_total", "hw_errors_total", "hw_temperature_celsius"} <= used


def _labels_in(rule: dict[str, Any]) -> set[str]:
    expr = rule["expr"]
    names = set()
    for group in re.findall(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)", expr
    ):
        names |= {n.strip() for n in group.split(",") if n.strip()}
    names |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*\"", expr))
    for text in rule.get("annotations", {}).values():
        names |= set(re.findall(r"\$labels\.(\w+)", text))
    return names


def test_rules_use_only_labels_the_series_carry() -> None:
    for rule in rules():
        unknown = {
            name
            for name in _labels_in(rule) - known_labels() - OTHER_LABELS
            if not name.startswith("label_")  # kube-state-metrics' node labels
        }
        # label_replace's target and the scrape-time labels Prometheus itself owns
        unknown -= {"container", "pod", "namespace", "service", "endpoint"}
        assert unknown == set(), f"{rule.get('alert') or rule.get('record')}: {unknown}"


def test_alerts_have_severity_and_text() -> None:
    for rule in rules():
        if "alert" in rule:
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
