"""What a fresh interpreter has imported after running some code: for the tests that keep
heavy libraries and components' cores out of the paths that do not need them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def modules_after(code: str, *, without_site: bool = False) -> set[str]:
    """The modules a fresh interpreter holds after `code` (which fails the test if it raises).
    `without_site`: started as the image starts the agent (`python -S`, its packages through
    PYTHONPATH), so that no `.pth` file of this machine imports anything first."""
    script = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))\n"
    command, env = [sys.executable, "-c", script], None
    if without_site:
        paths = [path for path in sys.path if path and Path(path).is_dir()]
        command.insert(1, "-S")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *paths])}
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return set(out.stdout.split())
