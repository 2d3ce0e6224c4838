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


def test_chart_names_its_home_sources_and_an_icon_in_the_repository() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    home = chart["home"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", home), home
    assert chart["sources"] == [home]
    owner_repo = home.removeprefix("https://github.com/")
    prefix = f"https://raw.githubusercontent.com/{owner_repo}/main/"
    assert chart["icon"].startswith(prefix), chart["icon"]
    assert (ROOT / chart["icon"].removeprefix(prefix)).is_file()


def _sections() -> dict[str, str]:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    parts = re.split(r"^## \[([^\]]+)\]\n", changelog, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_changelog_unreleased_is_short_and_the_release_is_net_changes() -> None:
    """[Unreleased] is a short list to append to; a release section says what changed for a
    user of the one before (with Action notes), not how figures moved while it was made."""
    sections = _sections()
    assert len(sections["Unreleased"].strip().splitlines()) <= 20
    if VERSION != "0.1.0":
        release = sections[VERSION]
        assert "**Action:**" in release
        for diary in ("callgrind", "bench/", "before,", "used to", "instead of ~"):
            assert diary not in release, diary
        # A figure moving (`12.3 → 9.6 ms`) is a benchmark diary; a rename (`a` → `b`) is not.
        assert re.findall(r"\d\S* → \d", release) == []
