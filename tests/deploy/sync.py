"""Keeps the deploy bundle's derived files in step with their sources.

- `deploy/base/pipeline.yaml` is `pipelines/k8s-daemonset.yaml`, byte for byte: kustomize's
  configMapGenerator reads no file outside the kustomization's folder, so the ConfigMap's
  source has to be a copy.
- `deploy/overlays/kubelet-stats/pipeline.yaml` is `pipelines/k8s-node.yaml`, for the same
  reason.
- `deploy/base/prometheusrule.yaml` is `deploy/rules/otelgpu-rules.yaml` (the plain rules file
  promtool checks and tests) wrapped in a PrometheusRule, with its `groups:` text indented
  under `spec:` so the expressions keep their layout; `deploy/components/detail-rules/
  prometheusrule.yaml` is `deploy/rules/otelgpu-rules-detail.yaml` wrapped the same way (the
  kustomize component for agents with `metric_set: all`).
- `deploy/dashboards/otelgpu-gpus.json` and `otelgpu-gpus-dcgm.json` are written from
  `tests/deploy/dashboards.py`, which describes both namings' dashboard at once.
- `deploy/helm/otelgpu/files/` holds copies of the two pipelines, the four rules files (default
  and detail, in both namings) and both dashboards, byte for byte: a chart (and the `.tgz` that `helm package` makes of it) may
  only carry files inside its folder. Its `rule-metrics.yaml` says what each rule reads, for
  the chart to install with a counters CSV only the rules it selects (`tests/deploy/rule_metrics.py`).

    python -m tests.deploy.sync          # exit 1 and name the stale files
    python -m tests.deploy.sync --write  # rewrite them

`tests/deploy/test_bundle.py` runs the check, so a stale copy fails the suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.deploy import dashboards, rule_metrics

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "pipelines" / "k8s-daemonset.yaml"
PIPELINE_COPY = ROOT / "deploy" / "base" / "pipeline.yaml"
NODE_PIPELINE = ROOT / "pipelines" / "k8s-node.yaml"
NODE_PIPELINE_COPY = ROOT / "deploy" / "overlays" / "kubelet-stats" / "pipeline.yaml"
RULES = ROOT / "deploy" / "rules" / "otelgpu-rules.yaml"
DCGM_RULES = ROOT / "deploy" / "rules" / "otelgpu-rules-dcgm.yaml"
# The alerts on metrics the nvml receiver emits only with `metric_set: all` (or switched on).
DETAIL_RULES = ROOT / "deploy" / "rules" / "otelgpu-rules-detail.yaml"
DCGM_DETAIL_RULES = ROOT / "deploy" / "rules" / "otelgpu-rules-detail-dcgm.yaml"
PROMETHEUS_RULE = ROOT / "deploy" / "base" / "prometheusrule.yaml"
DETAIL_COMPONENT = ROOT / "deploy" / "components" / "detail-rules"
DETAIL_PROMETHEUS_RULE = DETAIL_COMPONENT / "prometheusrule.yaml"
DASHBOARDS = ROOT / "deploy" / "dashboards"
CHART_FILES = ROOT / "deploy" / "helm" / "otelgpu" / "files"
# The chart's files/ and where each comes from.
CHART_COPIES = {
    "pipeline.yaml": PIPELINE,
    "pipeline-kubelet-stats.yaml": NODE_PIPELINE,
    "otelgpu-rules.yaml": RULES,
    "otelgpu-rules-dcgm.yaml": DCGM_RULES,
    "otelgpu-rules-detail.yaml": DETAIL_RULES,
    "otelgpu-rules-detail-dcgm.yaml": DCGM_DETAIL_RULES,
    "otelgpu-gpus.json": DASHBOARDS / "otelgpu-gpus.json",
    "otelgpu-gpus-dcgm.json": DASHBOARDS / "otelgpu-gpus-dcgm.json",
}

# The chart's files/ written from the rules, not copied (tests/deploy/rule_metrics.py).
RULE_METRICS = "rule-metrics.yaml"

_RULE_HEADER = """\
# GENERATED from deploy/rules/{source} by `python -m tests.deploy.sync --write`;
# edit that file, not this one. If your Prometheus selects rules by label
# (kube-prometheus-stack: `release: <name>`), add that label with a patch in your overlay.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {name}
  labels:
    app.kubernetes.io/name: otelgpu
spec:
"""


def prometheus_rule(rules_text: str, source: str = RULES.name, name: str = "otelgpu") -> str:
    """The PrometheusRule manifest `name` for the text of the plain rules file `source` (its
    header comments left out)."""
    lines = rules_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    body = [("  " + line) if line.strip() else "" for line in lines[start:]]
    return _RULE_HEADER.format(source=source, name=name) + "\n".join(body) + "\n"


def expected() -> dict[Path, str]:
    """Every derived file and the text it must have (dashboards before the chart's copies
    of them, so that one `--write` brings both up to date)."""
    out = {
        PIPELINE_COPY: PIPELINE.read_text(),
        NODE_PIPELINE_COPY: NODE_PIPELINE.read_text(),
        PROMETHEUS_RULE: prometheus_rule(RULES.read_text()),
        DETAIL_PROMETHEUS_RULE: prometheus_rule(
            DETAIL_RULES.read_text(), DETAIL_RULES.name, "otelgpu-detail"
        ),
    }
    generated = {
        DASHBOARDS / dashboards.file_name(n): dashboards.text(n) for n in dashboards.NAMINGS
    }
    out |= generated
    for name, source in CHART_COPIES.items():
        out[CHART_FILES / name] = generated.get(source) or source.read_text()
    out[CHART_FILES / RULE_METRICS] = rule_metrics.text(
        {"otel": [RULES, DETAIL_RULES], "dcgm": [DCGM_RULES, DCGM_DETAIL_RULES]}
    )
    return out


def stale() -> list[Path]:
    """Derived files whose text differs from what their sources give."""
    return [
        path for path, text in expected().items() if not path.exists() or path.read_text() != text
    ]


def main(argv: list[str]) -> int:
    if "--write" in argv:
        for path, text in expected().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return 0
    out_of_date = stale()
    for path in out_of_date:
        print(f"{path.relative_to(ROOT)} is stale: run python -m tests.deploy.sync --write")
    return 1 if out_of_date else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
