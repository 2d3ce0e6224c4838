"""The DaemonSet's pipeline file is valid, and the bundle's derived files match their sources."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.deploy import sync
from tests.deploy.tools import ROOT


def test_derived_files_are_in_sync() -> None:
    assert sync.stale() == [], "run: python -m tests.deploy.sync --write"


def test_prometheus_rule_generation_keeps_the_groups() -> None:
    text = sync.prometheus_rule("# header\ngroups:\n  - name: g\n    rules: []\n")
    assert text.endswith("spec:\n  groups:\n    - name: g\n      rules: []\n")


def test_daemonset_pipeline_validates() -> None:
    env = {**os.environ, "K8S_NODE_NAME": "gpu-node-1"}
    env.pop("OTLP_ENDPOINT", None)
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "validate", "-c", str(sync.PIPELINE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_daemonset_pipeline_resolves_as_documented() -> None:
    env = {**os.environ, "K8S_NODE_NAME": "gpu-node-1"}
    env.pop("OTLP_ENDPOINT", None)
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "print-config", "-c", str(sync.PIPELINE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    resolved = result.stdout
    for expected in (
        "host_proc: /host/proc",
        "processes: true",
        "0.0.0.0:9400",
        "0.0.0.0:13133",
        "http://otel-gateway.monitoring.svc:4317",
        "naming: otel",
    ):
        assert expected in resolved, expected
