"""The release workflow (.github/workflows/release.yml): actionlint (with shellcheck on its
scripts) accepts it, it publishes where the chart and the docs say, and its own steps run here:
the version check, the chart's `helm package` / `helm push` (Helm's Go SDK stands in for the
helm binary; the push goes nowhere) and the release notes. The image is built with the build
step's settings by tests/deploy/test_image_run.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

import otelgpu
from tests.deploy import helm, sync, wheelhouse, workflow
from tests.deploy import image as agent_image
from tests.deploy.tools import ROOT, run, tool

VERSION = otelgpu.__version__
DIGEST = "sha256:" + "0" * 64
# GitHub's `run` shell: bash --noprofile --norc -eo pipefail {0}.
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]


def test_actionlint_and_shellcheck_accept_the_workflows() -> None:
    result = run(
        "actionlint",
        "-shellcheck",
        tool("shellcheck"),
        "-pyflakes",
        "",
        str(workflow.WORKFLOW.relative_to(ROOT)),
        str(workflow.CI.relative_to(ROOT)),
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_finds_what_shellcheck_reports(tmp_path: Path) -> None:
    """The lint above is not vacuous: an unquoted variable in a step fails it."""
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    text = workflow.WORKFLOW.read_text()
    broken.write_text(text.replace("--destination dist\n", "--destination dist $VERSION\n", 1))
    result = run("actionlint", "-shellcheck", tool("shellcheck"), str(broken), cwd=tmp_path)
    assert result.returncode == 1
    assert "SC2086" in result.stdout


def test_runs_on_version_tags_with_write_access_only_where_needed() -> None:
    data = workflow.workflow()
    assert data["on"] == {"push": {"tags": ["v*.*.*"]}}
    assert data["permissions"] == {"contents": "read"}
    assert set(data["jobs"]) == {"test", "release"}
    job = data["jobs"]["release"]
    assert job["permissions"] == {"contents": "write", "packages": "write"}


def _readme_commands() -> list[str]:
    """The README's opening block: its commands, comments left out."""
    block = (ROOT / "README.md").read_text().split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split(" #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_nothing_is_published_unless_the_readmes_test_command_passed() -> None:
    """The release job needs the `test` job, which is ci.yml: the README's test command in the
    container it was made for, on pushes and pull requests too."""
    jobs = workflow.workflow()["jobs"]
    assert jobs["test"] == {"uses": "./.github/workflows/ci.yml"}
    assert jobs["release"]["needs"] == "test"
    ci = yaml.load(workflow.CI.read_text(), Loader=yaml.BaseLoader)
    assert set(ci["on"]) == {"push", "pull_request", "workflow_call"}
    (job,) = ci["jobs"].values()
    assert job["container"]["image"].startswith("python:3.11-")
    runs = [s["run"].strip() for s in job["steps"] if "run" in s]
    assert runs == ["scripts/test"]
    assert runs[0] in _readme_commands(), _readme_commands()


def test_the_chart_pulls_the_image_the_workflow_pushes() -> None:
    build = agent_image.release_build()
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == workflow.env()["IMAGE"]
    assert values["image"]["tag"] == ""  # the chart's appVersion: the release's version
    assert build.tags == (f"{workflow.env()['IMAGE']}:{VERSION}",)
    assert workflow.env()["IMAGE"].startswith(workflow.env()["REGISTRY"] + "/")


def test_the_image_is_built_for_amd64_and_arm64_from_the_repository_dockerfile() -> None:
    build = agent_image.release_build()
    assert build.platforms == ("linux/amd64", "linux/arm64")
    # test_multiarch.py resolves every dependency as a wheel for each of them.
    assert {p.removeprefix("linux/") for p in build.platforms} == set(wheelhouse.MACHINES)
    assert build.context == ROOT and (ROOT / build.dockerfile).is_file()
    assert build.build_args == {"VERSION": VERSION}
    assert f"ARG VERSION={VERSION}\n" in (ROOT / build.dockerfile).read_text()
    options = workflow.step("docker/build-push-action")["with"]
    assert options["push"] == "true" and options["sbom"] == "true"


def _run_step(name: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "step.sh"
    script.write_text(workflow.script(name, VERSION))
    return subprocess.run(
        [*BASH, str(script)],
        cwd=tmp_path / "work",
        env={**os.environ, **workflow.env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A working folder with what the steps read from the checkout."""
    work = tmp_path / "work"
    (work / "otelgpu").mkdir(parents=True)
    (work / "deploy" / "helm").mkdir(parents=True)
    (work / "otelgpu" / "__init__.py").write_text((ROOT / "otelgpu" / "__init__.py").read_text())
    (work / "CHANGELOG.md").write_text((ROOT / "CHANGELOG.md").read_text())
    os.symlink(helm.CHART, work / "deploy" / "helm" / "otelgpu")
    return work


def test_the_version_step_accepts_the_release_tag_and_refuses_another(
    tmp_path: Path, checkout: Path
) -> None:
    output = tmp_path / "github_output"
    output.write_text("")
    env = {"GITHUB_REF_NAME": f"v{VERSION}", "GITHUB_OUTPUT": str(output)}
    result = _run_step("Check the tag against the version", tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert output.read_text() == f"version={VERSION}\n"
    env["GITHUB_REF_NAME"] = "v99.0.0"
    result = _run_step("Check the tag against the version", tmp_path, env)
    assert result.returncode == 1
    assert "::error::tag v99.0.0 is not the version of otelgpu" in result.stdout


_FAKE_HELM = """#!{python}
# `helm` for the chart step: package with Helm's Go SDK, log in and push to nowhere.
import json, sys
import helm_python
args = sys.argv[1:]
log = open({log!r}, "a")
if args[0] == "package":
    path = args[1]
    dest = args[args.index("--destination") + 1]
    print(helm_python.package(path, destination=dest))
elif args[:2] == ["registry", "login"]:
    assert "--password-stdin" in args
    log.write(json.dumps({{"login": args[2], "user": args[args.index("--username") + 1],
                          "password": sys.stdin.read()}}) + "\\n")
elif args[0] == "push":
    with helm_python.Chart.load(args[1]) as chart:
        log.write(json.dumps({{"push": args[1], "to": args[2], "name": chart.name,
                              "version": chart.version}}) + "\\n")
else:
    sys.exit("unexpected helm " + " ".join(args))
"""


def _fake_tool(tmp_path: Path, name: str, script: str) -> str:
    """Installs `script` as the executable `name` in a directory of its own; returns a PATH
    that finds it first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(script)
    tool.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def test_the_chart_step_packages_a_self_contained_chart_and_pushes_it(
    tmp_path: Path, checkout: Path
) -> None:
    log = tmp_path / "helm.log"
    path = _fake_tool(tmp_path, "helm", _FAKE_HELM.format(python=sys.executable, log=str(log)))
    env = workflow.step_env("Package and push the chart", VERSION, GITHUB_TOKEN="token")
    env |= {"PATH": path, "GITHUB_ACTOR": "release-bot"}
    result = _run_step("Package and push the chart", tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    login, push = (json.loads(line) for line in log.read_text().splitlines())
    assert login == {"login": "ghcr.io", "user": "release-bot", "password": "token"}
    archive = checkout / "dist" / f"otelgpu-{VERSION}.tgz"
    assert push == {
        "push": f"dist/otelgpu-{VERSION}.tgz",
        "to": "oci://ghcr.io/otelgpu/charts",
        "name": "otelgpu",
        "version": VERSION,
    }
    # Self-contained: regular files only, the chart's files/ among them.
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert all(m.isfile() or m.isdir() for m in members.values())
    for name in sync.CHART_COPIES:
        assert f"otelgpu/files/{name}" in members
    assert "otelgpu/values.schema.json" in members
    # The packaged chart renders what the chart's folder renders.
    with helm.engine().Chart.load(str(archive)) as chart:
        values = {"naming": "dcgm", "metricSet": "all"}
        packaged = chart.render(values, name=helm.RELEASE, namespace=helm.NAMESPACE)
    assert packaged == helm.render_files(values)


def test_the_release_carries_the_chart_the_sbom_and_this_versions_notes(
    tmp_path: Path, checkout: Path
) -> None:
    calls = tmp_path / "gh.json"
    path = _fake_tool(
        tmp_path,
        "gh",
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'w').write(json.dumps(sys.argv[1:]))\n",
    )
    name = "GitHub release with the chart and the SBOM"
    env = workflow.step_env(name, VERSION, GITHUB_TOKEN="token")
    env |= {"PATH": path, "GITHUB_REF_NAME": f"v{VERSION}"}
    script = workflow.script(name, VERSION).replace("${{ steps.image.outputs.digest }}", DIGEST)
    (tmp_path / "step.sh").write_text(script)
    result = subprocess.run(
        [*BASH, str(tmp_path / "step.sh")],
        cwd=checkout,
        env={**os.environ, **workflow.env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    args = json.loads(calls.read_text())
    sbom = workflow.step("anchore/sbom-action")["with"]["output-file"]
    assert sbom.replace("${{ steps.version.outputs.version }}", VERSION) in args
    assert args[:2] == ["release", "create"] and f"dist/otelgpu-{VERSION}.tgz" in args
    notes = (checkout / "notes.md").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    section = changelog.split(f"## [{VERSION}]", 1)[1].split("\n## [", 1)[0]
    assert section.strip() and section.strip().splitlines()[0] in notes
    assert f"## [{VERSION}]" not in notes and "## [Unreleased]" not in notes
    assert f"ghcr.io/otelgpu/otelgpu:{VERSION}` (digest `{DIGEST}`)" in notes
    assert f"helm install otelgpu oci://ghcr.io/otelgpu/charts/otelgpu --version {VERSION}" in notes


def test_the_docs_install_from_the_workflows_chart_repository() -> None:
    """docs/deploy.md opens with this (tests/deploy/test_docs.py walks every command)."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    chart = f"{workflow.env()['CHART_REPOSITORY']}/otelgpu"
    assert text[text.index("helm install") :].startswith(f"helm install otelgpu {chart} ")
