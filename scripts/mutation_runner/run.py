"""Runs mutants of otelgpu's core modules against the tests that cover them.

For each module (targets.py): list every mutation (operators.py), sample at most
`--max-mutants` of them with `--seed`, and for each one write the mutated module into a
temporary copy of the repository (the worktree is never touched), then run that module's test
files there with `pytest -x -q -p no:cacheprovider` under a per-mutant timeout. A failing run
kills the mutant; a passing one lets it survive. Modules run one at a time, mutants one at a
time (the tests are the slow part, and the machine is shared); `--time-budget` stops the run.
`--record` writes each module's outcome to its record (records.py); `--write-doc` renders
docs/dev/mutation.md's table from the records, `--check` lists the records whose module
changed since their run.

Usage: scripts/mutation [MODULE ...] [--max-mutants N] [--time-budget S] [--seed N] [--record]
       scripts/mutation --write-doc | --check
See docs/dev/mutation.md.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.mutation_runner import records, table
from scripts.mutation_runner.operators import VERSION, mutate, sites
from scripts.mutation_runner.records import Record, Survivor
from scripts.mutation_runner.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
_COPIED = ("otelgpu", "tests")  # copied (mutated / collected); everything else is linked


@dataclass(frozen=True)
class Mutant:
    site: int
    choice: int
    line: int
    col: int
    describe: str

    @property
    def name(self) -> str:
        """How a record names it: `line:col: mutation`."""
        return f"{self.line}:{self.col}: {self.describe}"


@dataclass
class Outcome:
    module: str
    sha256: str
    tests: list[str]
    mutants: int  # all of the module's mutants
    chosen: list[Mutant] = field(default_factory=list)  # those this run was to run
    killed: int = 0
    survived: list[Mutant] = field(default_factory=list)
    timeouts: list[Mutant] = field(default_factory=list)
    not_run: int = 0

    @property
    def total(self) -> int:
        return self.killed + len(self.survived) + len(self.timeouts)


def all_mutants(source: str) -> list[Mutant]:
    return [
        Mutant(site.index, choice, site.line, site.col, mutation.describe)
        for site in sites(ast.parse(source))
        for choice, mutation in enumerate(site.mutations)
    ]


def sample(mutants: list[Mutant], limit: int | None, seed: int) -> list[Mutant]:
    """At most `limit` mutants, the same ones for the same seed, in source order."""
    if limit is None or len(mutants) <= limit:
        return mutants
    chosen = random.Random(seed).sample(range(len(mutants)), limit)
    return [mutants[i] for i in sorted(chosen)]


def make_sandbox() -> Path:
    """A temporary copy of the repository: `otelgpu/` and `tests/` copied, the rest linked
    (the tests in targets.py only read it)."""
    sandbox = Path(tempfile.mkdtemp(prefix="otelgpu-mutation-"))
    for entry in ROOT.iterdir():
        if entry.name.startswith("."):  # .git, caches (hypothesis keeps its examples there)
            continue
        if entry.name in _COPIED:
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(entry, sandbox / entry.name, ignore=ignore)
        else:
            (sandbox / entry.name).symlink_to(entry)
    return sandbox


def preload() -> None:
    """Imports pytest, its plugins and the third-party libraries once, in this process: every
    mutant's run is a fork of it, so only otelgpu (from the sandbox) and the tests are
    imported per mutant. otelgpu itself is never imported here."""
    import importlib

    for name in ("pytest", "pytest_asyncio", "hypothesis", "pydantic", "yaml", "grpc"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def run_tests(sandbox: Path, tests: list[str], timeout: float) -> str:
    """'passed', 'failed' or 'timeout' for one run of `tests` in the sandbox (a forked child
    runs pytest; its output is discarded)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(sandbox, tests)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)  # the child and anything it started
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)
    code = os.waitstatus_to_exitcode(status)
    if code == 5:  # nothing collected: the mapping is wrong, not the mutant
        raise SystemExit(f"no tests collected from {tests}")
    return "passed" if code == 0 else "failed"


def _child(sandbox: Path, tests: list[str]) -> None:
    code = 3
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.chdir(sandbox)
        # The sandbox, not the worktree, is where otelgpu and tests are imported from (here and
        # in any `python -m otelgpu` a test starts).
        sys.path[:] = [str(sandbox)] + [p for p in sys.path if p not in ("", str(ROOT))]
        os.environ["PYTHONPATH"] = str(sandbox)
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        sys.dont_write_bytecode = True
        import pytest

        code = int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", *tests]))
    finally:
        os._exit(code)


def run_module(name: str, args: argparse.Namespace, deadline: float) -> Outcome | None:
    module, tests = TARGETS[name]
    tests = [t for t in [*tests, *args.also_test] if (ROOT / t).exists()]
    if not (ROOT / module).exists():  # moved or removed: targets.py needs updating
        print(f"{name}: {module} does not exist; skipped", flush=True)
        return None
    source = (ROOT / module).read_text()
    every = all_mutants(source)
    if args.rerun is not None:  # by name: the sample that first chose them does not matter
        mutants = [m for m in every if _where(module, m) in args.rerun]
    else:
        mutants = sample(every, args.max_mutants, args.seed)
    sandbox = make_sandbox()
    target = sandbox / module
    target.unlink()  # a fresh file, so the linked/copied original is never written through
    try:
        target.write_text(source)
        started = time.monotonic()
        if run_tests(sandbox, tests, timeout=600) != "passed":
            print(f"{name}: the tests fail on the unmutated module; skipped", flush=True)
            return None
        timeout = max(args.timeout, 5 * (time.monotonic() - started))
        print(f"== {name}: {len(mutants)} mutants, tests: {' '.join(tests)}", flush=True)
        digest = records.source_hash(ROOT / module) or ""
        outcome = Outcome(module, digest, tests, len(every), mutants)
        for n, mutant in enumerate(mutants):
            if time.monotonic() > deadline:
                outcome.not_run = len(mutants) - n
                break
            target.write_text(mutate(source, mutant.site, mutant.choice))
            result = run_tests(sandbox, tests, timeout)
            if result == "failed":
                outcome.killed += 1
            elif result == "passed":
                outcome.survived.append(mutant)
            else:
                outcome.timeouts.append(mutant)
            if args.verbose:
                print(f"  {result:8} {module}:{mutant.line}: {mutant.describe}", flush=True)
        return outcome
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)


