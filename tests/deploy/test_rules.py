"""Alert and recording rules, in both namings (deploy/rules/otelgpu-rules.yaml for `naming:
otel`, otelgpu-rules-dcgm.yaml for `naming: dcgm`, and the detail alerts of
otelgpu-rules-detail.yaml and otelgpu-rules-detail-dcgm.yaml): promtool accepts them, every
alert has a passing unit test that sees it fire, every recording rule one that evaluates it,
and every metric and label they use is one the agent (or the named outside source) produces in
that naming: on its default metric set for the default files, with `metric_set: all` for the
detail files. The two namings carry the same alerts and the same chargeback series."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from otelgpu.exporters.prometheus.naming import metric_name
from otelgpu.receivers.nvml.metrics import CATALOG
from tests.deploy.names import (
    EXTERNAL,
    OWN_LIMITS,
    catalog_names,
    dcgm_names,
    known_labels,
    metrics_in,
    self_telemetry_names,
    served,
)
from tests.deploy.sync import DCGM_DETAIL_RULES, DCGM_RULES, DETAIL_RULES, RULES
from tests.deploy.tools import run
from tests.peers.prometheus3 import promtool3_binary

TESTS = sorted((RULES.parent / "tests").glob("*.yaml"))
DCGM_TESTS = sorted((RULES.parent / "tests" / "dcgm").glob("*.yaml"))
# The otelgpu.agent group is the same in both files, and so are its tests.
SHARED_TESTS = ("agent.yaml", "export.yaml")
FILES = {"otel": RULES, "dcgm": DCGM_RULES}
DETAIL_FILES = {"otel": DETAIL_RULES, "dcgm": DCGM_DETAIL_RULES}
EVERY_FILE = [*FILES.values(), *DETAIL_FILES.values()]
# Labels from outside the GPU resources: scrape target labels, self-telemetry's data point
# labels (SPEC "Names on the wire"), kube-state-metrics' `node` and its `label_*` copies.
OTHER_LABELS = frozenset({"job", "instance", "source", "processor", "reason", "exporter", "node"})
# Business labels (the chargeback rules' team is the pod label `team`).
BUSINESS = {"otel": ("k8s_pod_label_", "container_env_"), "dcgm": ("env_",)}
BUSINESS_NAMES = {"otel": set(), "dcgm": {"team"}}


def rules_in(path: Path) -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]


def rules(naming: str = "otel") -> list[dict[str, Any]]:
    """The rules of a naming: its default file's and its detail file's."""
    return rules_in(FILES[naming]) + rules_in(DETAIL_FILES[naming])


def groups(naming: str) -> dict[str, Any]:
    return {g["name"]: g for g in yaml.safe_load(FILES[naming].read_text())["groups"]}


@pytest.mark.parametrize("path", EVERY_FILE, ids=lambda p: p.name)
def test_promtool_check_rules_accepts_the_file(path: Path) -> None:
    result = run("promtool", "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules_in(path))} rules found" in result.stdout


def shared_tests_for_dcgm(folder: Path) -> list[Path]:
    """The otel tests of the shared agent group, pointed at the dcgm rules file."""
    out = []
    for name in SHARED_TESTS:
        data = yaml.safe_load((RULES.parent / "tests" / name).read_text())
        assert data["rule_files"] == ["../otelgpu-rules.yaml"]
        data["rule_files"] = [str(DCGM_RULES)]
        path = folder / f"shared-{name}"
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        out.append(path)
    return out


def promtool_unit_tests(promtool: str, folder: Path) -> None:
    assert TESTS and DCGM_TESTS, "no promtool tests in deploy/rules/tests"
    every = [*TESTS, *DCGM_TESTS, *shared_tests_for_dcgm(folder)]
    result = run(promtool, "test", "rules", *map(str, every))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(every)


def test_promtool_unit_tests_pass(tmp_path: Path) -> None:
    promtool_unit_tests("promtool", tmp_path)


def test_promtool_3_unit_tests_pass(tmp_path: Path) -> None:
    """Prometheus 3 reads a range window without its left edge (`[15m]` at 20m holds the
    samples after 5m, Prometheus 2 the one at 5m too): the tests must hold on both."""
    promtool_unit_tests(promtool3_binary(), tmp_path)


def test_promtool_3_check_rules_accepts_every_file() -> None:
    for path in EVERY_FILE:
        result = run(promtool3_binary(), "check", "rules", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"SUCCESS: {len(rules_in(path))} rules found" in result.stdout


def test_the_agent_group_is_the_same_in_both_namings() -> None:
    assert groups("otel")["otelgpu.agent"] == groups("dcgm")["otelgpu.agent"]


def test_both_namings_have_the_same_alerts_and_chargeback_series() -> None:
    def alerts(naming: str) -> list[str]:
        return sorted(r["alert"] for r in rules(naming) if "alert" in r)

    assert alerts("otel") == alerts("dcgm")
    detail = [sorted(r["alert"] for r in rules_in(path)) for path in DETAIL_FILES.values()]
    assert detail[0] == detail[1]
    for naming in FILES:
        chargeback = {r["record"] for r in groups(naming)["otelgpu.chargeback"]["rules"]}
        assert chargeback == {
            "otelgpu:gpu_hours:holder_1h",
            "otelgpu:mig_instance_hours:holder_1h",
            "otelgpu:gpu_hours:namespace_1h",
            "otelgpu:gpu_hours:team_1h",
            "otelgpu:hw_energy_joules:holder_1h",
            "otelgpu:hw_energy_joules:namespace_1h",
            "otelgpu:hw_energy_joules:team_1h",
        }


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


@pytest.mark.parametrize("naming", sorted(FILES))
def test_every_rule_has_a_unit_test(naming: str) -> None:
    paths = TESTS if naming == "otel" else DCGM_TESTS
    if naming == "dcgm":
        paths = [*paths, *(RULES.parent / "tests" / name for name in SHARED_TESTS)]
    fired: set[str] = set()
    evaluated: set[str] = set()
    for path in paths:
        f, e = _tested(path)
        fired |= f
        evaluated |= e
    alerts = {r["alert"] for r in rules(naming) if "alert" in r}
    records = {r["record"] for r in rules(naming) if "record" in r}
    assert alerts - fired == set(), "alerts no promtool test sees firing"
    assert records - evaluated == set(), "recording rules no promtool test evaluates"


def _used(path: Path) -> set[str]:
    return {name for r in rules_in(path) for name in metrics_in(r["expr"])}


@pytest.mark.parametrize("naming", sorted(FILES))
def test_default_rules_use_only_metrics_the_default_set_serves(naming: str) -> None:
    """A default rule never waits on a metric the agent emits only when asked."""
    recorded = {r["record"] for r in rules_in(FILES[naming]) if "record" in r}
    allowed = served(naming, default_only=True) | self_telemetry_names() | EXTERNAL | recorded
    used = _used(FILES[naming])
    assert used - allowed - OWN_LIMITS == set()
    assert OWN_LIMITS & used <= served(naming)  # read where served, never waited on
    # The enrichment, OTLP, health, memory and chargeback rules all have their inputs here.
    assert {
        "otelgpu_source_up",
        "otelgpu_enrichment_unmatched_points_total",
        "otelgpu_exporter_failed_points_total",
        "otelgpu_exporter_queue_size",
        "nvidia_gpu_up",  # with the health summary (hw_state)
        "nvidia_gpu_allocation_ratio",
    } <= used
    if naming == "otel":
        assert {
            "nvidia_gpu_xid_errors_total",
            "hw_temperature_celsius",
            "hw_gpu_memory_usage_bytes",
            "nvidia_gpu_memory_free_bytes",
            "nvidia_gpu_memory_reserved_bytes",
            "hw_energy_joules_total",
        } <= used
    else:
        assert {
            "DCGM_FI_DEV_XID_ERRORS",
            "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_FB_RESERVED",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        } <= used
        assert not used & (catalog_names() - dcgm_names()), "otel names in the dcgm rules"


@pytest.mark.parametrize("naming", sorted(DETAIL_FILES))
def test_detail_rules_each_need_an_opt_in_metric(naming: str) -> None:
    """Every detail alert uses a metric the agent serves with `metric_set: all` and not by
    default (one that needs none belongs in the default file), and no alert is in both files."""
    path = DETAIL_FILES[naming]
    opt_in = served(naming) - served(naming, default_only=True)
    for rule in rules_in(path):
        used = metrics_in(rule["expr"])
        assert used <= served(naming) | EXTERNAL, rule["alert"]
        assert used & opt_in, f"{rule['alert']} needs no opt-in metric"
    assert not {r.get("alert") for r in rules_in(path)} & {
        r.get("alert") for r in rules_in(FILES[naming])
    }
    used = _used(path)
    if naming == "otel":
        assert {
            "hw_errors_total",
            "nvidia_gpu_nvlink_errors_total",
            "nvidia_gpu_clock_violation_time_seconds_total",
            "nvidia_gpu_clock_event_active",
        } <= used
    else:
        assert {
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_THERMAL_VIOLATION",
            "nvidia_gpu_clock_event_active",
        } <= used
        assert not used & (catalog_names() - dcgm_names()), "otel names in the dcgm rules"


@pytest.mark.parametrize("naming", sorted(DETAIL_FILES))
def test_detail_rules_name_the_metrics_they_need(naming: str) -> None:
    """The detail file's header names each opt-in metric its alerts use (by its catalog name,
    as `metrics:` switches it on) and `metric_set: all`."""
    header = DETAIL_FILES[naming].read_text().split("\ngroups:\n")[0]
    used = _used(DETAIL_RULES)  # the otel names map back to the catalog's
    needed = {
        spec.name
        for spec in CATALOG
        if not spec.enabled and metric_name(spec.name, spec.unit, spec.kind, spec.monotonic) in used
    }
    assert len(needed) == 4
    assert [name for name in sorted(needed) if name not in header] == []
    assert "metric_set: all" in header and "metricSet: all" in header


def _labels_in(rule: dict[str, Any]) -> set[str]:
    expr = rule["expr"]
    names = set()
    for group in re.findall(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)", expr
    ):
        names |= {n.strip() for n in group.split(",") if n.strip()}
    names |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*\"", expr))
    names |= set(re.findall(r'label_replace\([^,]+,\s*"(\w+)"', expr))
    for text in rule.get("annotations", {}).values():
        names |= set(re.findall(r"\$labels\.(\w+)", text))
    return names


@pytest.mark.parametrize("naming", sorted(FILES))
def test_rules_use_only_labels_the_series_carry(naming: str) -> None:
    known = known_labels(naming) | OTHER_LABELS | BUSINESS_NAMES[naming]
    for rule in rules(naming):
        unknown = {
            name
            for name in _labels_in(rule) - known
            if not name.startswith(("label_", *BUSINESS[naming]))  # kube-state-metrics' too
        }
        # label_replace's target and the scrape-time labels Prometheus itself owns
        unknown -= {"container", "pod", "namespace", "service", "endpoint"}
        assert unknown == set(), f"{rule.get('alert') or rule.get('record')}: {unknown}"


@pytest.mark.parametrize("naming", sorted(FILES))
def test_alerts_have_severity_and_text(naming: str) -> None:
    for rule in rules(naming):
        if "alert" in rule:
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_dcgm_rules_name_gpus_by_dcgm_labels() -> None:
    """A dcgm-exporter user's alert says Hostname, UUID and gpu, never otel's hw_* labels."""
    for rule in rules("dcgm"):
        labels = _labels_in(rule)
        assert not labels & {"hw_name", "hw_model", "k8s_namespace_name", "k8s_pod_name"}, rule
