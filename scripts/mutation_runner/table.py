"""Renders the results table of docs/dev/mutation.md from the records, and checks it.

The table sits between the two marker lines below; everything else in the doc is prose kept
by hand. A row comes from a record (records.py) or, for a module with none, from
`docs/dev/mutation/unrecorded.json`: figures of runs from before runs were recorded, whose
module source is unknown, shown as such. A record whose module's source no longer has the
recorded SHA-256 is rendered as stale: its figures are of another source. The rendering
depends on the records and on the modules' current sources only, so a test can hold the doc
to it (tests/unit/mutation_runner/test_mutation_doc.py) and a changed module makes the doc
out of date until it is rendered again (and then shows the row as stale).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from scripts.mutation_runner import records
from scripts.mutation_runner.records import Record

DOC = Path("docs/dev/mutation.md")
UNRECORDED = Path("docs/dev/mutation/unrecorded.json")
BEGIN = "<!-- results: rendered by `scripts/mutation --write-doc` from the records; do not edit -->"
END = "<!-- end of results -->"
Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile: a two-sided 95 % interval


@dataclass(frozen=True)
class Unrecorded:
    """A row of figures from a run that left no record: the cells as they were written."""

    target: str
    module: str
    tests: str
    killed: str
    equivalent: str
    share: str


def wilson(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial share (successes of n), as fractions."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def staleness(root: Path, record: Record) -> str | None:
    """Why `record`'s figures are not of the module as it is now, or None."""
    current = records.source_hash(root / record.module)
    if current is None:
        return "stale: module no longer exists"
    if current != record.sha256:
        return "stale: module changed since the run"
    return None


def _percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def _tests(paths: list[str]) -> str:
    return ", ".join(Path(p).stem for p in paths)


def _run_cell(record: Record, stale: str | None) -> str:
    if record.not_run:
        run = (
            f"partial: {record.ran} of {record.mutants} in source order "
            f"({record.not_run} not run: time budget)"
        )
    elif record.sample == records.FULL:
        run = f"full: {record.mutants}"
    else:
        assert isinstance(record.sample, dict)
        run = f"sample: {record.ran} of {record.mutants} (seed {record.sample['seed']})"
    run += f", operators {record.operators}"
    return f"**{stale}**; {run}" if stale else run


def _share_cell(record: Record) -> str:
    dead = record.killed + record.timed_out
    judged = record.ran - record.equivalent
    if judged == 0:
        return "no non-equivalent mutant"
    text = f"{_percent(dead / judged)} ({dead}/{judged})"
    if record.sample != records.FULL and not record.not_run:
        low, high = wilson(dead, judged)
        text += f"; 95 % interval {_percent(low)} to {_percent(high)}"
    return text


def _recorded_row(root: Path, record: Record) -> str:
    killed = str(record.killed + record.timed_out)
    if record.timed_out:
        killed += f" ({record.timed_out} by timeout)"
    cells = [
        f"`{record.target}`",
        record.module.removeprefix("otelgpu/"),
        _tests(record.tests),
        _run_cell(record, staleness(root, record)),
        killed,
        str(record.equivalent),
        str(record.survived),
        _share_cell(record),
    ]
    return "| " + " | ".join(cells) + " |"


_FIGURE = re.compile(r"(\d+)/(\d+)( sampled)?")
_COUNT = re.compile(r"\d+")


def _unrecorded_row(row: Unrecorded) -> str:
    """The cells as written; where they give `k/n` killed and an equivalent count, the
    survivors not equivalent, and for a sample the 95 % interval of the killed share of its
    non-equivalent mutants."""
    not_killed, share = "", row.share
    figure, equivalent = _FIGURE.match(row.killed), _COUNT.match(row.equivalent)
    if figure and equivalent:
        killed, judged = int(figure[1]), int(figure[2]) - int(equivalent[0])
        if 0 <= killed <= judged:
            not_killed = str(judged - killed)
            if figure[3]:
                low, high = wilson(killed, judged)
                share += f"; 95 % interval {_percent(low)} to {_percent(high)} ({killed}/{judged})"
    cells = [
        f"`{row.target}`",
        row.module.removeprefix("otelgpu/"),
        row.tests,
        "unrecorded (figure from an earlier run, module hash unknown)",
        row.killed,
        row.equivalent,
        not_killed,
        share,
    ]
    return "| " + " | ".join(cells) + " |"


