"""YAML merge keys and alias uses: what is merged, what is refused, and where the limit lies."""

from __future__ import annotations

from otelgpu.config.loader import load
from otelgpu.config.walker import MAX_ALIAS_USES

MERGE_HELP = (
    "receivers::nvml: the merge key << takes a mapping or a list of mappings, "
    "such as *defaults or [*a, *b]"
)


def _load(text: str) -> tuple[dict[str, object], list[str]]:
    raw = load([("f.yaml", text)], environ={})
    return raw.data, [str(i) for i in raw.issues]


def test_a_merge_key_with_a_plain_value_is_refused_at_that_value() -> None:
    data, issues = _load("receivers:\n  nvml:\n    <<: 5\n    backend: simulated\n")
    assert issues == [f"f.yaml:3:9: {MERGE_HELP}"]
    assert data["receivers"] == {"nvml": {"backend": "simulated"}}


def test_a_list_inside_a_merge_list_is_refused_and_not_merged() -> None:
    text = "base: &b {processes: true}\nreceivers:\n  nvml:\n    <<: [[*b]]\n"
    data, issues = _load(text)
    assert issues == [f"f.yaml:4:10: {MERGE_HELP}"]
    assert data["receivers"] == {"nvml": {}}


def test_exactly_the_limit_of_alias_uses_is_accepted() -> None:
    uses = ", ".join(["*a"] * MAX_ALIAS_USES)
    data, issues = _load(f"receivers:\n  nvml:\n    host_proc: &a /proc\n    devices: [{uses}]\n")
    assert issues == []
    assert data["receivers"]["nvml"]["devices"] == ["/proc"] * MAX_ALIAS_USES  # type: ignore[index]
