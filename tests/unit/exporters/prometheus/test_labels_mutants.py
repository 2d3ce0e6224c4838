"""Label rendering behaviour that mutation testing showed no test held (docs/dev/mutation.md).

Only the public behaviour is used (rendered text, `line_prefix`, `rotate`, `take_truncated`),
so these tests hold whatever the renderer's internals look like.
"""

from __future__ import annotations

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
