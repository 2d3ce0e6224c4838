"""What a fresh interpreter has imported after running some code: for the tests that keep
heavy libraries and components' cores out of the paths that do not need them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after `code` (which fails the test if it raises)."""
    script = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return set(out.stdout.split())
