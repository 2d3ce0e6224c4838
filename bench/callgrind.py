"""Instruction counts of a window of work in a child process, under callgrind.

Instruction counts are stable on a busy machine where CPU time is not. The child runs under
`valgrind --tool=callgrind` with its instrumentation off (`--instr-atstart=no`, several times
faster), prepares, and says `ready` (`gate`); the parent switches instrumentation on
(`callgrind_control`) and lets it go; the child does the work to be counted and says
`done <what it reports>`; the parent switches instrumentation off and lets it finish. The
count is callgrind's total of the instrumented window alone.

    instructions, reply = counted(["-m", "bench.p9_cost_growth", "--child", "10k"])
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD_TIMEOUT = 3600.0  # seconds: a big start under valgrind takes minutes on a busy machine


def gate(line: str) -> None:
    """A child's side: says where it is (`ready`, then `done ...`), waits for the parent."""
    print(line, flush=True)
    sys.stdin.readline()


def counted(arguments: list[str]) -> tuple[int, str]:
    """(instructions, the child's `done` line without the word) of the window between the
    child's `ready` and `done` lines; `arguments` follow the interpreter."""
    with tempfile.TemporaryDirectory(prefix="otelgpu-cg-") as directory:
        out, log = Path(directory, "cg.out"), Path(directory, "stderr")
        with log.open("w") as errors:
            child = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={out}", sys.executable, *arguments],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )  # fmt: skip
        try:
            _until(child, "ready", log)
            _instrument(child, "on")
            reply = _until(child, "done", log).removeprefix("done").strip()
            _instrument(child, "off")
            if child.wait(timeout=CHILD_TIMEOUT) != 0:
                raise RuntimeError(f"the child failed: {log.read_text()[-500:]}")
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        totals = re.findall(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        if not totals:
            raise RuntimeError(f"no callgrind totals: {log.read_text()[-500:]}")
        return max(map(int, totals)), reply


def _until(child: subprocess.Popen[str], prefix: str, log: Path) -> str:
    """The child's first line starting with `prefix` (other lines are its own output)."""
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith(prefix):
            return line
    raise RuntimeError(f"the child ended before {prefix!r}: {log.read_text()[-500:]}")


def _instrument(child: subprocess.Popen[str], state: str) -> None:
    """Callgrind's instrumentation of `child` on or off; then lets the child go on."""
    subprocess.run(
        ["callgrind_control", "--instr=" + state, str(child.pid)],
        check=True,
        capture_output=True,
        timeout=CHILD_TIMEOUT,
    )
    assert child.stdin is not None
    child.stdin.write("\n")
    child.stdin.flush()
