"""The Dockerfile: hadolint-clean, pinned base, non-root, the CLI as entrypoint running the
DaemonSet's pipeline, and a build context (.dockerignore) that holds what it copies.

The image itself is built and run in tests/deploy/test_image_run.py."""

from __future__ import annotations

import json
import re

from tests.deploy.tools import ROOT, run

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_hadolint_passes() -> None:
    result = run("hadolint", "--failure-threshold", "info", str(DOCKERFILE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_images_are_pinned_python_311_slim() -> None:
    """Both stages use BASE_IMAGE, whose published default is a pinned slim Python 3.11
    (the tests override it with a local Debian image: tests/deploy/base_image.py)."""
    ops = instructions()
    first_from = next(i for i, (op, _) in enumerate(ops) if op == "FROM")
    defaults = dict(arg.split("=", 1) for op, arg in ops[:first_from] if op == "ARG" and "=" in arg)
    assert re.fullmatch(
        r"python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", defaults["BASE_IMAGE"]
    ), defaults
    bases = [arg.split()[0] for op, arg in ops if op == "FROM"]
    assert bases == ["${BASE_IMAGE}", "${BASE_IMAGE}"]


def test_runs_the_daemonset_pipeline_as_non_root() -> None:
    ops = instructions()
    final = ops[max(i for i, (op, _) in enumerate(ops) if op == "FROM") :]
    user = [arg for op, arg in final if op == "USER"]
    assert user and not user[-1].startswith(("0", "root"))
    assert ("ENTRYPOINT", '["otelgpu"]') in final
    cmd = [json.loads(arg) for op, arg in final if op == "CMD"]
    assert cmd == [["run", "-c", "/etc/otelgpu/pipeline.yaml"]]
    assert ("COPY", "pipelines/k8s-daemonset.yaml /etc/otelgpu/pipeline.yaml") in final
    assert any(
        op == "RUN" and "pip install" in arg and arg.rstrip().endswith(" .") for op, arg in ops
    )


def test_build_context_holds_every_copied_source() -> None:
    allowed = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    assert "*" in (ROOT / ".dockerignore").read_text().splitlines()
    for op, arg in instructions():
        if op != "COPY" or arg.startswith("--from"):
            continue
        *sources, _dest = arg.split()
        for source in sources:
            source = source.rstrip("/")
            assert (ROOT / source).exists(), source
            assert any(source == a or source.startswith(a + "/") for a in allowed), source