def load_unrecorded(root: Path) -> list[Unrecorded]:
    path = root / UNRECORDED
    if not path.exists():
        return []
    return [Unrecorded(**row) for row in json.loads(path.read_text())]


_HEAD = (
    "| short name | module | tests run per mutant | run (mutants) | killed | equivalent "
    "| not killed | killed of non-equivalent |\n|---|---|---|---|---|---|---|---|"
)


def render_results(root: Path) -> str:
    """The text between the markers: the results table, then each recorded survivor's fate."""
    recorded = records.load_all(root)
    modules = {r.module for r in recorded}
    rows: list[tuple[str, str, str]] = [
        (r.module, r.target, _recorded_row(root, r)) for r in recorded
    ]
    rows += [
        (u.module, u.target, _unrecorded_row(u))
        for u in load_unrecorded(root)
        if u.module not in modules  # a recorded run of the module replaces earlier figures
    ]
    lines = [_HEAD, *(row for _, _, row in sorted(rows))]
    fates = [
        (r.target, s.mutant, f"equivalent: {s.equivalent}" if s.equivalent else "**not killed**")
        for r in recorded
        for s in r.survivors
    ]
    fates += [
        (r.target, mutant, "killed by a test added after the run (a rerun)")
        for r in recorded
        for mutant in r.killed_by_rerun
    ]
    if fates:
        lines += [
            "",
            "Every survivor of the recorded runs and its fate (one not killed and not "
            "equivalent is a gap in the tests):",
            "",
            "| short name | mutant (`line:col: mutation`) | fate |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{t}` | {_code(m)} | {fate.replace('|', chr(92) + '|')} |"
            for t, m, fate in sorted(fates, key=_by_place)
        ]
    return "\n".join(lines)


def _code(text: str) -> str:
    """`text` as a code span in a table cell: `|` escaped (it would end the cell), and a
    longer fence around text that holds a backtick."""
    text = text.replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _by_place(fate: tuple[str, str, str]) -> tuple[str, int, int, str]:
    """Target, then line and column of `line:col: mutation`, then the mutation."""
    target, mutant, _ = fate
    place, _, describe = mutant.partition(": ")
    line, _, col = place.partition(":")
    return target, int(line), int(col), describe


def render_doc(root: Path, doc: str) -> str:
    """`doc` with the text between its markers rendered again."""
    before, begin, rest = doc.partition(BEGIN)
    _, end, after = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{DOC} lacks the marker lines {BEGIN!r} and {END!r}")
    return f"{before}{BEGIN}\n{render_results(root)}\n{END}{after}"


def write(root: Path) -> None:
    path = root / DOC
    path.write_text(render_doc(root, path.read_text()))


def stale(root: Path) -> list[tuple[Record, str]]:
    """The records whose module is not the source they ran on, with why."""
    out = []
    for record in records.load_all(root):
        if (why := staleness(root, record)) is not None:
            out.append((record, why))
    return out


def check(root: Path) -> int:
    """Prints the stale records and whether the doc is as rendered; 1 if anything is off."""
    problems = 0
    for record, why in stale(root):
        current = records.source_hash(root / record.module) or "none"
        print(
            f"{record.target}: {record.module}: {why} "
            f"(recorded {record.sha256[:12]}, now {current[:12]}): run it again with --record"
        )
        problems += 1
    doc = (root / DOC).read_text()
    if render_doc(root, doc) != doc:
        print(f"{DOC} is not as the records render it: run scripts/mutation --write-doc")
        problems += 1
    if not problems:
        print("every record is of its module's current source, and the doc renders them")
    return 1 if problems else 0
