"""The record of a module's mutation run: what ran, against which source, and each survivor's fate.

One JSON file per target in `docs/dev/mutation/records/`, written by `scripts/mutation
--record`. A record ties its figures to the module's source by its SHA-256 (a changed module
makes the record stale) and to the operator set by `operators.VERSION` (the same source gives
the same mutants only under the same set). It holds no date: the figures are of that source,
whenever they were measured.

A survivor's `equivalent` is the reason no input can tell it from the original, written by
hand into the record; a later run of the same source (a rerun, or a whole run again) keeps it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RECORDS = Path("docs/dev/mutation/records")  # relative to the repository root

FULL = "full"


@dataclass
class Survivor:
    mutant: str  # "line:col: mutation", as `--list` and the run's output name it
    equivalent: str | None = None  # why no input tells it apart (None: a gap in the tests)


@dataclass
class Record:
    target: str
    module: str
    sha256: str
    operators: int
    tests: list[str]
    mutants: int  # every mutant of the module under this operator set
    sample: str | dict[str, int]  # "full", or {"size": N, "seed": S}
    killed: int = 0  # a test failed
    timed_out: int = 0  # counted as killed: a test noticed (it waited for what never came)
    not_run: int = 0  # left when the time budget ran out
    survivors: list[Survivor] = field(default_factory=list)
    timeouts: list[str] = field(default_factory=list)
    # survivors of the run that a rerun with tests added later killed (counted in `killed`
    # or `timed_out`): the gaps the run found and the tests closed
    killed_by_rerun: list[str] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.killed + self.timed_out + len(self.survivors)

    @property
    def equivalent(self) -> int:
        return sum(s.equivalent is not None for s in self.survivors)

    @property
    def survived(self) -> int:
        """Survivors that are not equivalent: gaps in the tests."""
        return len(self.survivors) - self.equivalent

    @property
    def is_full(self) -> bool:
        return self.sample == FULL and self.not_run == 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"


def from_json(text: str) -> Record:
    data: dict[str, Any] = json.loads(text)
    data["survivors"] = [Survivor(**s) for s in data["survivors"]]
    return Record(**data)


def source_hash(path: Path) -> str | None:
    """The SHA-256 of a module's source, or None when the module does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def path_of(root: Path, target: str) -> Path:
    return root / RECORDS / f"{target}.json"


def load(root: Path, target: str) -> Record | None:
    path = path_of(root, target)
    return from_json(path.read_text()) if path.exists() else None


def load_all(root: Path) -> list[Record]:
    return [from_json(p.read_text()) for p in sorted((root / RECORDS).glob("*.json"))]


def save(root: Path, record: Record) -> Path:
    path = path_of(root, record.target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record.to_json())
    return path


def keep_reasons(new: Record, old: Record | None) -> Record:
    """`new` with the equivalence reasons `old` gave its survivors, when both ran on the same
    source and operator set (a reason is about that source's mutant, never another's)."""
    if old is None or (old.module, old.sha256, old.operators) != (
        new.module,
        new.sha256,
        new.operators,
    ):
        return new
    reasons = {s.mutant: s.equivalent for s in old.survivors if s.equivalent is not None}
    for survivor in new.survivors:
        survivor.equivalent = survivor.equivalent or reasons.get(survivor.mutant)
    return new


def merge_rerun(old: Record, rerun: Record, ran: set[str]) -> Record:
    """`old` after the survivors named in `ran` ran again (new tests, same source), with the
    outcome in `rerun`: those killed or timed out now count as such; the rest stay survivors
    with their reasons. The tests become the rerun's (tests are added to kill survivors)."""
    if (old.module, old.sha256, old.operators) != (rerun.module, rerun.sha256, rerun.operators):
        raise ValueError(
            f"{old.target}: the rerun is not of the recorded mutants (the module's source or "
            "the operator set changed since the run): run the module again"
        )
    still = {s.mutant for s in rerun.survivors}
    gone = [s.mutant for s in old.survivors if s.mutant in ran and s.mutant not in still]
    timed = [m for m in gone if m in rerun.timeouts]
    return Record(
        target=old.target,
        module=old.module,
        sha256=old.sha256,
        operators=old.operators,
        tests=rerun.tests,
        mutants=old.mutants,
        sample=old.sample,
        killed=old.killed + len(gone) - len(timed),
        timed_out=old.timed_out + len(timed),
        not_run=old.not_run,
        survivors=[s for s in old.survivors if s.mutant not in gone],
        timeouts=[*old.timeouts, *timed],
        killed_by_rerun=[*old.killed_by_rerun, *gone],
    )
