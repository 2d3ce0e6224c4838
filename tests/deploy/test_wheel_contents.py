"""The wheel built from this checkout, as the image builds it (`pip install .` of
pyproject.toml, README.md and otelgpu/): it ships what the agent reads from its own package
at run time, the recorded boards of `backend: replay` among them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from otelgpu.receivers.nvml.replay import shipped_boards
from tests.deploy.tools import ROOT


def test_the_wheel_ships_the_recorded_boards_and_the_default_pipeline(tmp_path: Path) -> None:
    source = tmp_path / "src"  # what the Dockerfile copies, and nothing else
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "otelgpu", source / "otelgpu", ignore=shutil.ignore_patterns("__pycache__")
    )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheel"), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob("otelgpu-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert shipped_boards()
    for board in shipped_boards():
        assert f"otelgpu/receivers/nvml/boards/{board}.json" in names
    assert "otelgpu/default_pipeline.yaml" in names
