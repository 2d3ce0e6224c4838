"""Rendering the Helm chart with a real Helm engine: Helm v4's Go SDK, from PyPI.

No `helm` binary installs from a package registry reachable here, but the PyPI package
`helm-python-sdk` ships `libhelm_c`, a C ABI over Helm's own Go packages (chart loader,
engine, lint), bound with ctypes. `render` is `helm template`: the same loader (which follows
the chart's links to deploy/rules, deploy/dashboards and pipelines/), the same template
engine and functions, the same values coalescing.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.deploy.tools import ROOT

CHART = ROOT / "deploy" / "helm" / "otelgpu"
RELEASE = "otelgpu"
NAMESPACE = "otelgpu"

Doc = dict[str, Any]


def engine() -> Any:
    """The `helm_python` module; fails with the install hint when it is missing."""
    try:
        import helm_python
    except ImportError:
        pytest.fail("helm_python not found; install it: pip install -e '.[test]' (helm-python-sdk)")
    return helm_python


def render_files(values: dict[str, Any] | None = None, name: str = RELEASE) -> dict[str, str]:
    """Template file → rendered text, as `helm template NAME deploy/helm/otelgpu` gives."""
    with engine().Chart.load(str(CHART)) as chart:
        rendered: dict[str, str] = chart.render(values or {}, name=name, namespace=NAMESPACE)
    return rendered


def render(values: dict[str, Any] | None = None, name: str = RELEASE) -> list[Doc]:
    """Every object the chart renders with these values (NOTES.txt left out)."""
    return [
        doc
        for path, text in sorted(render_files(values, name).items())
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def lint() -> dict[str, Any]:
    """`helm lint` of the chart: {'messages': [...], 'errors': [...]}."""
    result: dict[str, Any] = engine().lint(str(CHART))
    return result
