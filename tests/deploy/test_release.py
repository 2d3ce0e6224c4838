"""One version: otelgpu/__init__.py. The CLI, the chart (version and appVersion), the image's
default tag (Dockerfile, kustomize base) and the CHANGELOG all say the same."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

import otelgpu
from tests.deploy.helm import CHART
from tests.deploy.tools import ROOT

VERSION = otelgpu.__version__
WHERE = "bump it in otelgpu/__init__.py and everywhere docs/deploy.md 'Releasing' lists"


def test_version_is_semver() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", VERSION), VERSION


def test_cli_prints_the_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "otelgpu", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"otelgpu {VERSION}"


def test_chart_version_and_app_version_follow_the_agent() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION), WHERE


def test_image_tag_defaults_follow_the_agent() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"ARG VERSION={VERSION}\n" in dockerfile, WHERE
    base = yaml.safe_load((ROOT / "deploy" / "base" / "kustomization.yaml").read_text())
    (image,) = base["images"]
    assert image["newTag"] == VERSION, WHERE


def test_changelog_has_a_section_for_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert headings and headings[0] in (VERSION, "Unreleased"), headings
    assert VERSION in headings, f"CHANGELOG.md has no '## [{VERSION}]' section"


def test_package_metadata_reads_the_same_attribute() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'version = {attr = "otelgpu.__version__"}' in pyproject
