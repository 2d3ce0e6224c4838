"""Reading .github/workflows/release.yml: its settings, its steps, and its shell scripts.

The image test (tests/deploy/image.py) builds with the build step's context, Dockerfile and
build arguments, and tests/deploy/test_workflow.py runs the steps' own scripts, so the tests
exercise what a release does rather than a description of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.tools import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
# The tests on every push, which the release runs first (its `test` job calls this file).
CI = ROOT / ".github" / "workflows" / "ci.yml"
# The value the version step gives its later steps (steps.version.outputs.version).
_VERSION_OUTPUT = "${{ steps.version.outputs.version }}"

Step = dict[str, Any]


@cache
def workflow() -> dict[Any, Any]:
    """The workflow as YAML data (`on` stays a string key: PyYAML's BaseLoader keeps every
    scalar a string, as GitHub reads the keys)."""
    data: dict[Any, Any] = yaml.load(WORKFLOW.read_text(), Loader=yaml.BaseLoader)
    return data


def env() -> dict[str, str]:
    values: dict[str, str] = workflow()["env"]
    return values


def steps() -> list[Step]:
    found: list[Step] = workflow()["jobs"]["release"]["steps"]
    return found


def step(name: str) -> Step:
    """The step with this `name`, or the one that `uses` this action (without its version)."""
    found = [s for s in steps() if s.get("name") == name or s.get("uses", "").split("@")[0] == name]
    assert len(found) == 1, f"release.yml has {len(found)} steps named {name!r}"
    return found[0]


def script(name: str, version: str) -> str:
    """A `run` step's script, with the version step's output filled in."""
    text: str = step(name)["run"]
    return text.replace(_VERSION_OUTPUT, version)


def step_env(name: str, version: str, **secrets: str) -> dict[str, str]:
    """A step's `env`, with the version and `${{ secrets.NAME }}` filled in."""
    out = {}
    for key, value in step(name).get("env", {}).items():
        value = value.replace(_VERSION_OUTPUT, version)
        value = re.sub(r"\$\{\{ secrets\.(\w+) \}\}", lambda m: secrets[m.group(1)], value)
        out[key] = value
    return out


@dataclass(frozen=True)
class ImageBuild:
    """What the build step hands `docker buildx build`."""

    context: Path
    dockerfile: str
    platforms: tuple[str, ...]
    build_args: dict[str, str]
    tags: tuple[str, ...]


def image_build(version: str) -> ImageBuild:
    options = step("docker/build-push-action")["with"]

    def lines(value: str) -> list[str]:
        return [line.strip() for line in value.replace(",", "\n").splitlines() if line.strip()]

    args = dict(line.split("=", 1) for line in lines(options["build-args"]))
    tags = [
        tag.replace("${{ env.IMAGE }}", env()["IMAGE"]).replace(_VERSION_OUTPUT, version)
        for tag in lines(options["tags"])
    ]
    return ImageBuild(
        context=ROOT / options["context"],
        dockerfile=options["file"],
        platforms=tuple(lines(options["platforms"])),
        build_args={k: v.replace(_VERSION_OUTPUT, version) for k, v in args.items()},
        tags=tuple(tags),
    )