def _where(module: str, mutant: Mutant) -> str:
    return f"{module}:{mutant.line}:{mutant.col}: {mutant.describe}"


def survivors_of(log: Path) -> set[str]:
    """The mutants a previous run's output lists as survived (a timeout is a kill: not rerun),
    or, for a record (`.json`), its survivors that are not equivalent."""
    if log.suffix == ".json":
        record = records.from_json(log.read_text())
        return {f"{record.module}:{s.mutant}" for s in record.survivors if s.equivalent is None}
    found = set()
    for line in log.read_text().splitlines():
        kind, _, where = line.strip().partition(" ")
        if kind == "survived":
            found.add(where.strip())
    return found


def record(name: str, outcome: Outcome, args: argparse.Namespace) -> Path:
    """Writes the module's record: a new one for a run, the old one updated for a rerun."""
    run = Record(
        target=name,
        module=outcome.module,
        sha256=outcome.sha256,
        operators=VERSION,
        tests=outcome.tests,
        mutants=outcome.mutants,
        sample=(
            records.FULL
            if args.max_mutants is None or args.max_mutants >= outcome.mutants
            else {"size": args.max_mutants, "seed": args.seed}
        ),
        killed=outcome.killed,
        timed_out=len(outcome.timeouts),
        not_run=outcome.not_run,
        survivors=[Survivor(m.name) for m in outcome.survived],
        timeouts=[m.name for m in outcome.timeouts],
    )
    old = records.load(ROOT, name)
    if args.rerun is not None:
        if old is None:
            raise SystemExit(f"{name}: no record to update with a rerun; run it with --record")
        ran = {m.name for m in outcome.chosen[: len(outcome.chosen) - outcome.not_run]}
        run = records.merge_rerun(old, run, ran)
    else:
        run = records.keep_reasons(run, old)
    return records.save(ROOT, run)


def report(name: str, outcome: Outcome) -> None:
    module = TARGETS[name][0]
    dead = outcome.killed + len(outcome.timeouts)  # a timeout is a mutant the tests noticed
    share = 100.0 * dead / outcome.total if outcome.total else 100.0
    print(
        f"{name}: killed {outcome.killed}, timeouts {len(outcome.timeouts)}, "
        f"survived {len(outcome.survived)} of {outcome.total} ({share:.1f} % killed)"
        + (f", {outcome.not_run} not run (time budget)" if outcome.not_run else ""),
        flush=True,
    )
    for mutant in outcome.survived:
        print(f"  survived {_where(module, mutant)}", flush=True)
    for mutant in outcome.timeouts:
        print(f"  timeout  {_where(module, mutant)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help=f"default: all of {', '.join(TARGETS)}")
    parser.add_argument("--max-mutants", type=int, default=None, help="per module (sampled)")
    parser.add_argument("--time-budget", type=float, default=1800.0, help="seconds, whole run")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--timeout", type=float, default=30.0, help="per mutant, at least")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument(
        "--rerun",
        type=lambda path: survivors_of(Path(path)),
        metavar="LOG",
        help="run only the mutants a previous run's output (LOG) lists as survivors",
    )
    parser.add_argument(
        "--also-test",
        action="append",
        default=[],
        metavar="FILE",
        help="a test file to run after the module's own (targets.py), e.g. one just written "
        "to kill survivors before targets.py lists it; repeatable",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"write each module's outcome to {records.RECORDS}/<module>.json",
    )
    parser.add_argument(
        "--write-doc", action="store_true", help=f"render {table.DOC}'s table from the records"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="list the records whose module changed since their run, and whether the doc is "
        "as the records render it (exit 1 if either)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every mutant")
    args = parser.parse_args(argv)
    if args.write_doc:
        table.write(ROOT)
        print(f"wrote {table.DOC}")
        return 0
    if args.check:
        return table.check(ROOT)
    names = args.modules or list(TARGETS)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    if args.list:
        for name in names:
            module = TARGETS[name][0]
            if not (ROOT / module).exists():
                print(f"{name}: {module} does not exist", file=sys.stderr)
                continue
            for m in sample(all_mutants((ROOT / module).read_text()), args.max_mutants, args.seed):
                print(f"{module}:{m.line}:{m.col}: {m.describe}")
        return 0
    preload()
    deadline = time.monotonic() + args.time_budget
    totals = [0, 0]
    for name in names:
        outcome = run_module(name, args, deadline)
        if outcome is not None:
            report(name, outcome)
            if args.record:
                print(f"{name}: recorded in {record(name, outcome, args).relative_to(ROOT)}")
            totals[0] += outcome.killed + len(outcome.timeouts)
            totals[1] += outcome.total
    if totals[1]:
        print(f"all: {totals[0]} of {totals[1]} killed ({100.0 * totals[0] / totals[1]:.1f} %)")
    return 0
