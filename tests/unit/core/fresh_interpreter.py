"""What a fresh interpreter has imported after running some code: for the tests that keep
heavy libraries and components' cores out of the paths that do not need them."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def without_site_env() -> dict[str, str]:
    """The environment of an interpreter started as the image starts the agent (`python -S`):
    this tree and the site-packages through PYTHONPATH, so that no `.pth` file of this
    machine imports anything first."""
    return os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), *site.getsitepackages()])}


def modules_after(code: str, *, without_site: bool = False) -> set[str]:
    """The modules a fresh interpreter holds after `code` (which fails the test if it raises);
    `without_site`: started with `python -S` (`without_site_env`)."""
    script = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))\n"
    command, env = [sys.executable, "-c", script], None
    if without_site:
        command, env = [sys.executable, "-S", "-c", script], without_site_env()
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return set(out.stdout.split())
