"""Label rendering behaviour that mutation testing showed no test held (docs/dev/mutation.md).

Only the public behaviour is used (rendered text, `line_prefix`, `rotate`, `take_truncated`),
so these tests hold whatever the renderer's internals look like.
"""

from __future__ import annotations

import hashlib

import pytest

from otelgpu.exporters.prometheus.labels import MAX_VALUE_LENGTH, LabelRenderer

LONG = "x" * (MAX_VALUE_LENGTH + 500)


def _renders_anew(renderer: LabelRenderer, resource: tuple) -> bool:
    """Whether `line_prefix` rendered the series again (a cut value is counted only then)."""
    renderer.take_truncated()
    renderer.line_prefix("m", resource, (), "")
    return renderer.take_truncated() == 1


def test_a_series_used_in_every_generation_stays_cached() -> None:
    renderer = LabelRenderer("otel", {})
    resource = (("pod", LONG),)
    assert _renders_anew(renderer, resource)
    assert not _renders_anew(renderer, resource)
    for _ in range(3):
        renderer.rotate()
        assert not _renders_anew(renderer, resource)  # used since the previous rotation


def test_rotate_retires_a_series_unused_for_a_whole_generation() -> None:
    renderer = LabelRenderer("otel", {})
    resource = (("pod", LONG),)
    assert _renders_anew(renderer, resource)
    renderer.rotate()
    renderer.rotate()  # a whole generation without it
    assert _renders_anew(renderer, resource)


def test_a_cached_prefix_is_the_rendered_one() -> None:
    renderer = LabelRenderer("otel", {"cluster": "c1"})
    resource = (("k8s.pod.name", "p"),)
    first = renderer.line_prefix("gpu_util", resource, (("gpu", "0"),), "")
    renderer.rotate()
    again = renderer.line_prefix("gpu_util", resource, (("gpu", "0"),), "")
    assert first == again == 'gpu_util{cluster="c1",gpu="0",k8s_pod_name="p"} '


def _text(naming: str, resource: dict, attributes: dict | None = None, drop: str = "") -> str:
    renderer = LabelRenderer(naming, {})  # type: ignore[arg-type]
    return renderer.render(tuple(resource.items()), tuple((attributes or {}).items()), drop)


def _info(naming: str, resource: dict) -> str:
    """The label text of a device's info series."""
    renderer = LabelRenderer(naming, {})  # type: ignore[arg-type]
    return renderer.info_prefix("i", tuple(resource.items()))[1:-1]


def test_no_labels_render_as_nothing() -> None:
    assert _text("otel", {}) == ""
    assert _text("otel", {"empty": ""}) == ""


def test_labels_are_sorted_by_name() -> None:
    assert _text("otel", {"b": "2", "c": "3", "a": "1"}) == '{a="1",b="2",c="3"}'


def test_the_dropped_key_is_left_out_from_any_source() -> None:
    renderer = LabelRenderer("otel", {"split": "c"})
    assert renderer.render((("split", "r"), ("a", "1")), (("split", "p"),), "split") == '{a="1"}'
    assert renderer.render((("a", "1"),), (), "") == '{a="1",split="c"}'


def test_values_of_other_types_render_as_text() -> None:
    assert _text("otel", {"on": True, "off": False, "n": 0, "x": 1.5}) == (
        '{n="0",off="false",on="true",x="1.5"}'
    )


@pytest.mark.parametrize(
    ("value", "escaped"),
    [("a\\b", "a\\\\b"), ('a"b', 'a\\"b'), ("a\nb", "a\\nb"), ("plain", "plain")],
)
def test_each_escaped_character_alone_is_escaped(value: str, escaped: str) -> None:
    assert _text("otel", {"v": value}) == f'{{v="{escaped}"}}'


def test_a_value_of_exactly_the_maximum_length_is_not_cut() -> None:
    renderer = LabelRenderer("otel", {})
    value = "v" * MAX_VALUE_LENGTH
    assert renderer.render((("k", value),), ()) == f'{{k="{value}"}}'
    assert renderer.take_truncated() == 0


def test_a_cut_value_is_exactly_the_maximum_length_and_ends_with_its_hash() -> None:
    renderer = LabelRenderer("otel", {})
    value = "v" * (MAX_VALUE_LENGTH + 1)
    cut = _only_value(renderer.render((("k", value),), ()))
    digest = hashlib.sha256(value.encode()).hexdigest()[:16]
    assert len(cut) == MAX_VALUE_LENGTH
    assert cut == "v" * (MAX_VALUE_LENGTH - 17) + "\u2026" + digest
    assert renderer.take_truncated() == 1
    assert renderer.take_truncated() == 0  # taken


