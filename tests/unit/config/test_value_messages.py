"""What validate says about a value of the wrong shape: where it is, and what was expected."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field, ValidationError

from otelgpu.component.errors import ConfigError, Issue
from otelgpu.config import load_config
from otelgpu.config.messages import describe, issues_from
from otelgpu.config.positions import Mark, Positions
from otelgpu.config.types import Duration, Size, StrictModel
from otelgpu.service.builtins import builtin_registry
from tests.unit.config.pipelines import AFTER_RECEIVERS


def _issues(tmp_path: Path, receivers: str) -> list[Issue]:
    path = tmp_path / "agent.yaml"
    path.write_text(receivers + AFTER_RECEIVERS)
    with pytest.raises(ConfigError) as info:
        load_config([str(path)], builtin_registry())
    return list(info.value.issues)


def test_an_unknown_backend_is_answered_with_the_backends_by_name(tmp_path: Path) -> None:
    issues = _issues(tmp_path, "receivers:\n  nvml: {backend: cuda}\n")
    assert [str(i) for i in issues] == [
        f"{tmp_path / 'agent.yaml'}:2:19: receivers::nvml::backend: "
        'must be one of: auto, nvml, simulated, replay (got "cuda")'
    ]


def test_an_empty_metric_groups_list_says_that_one_group_is_needed(tmp_path: Path) -> None:
    text = "receivers:\n  nvml:\n  kubelet_stats: {metric_groups: []}\n"
    messages = {i.path: i.message for i in _issues(tmp_path, text)}
    # pydantic's own text, lower-cased to read as the rest of the line
    assert messages[("receivers", "kubelet_stats", "metric_groups")] == (
        "list should have at least 1 item after validation, not 0"
    )


def test_a_list_inside_the_devices_list_is_refused_at_that_item(tmp_path: Path) -> None:
    issues = _issues(tmp_path, "receivers:\n  nvml:\n    devices: [[1]]\n")
    assert issues
    for issue in issues:
        assert (issue.line, issue.column) == (3, 15)
        assert issue.path[:4] == ("receivers", "nvml", "devices", 0)
        # a device is a number or a name: the message says which
        assert isinstance(issue.message, str)
        assert "integer" in issue.message or "string" in issue.message


class _Pair(StrictModel):
    # the second member's type is not followed by the messages: pydantic's own list of the
    # allowed values is what the message falls back on
    pair: tuple[int, Literal["gzip", "none"]]


def test_a_choice_the_declared_type_does_not_show_still_lists_the_allowed_values() -> None:
    with pytest.raises(ValidationError) as info:
        _Pair.model_validate({"pair": [1, "zip"]})
    positions = Positions(values={("x",): Mark("f.yaml", 3, 7)})
    (issue,) = issues_from(info.value, _Pair, ("x",), positions)
    assert issue.path == ("x", "pair", 1)
    assert issue.message.startswith("must be one of: ")
    assert "gzip" in issue.message and "none" in issue.message
    assert '(got "zip")' in issue.message


def test_a_list_type_without_an_item_type_is_described_as_a_list() -> None:
    assert describe(typing.List) == "a list"  # noqa: UP006 (the bare form is the case)
    assert describe(tuple[()]) == "a list"
    assert describe(list[str]) == "a list of strings"
    assert describe(tuple[str, ...]) == "a list of strings"  # a tuple of any length


def test_a_value_inside_a_mapping_of_options_is_described_by_its_own_type(
    tmp_path: Path,
) -> None:
    text = "receivers:\n  nvml:\n    metrics:\n      gpu.utilization: {enabled: maybe}\n"
    messages = {i.path: i.message for i in _issues(tmp_path, text)}
    path = ("receivers", "nvml", "metrics", "gpu.utilization", "enabled")
    assert messages == {path: "expected a boolean (true or false)"}


def test_an_unknown_key_in_a_list_item_of_a_count_or_list_option_names_the_item_s_keys(
    tmp_path: Path,
) -> None:
    """`simulated: {gpus: ...}` is a count or a list of GPUs: a key of a listed GPU is
    checked against a GPU's keys."""
    text = (
        "receivers:\n  nvml:\n    backend: simulated\n    simulated:\n      gpus:\n"
        "        - {uuid: GPU-1, memroy: 80GiB}\n"
    )
    (issue,) = _issues(tmp_path, text)
    assert issue.path == ("receivers", "nvml", "simulated", "gpus", 0, "memroy")
    assert issue.message.startswith('unknown key; did you mean "memory"? (valid keys: gpm, ')


def test_a_list_of_choices_is_described_with_its_choices(tmp_path: Path) -> None:
    text = "receivers:\n  nvml:\n  kubelet_stats: {metric_groups: 5}\n"
    messages = {i.path: i.message for i in _issues(tmp_path, text)}
    assert messages[("receivers", "kubelet_stats", "metric_groups")] == (
        "expected a list of one of: node, pod, container, volume"
    )


def test_sizes_and_durations_are_described_with_an_example() -> None:
    assert describe(Size) == "a size such as 512KiB or 64MiB"
    assert describe(Duration) == "a duration such as 500ms, 10s or 5m"


class _Shelf(StrictModel):
    size: int = 1


class _Odd(StrictModel):
    # shapes no agent config uses: a duration bound above zero, mapping types the messages
    # do not follow
    grace: typing.Annotated[Duration, Field(ge=2)] = 5.0
    weights: Mapping[str, int] = {}
    shelves: Mapping[str, _Shelf] = {}


def _odd_issue(data: dict[str, object]) -> Issue:
    with pytest.raises(ValidationError) as info:
        _Odd.model_validate(data)
    positions = Positions(values={("x",): Mark("f.yaml", 3, 7)})
    (issue,) = issues_from(info.value, _Odd, ("x",), positions)
    return issue


def test_a_duration_below_a_bound_above_zero_names_the_bound_in_seconds() -> None:
    assert _odd_issue({"grace": "1s"}).message == "must be at least 2s"


def test_a_type_error_where_the_declared_type_is_not_followed_keeps_pydantics_words() -> None:
    issue = _odd_issue({"weights": {"a": "heavy"}})
    assert issue.path == ("x", "weights", "a")
    assert issue.message.startswith("Input should be a valid integer")


def test_an_unknown_key_where_the_declared_type_is_not_followed_is_still_named_unknown() -> None:
    issue = _odd_issue({"shelves": {"a": {"sise": 2}}})
    assert (issue.path, issue.message) == (("x", "shelves", "a", "sise"), "unknown key")
