"""Instruction counts of a window of work in a child process, under callgrind.

Instruction counts are stable on a busy machine where CPU time is not. The child runs under
`valgrind --tool=callgrind` with its instrumentation off (`--instr-atstart=no`, several times
faster), prepares, and says `ready` (`gate`); the parent switches instrumentation on
(`callgrind_control`) and lets it go; the child does the work to be counted and says
`done <what it reports>`; the parent switches instrumentation off and lets it finish. The
count is callgrind's total of the instrumented window alone. A child may say `ready` and
`done` several times (`windows`): each window is counted on its own.

    instructions, reply = counted(["-m", "bench.p9_cost_growth", "--child", "10k"])
    [(a, _), (b, _)] = windows(["-m", "bench.otlp_ended_steady", "--child", ...], 2)
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
    return windows(arguments, 1)[0]


def windows(arguments: list[str], count: int) -> list[tuple[int, str]]:
    """`counted` of each of `count` windows of one child, in order: the child says `ready`,
    does one window's work, says `done ...`, `count` times. Work measured in one process is
    measured on the same objects, allocator and collector history, so two kinds of work done
    in alternate windows of one child compare more closely than in two children."""
    with tempfile.TemporaryDirectory(prefix="otelgpu-cg-") as directory:
        out, log = Path(directory, "cg.out"), Path(directory, "stderr")
        with log.open("w") as errors:
            child = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={out}", sys.executable, *arguments],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )  # fmt: skip
        results = []
        try:
            for window in range(1, count + 1):
                _until(child, "ready", log)
                _control(child, "--zero")
                _control(child, "--instr=on")
                _go(child)
                reply = _until(child, "done", log).removeprefix("done").strip()
                _control(child, "--instr=off")
                _control(child, f"--dump=window{window}")  # written as cg.out.<window>
                results.append((_total(Path(f"{out}.{window}"), log), reply))
                _go(child)
            if child.wait(timeout=CHILD_TIMEOUT) != 0:
                raise RuntimeError(f"the child failed: {log.read_text()[-500:]}")
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        return results


def _total(dump: Path, log: Path) -> int:
    """Callgrind's total of one dump."""
    totals = re.findall(r"^(?:summary|totals): (\d+)", dump.read_text(), re.M)
    if not totals:
        raise RuntimeError(f"no callgrind totals in {dump.name}: {log.read_text()[-500:]}")
    return max(map(int, totals))


def _until(child: subprocess.Popen[str], prefix: str, log: Path) -> str:
    """The child's first line starting with `prefix` (other lines are its own output)."""
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith(prefix):
            return line
    raise RuntimeError(f"the child ended before {prefix!r}: {log.read_text()[-500:]}")


def _control(child: subprocess.Popen[str], option: str) -> None:
    """One `callgrind_control` request to `child`'s callgrind."""
    subprocess.run(
        ["callgrind_control", option, str(child.pid)],
        check=True,
        capture_output=True,
        timeout=CHILD_TIMEOUT,
    )


def _go(child: subprocess.Popen[str]) -> None:
    """Lets the child, waiting in `gate`, go on."""
    assert child.stdin is not None
    child.stdin.write("\n")
    child.stdin.flush()
