"""docs/dev/mutation.md's results are what the records and the modules' current sources render:
a changed module (or record) fails this until the doc is rendered again, which then marks the
module's row stale. No mutant is run here."""

from __future__ import annotations

from pathlib import Path

from scripts.mutation_runner import records, table

ROOT = Path(__file__).resolve().parents[3]


def test_the_doc_shows_what_the_records_render() -> None:
    doc = (ROOT / table.DOC).read_text()
    assert table.render_doc(ROOT, doc) == doc, (
        "docs/dev/mutation.md is not as its records render it: run scripts/mutation "
        "--write-doc (a row whose module changed is then marked stale; scripts/mutation "
        "--check lists them)"
    )


def test_every_record_names_a_module_and_its_tests() -> None:
    for record in records.load_all(ROOT):
        assert record.module.startswith("otelgpu/"), record.target
        assert record.tests, record.target
        assert len(record.sha256) == 64, record.target
