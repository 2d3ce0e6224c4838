"""The good-config suite: YAML features that must work (merge keys, aliases, explicit tags).

Each file under testdata/good ends with `# expect <component id>: <JSON>` lines: the effective
options of that `sample` receiver, as print-config would show them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otelgpu.component.component import ComponentID, Kind
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from tests.components import core_registry

CASES = sorted((Path(__file__).parent / "testdata" / "good").glob("*.yaml"))


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_good_config_gives_the_expected_options(case: Path) -> None:
    text = case.read_text()
    expected = {
        cid: json.loads(value)
        for cid, _, value in (
            line.removeprefix("# expect ").partition(": ")
            for line in text.splitlines()
            if line.startswith("# expect ")
        )
    }
    assert expected, f"{case.name} declares no expected options"
    config = validate(load([(case.name, text)], environ={}), core_registry())
    receivers = config.components[Kind.RECEIVER]
    for cid, options in expected.items():
        assert receivers[ComponentID.parse(cid)].model_dump(mode="json") == options, cid