def test_a_long_value_with_a_lone_surrogate_is_cut_and_rendered() -> None:
    renderer = LabelRenderer("otel", {})
    cut = _only_value(renderer.render((("k", "\ud800" + "v" * 2000),), ()))
    assert cut.startswith("\ufffdv") and len(cut) == MAX_VALUE_LENGTH
    cut.encode("utf-8")  # the body can be encoded


def _only_value(text: str) -> str:
    assert text.startswith('{k="') and text.endswith('"}'), text
    return text[4:-2]


def test_reserved_names_get_the_key_prefix_in_both_namings() -> None:
    assert _text("otel", {"le": "1", "quantile": "q"}) == '{key_le="1",key_quantile="q"}'
    assert _text("dcgm", {"k8s.pod.label.le": "1"}) == '{key_le="1"}'


def test_dcgm_prefix_forms() -> None:
    resource = {
        "container.env.TEAM.X": "e",
        "k8s.pod.label.app.kubernetes.io/name": "n",
        "container.env.": "bare",  # the prefix alone: a plain key
        "k8s.pod.label.": "bare2",
    }
    assert _text("dcgm", resource) == (
        '{app_kubernetes_io_name="n",container_env_="bare",env_TEAM_X="e",k8s_pod_label_="bare2"}'
    )


def test_dcgm_mig_labels_need_a_parent() -> None:
    # Without hw.parent, hw.id is the GPU's own UUID; with it, UUID is the parent's.
    assert _text("dcgm", {"hw.id": "GPU-1"}) == '{UUID="GPU-1"}'
    assert _text("dcgm", {"hw.id": "MIG-1", "hw.parent": "GPU-1"}) == '{UUID="GPU-1"}'
    assert _info("dcgm", {"hw.id": "MIG-1", "hw.parent": "GPU-1"}) == (
        '{UUID="GPU-1",hw_id="MIG-1"}'
    )
    assert _info("dcgm", {"hw.id": "GPU-1"}) == '{UUID="GPU-1"}'
    assert _text("otel", {"hw.id": "MIG-1", "hw.parent": "GPU-1"}) == (
        '{hw_id="MIG-1",hw_parent="GPU-1"}'
    )


def test_a_dcgm_name_beats_colliding_plain_keys_whatever_their_order() -> None:
    # `k8s.pod.label.pod` becomes `pod`, dcgm's name for k8s.pod.name, and sorts before it:
    # the authoritative value wins anyway, and is not joined with the other.
    resource = {"k8s.pod.label.pod": "x", "k8s.pod.name": "p", "k8s.pod.label.gpu": "y"}
    assert _text("dcgm", resource) == '{gpu="y",pod="p"}'


def test_colliding_plain_keys_all_join_but_only_equals_join() -> None:
    assert _text("otel", {"a.b": "1", "a_b": "2"}) == '{a_b="1;2"}'
    assert _text("otel", {"a_b": "2", "a.b": "1"}) == '{a_b="1;2"}'


def test_nothing_is_dropped_unless_asked() -> None:
    assert LabelRenderer("otel", {}).render((("XX", "1"),), ()) == '{XX="1"}'


def test_the_parent_uuid_of_a_mig_instance_beats_a_colliding_pod_label() -> None:
    resource = {"hw.id": "MIG-1", "hw.parent": "GPU-1", "k8s.pod.label.UUID": "x"}
    assert _text("dcgm", resource) == '{UUID="GPU-1"}'


def test_a_plain_key_is_not_authoritative_in_dcgm_naming() -> None:
    assert _text("dcgm", {"pod": "x", "k8s.pod.name": "p"}) == '{pod="p"}'


def test_the_label_name_memo_stays_bounded_and_right() -> None:
    """Keys a peer sends are unbounded: the memo of label names is cleared when full, and a
    name looked up after that is still the right one."""
    from otelgpu.exporters.prometheus.labels import _NAMES_KEPT

    renderer = LabelRenderer("otel", {})
    for n in range(_NAMES_KEPT + 10):
        assert renderer.render((), ((f"k.{n}", "v"),)) == f'{{k_{n}="v"}}'
    assert len(renderer._names) <= _NAMES_KEPT
    assert renderer.render((), (("le", "1"),)) == '{key_le="1"}'
