"""Mutation records: tied to the module's source, reruns counted in, equivalence reasons kept,
and the doc's table rendered from them (stale rows marked, samples with their interval)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.mutation_runner import records, table
from scripts.mutation_runner.records import Record, Survivor

MODULE = "otelgpu/guard.py"


def record(tmp: Path, **changes: object) -> Record:
    fields: dict[str, object] = {
        "target": "guard",
        "module": MODULE,
        "sha256": records.source_hash(tmp / MODULE),
        "operators": 2,
        "tests": ["tests/unit/test_guard.py"],
        "mutants": 10,
        "sample": records.FULL,
        "killed": 7,
        "timed_out": 1,
        "survivors": [Survivor("3:4: 64 -> 65"), Survivor("5:8: < -> <=", "a cache size")],
        "timeouts": ["9:0: statement deleted"],
    }
    return Record(**(fields | changes))  # type: ignore[arg-type]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "otelgpu").mkdir()
    (tmp_path / MODULE).write_text("LIMIT = 64\n")
    (tmp_path / table.DOC).parent.mkdir(parents=True)
    (tmp_path / table.DOC).write_text(
        f"# Prose\n\n{table.BEGIN}\nold\n{table.END}\n\nMore prose.\n"
    )
    return tmp_path


def test_a_record_round_trips_through_its_json(repo: Path) -> None:
    original = record(repo)
    records.save(repo, original)
    assert records.load(repo, "guard") == original
    saved = json.loads((repo / "docs/dev/mutation/records/guard.json").read_text())
    assert saved["sha256"] == records.source_hash(repo / MODULE)
    assert saved["sample"] == "full"
    assert set(saved) == {  # what the run was of and what it found; no date
        "target", "module", "sha256", "operators", "tests", "mutants", "sample", "killed",
        "timed_out", "not_run", "survivors", "timeouts", "killed_by_rerun",
    }  # fmt: skip


def test_counts_separate_equivalent_survivors_from_gaps(repo: Path) -> None:
    r = record(repo)
    assert (r.ran, r.equivalent, r.survived) == (10, 1, 1)


def test_a_rerun_moves_the_survivors_it_killed_into_the_counts(repo: Path) -> None:
    old = record(repo, survivors=[Survivor("1:0: a"), Survivor("2:0: b"), Survivor("3:0: c")])
    rerun = record(
        repo,
        tests=["tests/unit/test_guard.py", "tests/unit/test_guard_bounds.py"],
        killed=1,
        timed_out=1,
        survivors=[Survivor("3:0: c")],
        timeouts=["2:0: b"],
    )
    merged = records.merge_rerun(old, rerun, ran={"1:0: a", "2:0: b", "3:0: c"})
    assert (merged.killed, merged.timed_out) == (8, 2)
    assert [s.mutant for s in merged.survivors] == ["3:0: c"]
    assert merged.timeouts == ["9:0: statement deleted", "2:0: b"]
    assert merged.tests[-1] == "tests/unit/test_guard_bounds.py"
    assert merged.killed_by_rerun == ["1:0: a", "2:0: b"]
    assert merged.ran == old.ran


def test_a_rerun_leaves_the_survivors_it_did_not_run(repo: Path) -> None:
    old = record(repo)
    rerun = record(repo, killed=0, timed_out=0, survivors=[], timeouts=[])
    merged = records.merge_rerun(old, rerun, ran=set())
    assert merged.survivors == old.survivors and merged.killed == old.killed


def test_a_rerun_of_a_changed_module_is_refused(repo: Path) -> None:
    old = record(repo)
    (repo / MODULE).write_text("LIMIT = 65\n")
    with pytest.raises(ValueError, match="source or the operator set changed"):
        records.merge_rerun(old, record(repo), ran=set())


def test_equivalence_reasons_are_kept_only_for_the_same_source(repo: Path) -> None:
    old = record(repo)
    new = record(repo, survivors=[Survivor("5:8: < -> <=")])
    assert records.keep_reasons(new, old).survivors[0].equivalent == "a cache size"
    other = record(repo, sha256="0" * 64, survivors=[Survivor("5:8: < -> <=")])
    assert records.keep_reasons(other, old).survivors[0].equivalent is None


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [  # values of the Wilson score interval at 95 %
        (30, 30, 0.8865, 1.0),
        (29, 30, 0.8333, 0.9941),
        (69, 76, 0.8219, 0.9547),
        (0, 10, 0.0, 0.2775),
    ],
)
def test_the_wilson_interval(k: int, n: int, low: float, high: float) -> None:
    got = table.wilson(k, n)
    assert got == (pytest.approx(low, abs=5e-5), pytest.approx(high, abs=5e-5))


def rendered_rows(repo: Path) -> dict[str, str]:
    """The results table's rows (not the survivors' table after it), by short name."""
    results = table.render_results(repo).split("\n\n")[0]
    return {line.split(" | ")[0]: line for line in results.splitlines() if line.startswith("| `")}


def test_a_full_run_is_shown_as_full_without_an_interval(repo: Path) -> None:
    records.save(repo, record(repo))
    row = rendered_rows(repo)["| `guard`"]
    assert "full: 10, operators 2" in row
    assert "| 8 (1 by timeout) | 1 | 1 | 88.9 % (8/9) |" in row
    assert "interval" not in row and "stale" not in row


def test_a_sample_is_shown_with_its_interval(repo: Path) -> None:
    records.save(repo, record(repo, mutants=300, sample={"size": 10, "seed": 14}))
    row = rendered_rows(repo)["| `guard`"]
    assert "sample: 10 of 300 (seed 14), operators 2" in row
    low, high = table.wilson(8, 9)
    assert f"88.9 % (8/9); 95 % interval {100 * low:.1f} % to {100 * high:.1f} %" in row


def test_a_run_cut_short_is_partial(repo: Path) -> None:
    records.save(repo, record(repo, mutants=30, not_run=20))
    row = rendered_rows(repo)["| `guard`"]
    assert "partial: 10 of 30 in source order (20 not run: time budget)" in row


def test_a_changed_module_makes_its_row_stale_and_the_check_fail(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records.save(repo, record(repo))
    table.write(repo)
    assert table.check(repo) == 0
    (repo / MODULE).write_text("LIMIT = 65\n")
    assert "**stale: module changed since the run**" in rendered_rows(repo)["| `guard`"]
    assert table.check(repo) == 1
    out = capsys.readouterr().out
    assert "guard: otelgpu/guard.py: stale: module changed since the run" in out
    assert "is not as the records render it" in out
    table.write(repo)  # the doc then shows the row as stale; the record still needs a run
    assert table.check(repo) == 1
    out = capsys.readouterr().out
    assert "stale: module changed since the run" in out
    assert "is not as the records render it" not in out


def test_a_removed_module_makes_its_row_stale(repo: Path) -> None:
    records.save(repo, record(repo))
    (repo / MODULE).unlink()
    assert "**stale: module no longer exists**" in rendered_rows(repo)["| `guard`"]


def test_unrecorded_rows_say_so_and_give_way_to_a_record(repo: Path) -> None:
    rows = [
        {
            "target": name,
            "module": module,
            "tests": "test_x",
            "killed": "29/30 sampled of 90 (96.7 %)",
            "equivalent": "1",
            "share": "100 %",
        }
        for name, module in (("old_guard", MODULE), ("other", "otelgpu/other.py"))
    ]
    (repo / table.UNRECORDED).parent.mkdir(parents=True)
    (repo / table.UNRECORDED).write_text(json.dumps(rows))
    found = rendered_rows(repo)
    assert "unrecorded (figure from an earlier run, module hash unknown)" in found["| `other`"]
    low, high = table.wilson(29, 29)  # the sample's 30 less its one equivalent mutant
    assert found["| `other`"].endswith(
        f"| 29/30 sampled of 90 (96.7 %) | 1 | 0 | 100 %; 95 % interval {100 * low:.1f} % to "
        f"{100 * high:.1f} % (29/29) |"
    )
    records.save(repo, record(repo))
    found = rendered_rows(repo)
    assert "| `old_guard`" not in found  # the module's recorded run replaces its old figure
    assert "| `guard`" in found and "| `other`" in found


def test_each_recorded_survivor_is_listed_with_its_fate(repo: Path) -> None:
    records.save(repo, record(repo))
    text = table.render_results(repo)
    assert "| `guard` | `3:4: 64 -> 65` | **not killed** |" in text
    assert "| `guard` | `5:8: < -> <=` | equivalent: a cache size |" in text
    records.save(repo, record(repo, killed_by_rerun=["1:0: c"]))
    text = table.render_results(repo)
    assert text.endswith(
        "| `guard` | `1:0: c` | killed by a test added after the run (a rerun) |\n"
        "| `guard` | `3:4: 64 -> 65` | **not killed** |\n"
        "| `guard` | `5:8: < -> <=` | equivalent: a cache size |"
    )


def test_write_replaces_only_the_text_between_the_markers(repo: Path) -> None:
    records.save(repo, record(repo))
    table.write(repo)
    doc = (repo / table.DOC).read_text()
    assert doc.startswith(f"# Prose\n\n{table.BEGIN}\n| short name |")
    assert doc.endswith(f"{table.END}\n\nMore prose.\n")
    assert "\nold\n" not in doc


def test_a_doc_without_markers_is_refused(repo: Path) -> None:
    with pytest.raises(ValueError, match="lacks the marker lines"):
        table.render_doc(repo, "# no table here\n")


def test_an_unrecorded_full_figure_gets_no_interval_and_free_text_is_kept(repo: Path) -> None:
    rows = [
        {"target": "full", "module": MODULE, "tests": "t", "killed": "161/165 (97.6 %)",
         "equivalent": "4", "share": "100 %"},
        {"target": "prose", "module": "otelgpu/b.py", "tests": "t", "killed": "see below",
         "equivalent": "some", "share": "n/a"},
    ]  # fmt: skip
    (repo / table.UNRECORDED).parent.mkdir(parents=True)
    (repo / table.UNRECORDED).write_text(json.dumps(rows))
    found = rendered_rows(repo)
    assert found["| `full`"].endswith("| 161/165 (97.6 %) | 4 | 0 | 100 % |")
    assert found["| `prose`"].endswith("| see below | some |  | n/a |")


def test_a_mutant_with_a_pipe_or_a_backtick_keeps_the_table_whole(repo: Path) -> None:
    survivors = [Survivor("1:0: | -> &"), Survivor("2:0: '[`|]' -> ''", "a | b")]
    records.save(repo, record(repo, survivors=survivors))
    text = table.render_results(repo)
    assert "| `guard` | `1:0: \\| -> &` | **not killed** |" in text
    assert "| `guard` | `` 2:0: '[`\\|]' -> '' `` | equivalent: a \\| b |" in text
