"""Component IDs and the explicit registry."""

from __future__ import annotations

import pytest

from otelgpu.builtins import builtin_factories, builtin_registry
from otelgpu.component import ComponentID, Kind
from otelgpu.exporters import debug
from otelgpu.registry import Registry


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nvml", ComponentID("nvml")),
        ("nvml/gpu0", ComponentID("nvml", "gpu0")),
        ("k8s_attributes/a.b-c", ComponentID("k8s_attributes", "a.b-c")),
    ],
)
def test_component_id_parses_and_prints(text: str, expected: ComponentID) -> None:
    assert ComponentID.parse(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize("bad", ["", "/x", "9x", "a-b", "a/", "a/b/c", "a/b c", "x" * 64])
def test_component_id_refuses_bad_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid component id"):
        ComponentID.parse(bad)


def test_registry_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match='duplicate exporter factory "debug"'):
        Registry([debug.factory, debug.factory])


def test_unknown_type_names_the_valid_ones() -> None:
    registry = Registry([debug.factory])
    with pytest.raises(KeyError, match=r'unknown exporter type "debgu" \(valid: debug\)'):
        registry.get(Kind.EXPORTER, "debgu")
    with pytest.raises(KeyError, match=r'unknown receiver type "nvml" \(valid: none\)'):
        registry.get(Kind.RECEIVER, "nvml")


def test_builtins_are_unique_and_typed_by_convention() -> None:
    registry = builtin_registry()
    assert len(registry) == len(builtin_factories())
    for factory in registry:
        ComponentID.parse(factory.type)  # the collector's type rule
        assert factory.type == factory.type.lower()
        assert factory.config_type.model_config.get("extra") == "forbid", factory.type
        assert factory.config_type.__name__.endswith(f"{factory.kind.value.capitalize()}Config"), (
            factory.type
        )
        factory.config_type()  # the defaults alone are a valid config
