"""Key rules at their edges: `refusal` takes a key as named unless told otherwise, a key only
a glob matched is held to the plain-value rule, and a selector keeps the section it was built
for, so refusals are counted under it."""

from __future__ import annotations

import logging

from otelgpu.component.telemetry import SelfTelemetry
from otelgpu.processors.container_env.audit import REFUSED, Audit
from otelgpu.processors.container_env.keys import refusal
from otelgpu.processors.container_env.records import Selectors, extract
from otelgpu.processors.container_env.runtime import ContainerRef, ContainerSpec
from tests.unit.processors.container_env.helpers import counter
from tests.unit.processors.container_env.test_keys import _selector
from tests.unit.processors.container_env.test_source import _selector as _section_selector

UNSAFE = "a=b"  # no credential, but not plainly safe: only a named key may export it


def test_refusal_takes_a_key_as_named_unless_told_it_was_only_a_glob_match() -> None:
    assert refusal("SETTING", UNSAFE) is None
    assert refusal("SETTING", UNSAFE, named=True) is None
    assert refusal("SETTING", UNSAFE, named=False) == "glob_unsafe_characters"


def test_a_key_only_a_glob_matched_is_held_to_the_plain_value_rule() -> None:
    got = _selector(["MLFLOW_RUN_ID", "MLFLOW_*"]).select(
        [("MLFLOW_RUN_ID", UNSAFE), ("MLFLOW_EXPERIMENT", UNSAFE), ("MLFLOW_USER", "alice")]
    )
    assert got.values == {"MLFLOW_RUN_ID": UNSAFE, "MLFLOW_USER": "alice"}
    assert got.refused == ["MLFLOW_EXPERIMENT"]
    assert [getattr(k, "reason", None) for k in got.refused] == ["glob_unsafe_characters"]


def test_a_selector_keeps_its_section_and_refusals_are_counted_under_it() -> None:
    selectors = Selectors(
        env=_section_selector("env", "HF_TOKEN"),
        labels=_section_selector("labels", "team"),
        pod_labels=_section_selector("pod_labels", "api_token"),
        annotations=_section_selector("annotations", "example.com/owner"),
    )
    assert [s.section for s in (selectors.env, selectors.pod_labels)] == ["env", "pod_labels"]
    telemetry = SelfTelemetry()
    audit = Audit("container_env", telemetry, logging.getLogger("test.keys"))
    sandbox = ContainerRef(
        id="s",
        labels={"io.cri-containerd.kind": "sandbox", "api_token": "t"},
        revision="1",
        running=True,
    )
    workload = ContainerRef(
        id="w", labels={"io.cri-containerd.kind": "container"}, revision="1", running=True
    )
    extract(sandbox, ContainerSpec(), selectors, audit)
    extract(workload, ContainerSpec(env=("HF_TOKEN=hf_x",)), selectors, audit)
    assert counter(telemetry, REFUSED, section="pod_labels", reason="secret_key") == 1
    assert counter(telemetry, REFUSED, section="env", reason="secret_key") == 1
    assert counter(telemetry, REFUSED) == 2
