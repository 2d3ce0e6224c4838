"""The bad-config suite: every file under testdata/bad ends with the exact errors it must give."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from tests.components import core_registry

CASES = sorted((Path(__file__).parent / "testdata" / "bad").glob("*.yaml"))


def test_the_suite_is_large_enough() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_bad_config_reports_exact_errors(case: Path) -> None:
    text = case.read_text()
    expected = [
        line.removeprefix("# expect: ")
        for line in text.splitlines()
        if line.startswith("# expect: ")
    ]
    assert expected, f"{case.name} declares no expected error"
    with pytest.raises(ConfigError) as info:
        validate(load([(case.name, text)], environ={}), core_registry())
    assert str(info.value).splitlines() == expected
    for issue in info.value.issues:  # every error is located: file, line, column
        assert issue.file == case.name and issue.line >= 1 and issue.column >= 1
