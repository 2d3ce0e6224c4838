"""Where a key or value came from when the merged tree has no mark of its own for it."""

from __future__ import annotations

from otelgpu.config.positions import Mark, Positions


def test_a_path_with_no_mark_anywhere_is_placed_at_the_start_of_the_config() -> None:
    assert Positions().value(("receivers", "nvml")) == Mark("<config>", 1, 1)
    assert Positions().key(("receivers",)) == Mark("<config>", 1, 1)


def test_a_key_without_its_own_mark_takes_its_values_or_an_ancestors() -> None:
    here = Mark("a.yaml", 3, 5)
    positions = Positions(values={("receivers", "nvml"): here})
    assert positions.key(("receivers", "nvml")) == here
    assert positions.key(("receivers", "nvml", "devices")) == here  # the nearest ancestor
    named = Mark("a.yaml", 3, 3)
    positions.keys[("receivers", "nvml")] = named
    assert positions.key(("receivers", "nvml")) == named
