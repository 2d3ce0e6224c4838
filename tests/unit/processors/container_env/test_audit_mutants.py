"""The audit's log of refused keys at its edges: the text for a whole-object spec annotation,
where a long key name is cut, and the bound on how many distinct names are ever logged."""

from __future__ import annotations

import logging

import pytest

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.audit import REFUSED, Audit
from otelgpu.processors.container_env.keys import KeySelector
from tests.unit.processors.container_env.helpers import counter

LOGGER = "test.audit.edges"


def _audit(telemetry: SelfTelemetry | None = None) -> Audit:
    return Audit("container_env", telemetry or SelfTelemetry(), logging.getLogger(LOGGER))


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_a_refused_spec_annotation_is_logged_as_carrying_a_whole_object_spec(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    selector = KeySelector(
        "annotations", KeyFilter(include=["*"]), allow_secret_like_keys=False, max_value_length=256
    )
    key = "kubectl.kubernetes.io/last-applied-configuration"
    got = selector.select([(key, '{"kind": "Pod"}')])
    _audit().refused("annotations", got.refused)
    assert _lines(caplog) == [
        f"not exporting annotations key '{key}': "
        "it carries a whole object spec, env values included"
    ]


def test_a_key_name_of_200_characters_is_logged_whole(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    _audit().refused("env", ["K" * 200])
    (line,) = _lines(caplog)
    assert f"'{'K' * 200}':" in line
    assert "..." not in line


def test_a_key_name_of_201_characters_is_logged_cut_to_200_and_marked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    _audit().refused("env", ["K" * 201])
    (line,) = _lines(caplog)
    assert f"'{'K' * 200}...':" in line
    assert "K" * 201 not in line


def test_past_1024_distinct_names_one_warning_says_names_are_no_longer_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    telemetry = SelfTelemetry()
    audit = _audit(telemetry)
    audit.refused("env", [f"KEY_{i:04d}" for i in range(1024)])
    assert len(_lines(caplog)) == 1024  # every name so far, once each
    audit.refused("env", [f"KEY_{i:04d}" for i in range(1024, 1030)])
    audit.refused("labels", ["ANOTHER_ONE"])
    lines = _lines(caplog)
    names = [line for line in lines if line.startswith("not exporting")]
    overflow = [line for line in lines if line.startswith("more than")]
    assert len(names) == 1024
    assert not any("KEY_1024" in line or "ANOTHER_ONE" in line for line in lines)
    assert overflow == ["more than 1024 distinct keys refused; no longer logging their names"]
    # the counter keeps going after the log stops
    assert counter(telemetry, REFUSED, section="env", reason="secret_key") == 1030
    assert counter(telemetry, REFUSED, section="labels", reason="secret_key") == 1
