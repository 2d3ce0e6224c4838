"""Every dependency installs from a wheel on arm64 as on amd64, so the multi-arch image
build (docs/deploy.md, "Building the image") needs no compiler and no emulated C builds.

pip resolves the whole dependency tree for CPython 3.11 on manylinux aarch64 with
`--only-binary=:all:` (tests/deploy/wheelhouse.py; cached by dependency list)."""

from __future__ import annotations

import re

import pytest

from tests.deploy import wheelhouse

pytestmark = pytest.mark.integration


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("-", "_")


@pytest.mark.parametrize("arch", ["arm64", "amd64"])
def test_every_dependency_resolves_to_a_wheel(arch: str) -> None:
    folder = wheelhouse.cached(arch)
    files = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
    assert files and all(f.endswith(".whl") for f in files), files
    machine = wheelhouse.MACHINES[arch]
    for wheel in files:
        platform = wheel[: -len(".whl")].split("-")[-1]
        assert platform == "any" or machine in platform, wheel
    names = {f.split("-")[0].lower() for f in files}
    for requirement in wheelhouse.requirements():
        assert _name(requirement) in names, requirement
    # pydantic-core, PyYAML, bcrypt... have native code: an arm64 wheel for each.
    native = [f for f in files if machine in f]
    assert any(f.startswith("pydantic_core-") for f in native), native
