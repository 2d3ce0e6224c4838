"""The container_env config's documented defaults for runtime requests and workload owners,
and that both options read as written."""

from __future__ import annotations

from tests.unit.processors.container_env.helpers import config


def test_a_runtime_request_is_limited_to_five_seconds_by_default() -> None:
    assert config().timeout == 5.0
    assert config(timeout="250ms").timeout == 0.25


def test_workload_owners_are_added_unless_turned_off() -> None:
    assert config().owners is True
    assert config(owners=False).owners is False
